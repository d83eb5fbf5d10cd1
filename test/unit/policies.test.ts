/** Pure policies and parsers: order/payment transitions, timestamps, cursors, money, ids. */
import { describe, expect, it } from 'vitest';
import { ORDER_STATUSES, ORDER_TRANSITIONS, PAYMENT_STATUSES, canMoveOrder, canMovePayment, pathTo, restockReasonFor } from '../../src/orders/order-status.ts';
import { parseIsoTimestamp } from '../../src/shared/time.ts';
import { formatCursor, parseCursor } from '../../src/shared/cursor.ts';
import { ApiError } from '../../src/shared/problem.ts';
import { centsToDecimal, toCents } from '../../src/shared/money.ts';
import { uuidv7 } from '../../src/shared/uuid-v7.ts';

describe('order status transitions (docs/contract/decisions.md)', () => {
  const allowed: [string, string][] = [
    ['pending', 'processing'],
    ['pending', 'preparing'],
    ['pending', 'cancelled'],
    ['processing', 'ready'],
    ['processing', 'shipped'],
    ['processing', 'cancelled'],
    ['preparing', 'ready'],
    ['preparing', 'cancelled'],
    ['ready', 'shipped'],
    ['ready', 'delivered'],
    ['ready', 'completed'],
    ['ready', 'cancelled'],
    ['shipped', 'delivered'],
    ['delivered', 'completed'],
    ['delivered', 'refunded'],
    ['completed', 'refunded'],
  ];
  it('allows exactly the listed moves', () => {
    for (const from of ORDER_STATUSES) {
      for (const to of ORDER_STATUSES) {
        expect(canMoveOrder(from, to), `${from} → ${to}`).toBe(allowed.some(([f, t]) => f === from && t === to));
      }
    }
  });
  it('payment: pending → paid|failed|expired, failed → pending|paid, nothing else', () => {
    const ok = ['pending>paid', 'pending>failed', 'pending>expired', 'failed>pending', 'failed>paid'];
    for (const from of PAYMENT_STATUSES) for (const to of PAYMENT_STATUSES) expect(canMovePayment(from, to)).toBe(ok.includes(`${from}>${to}`));
  });
  it('restock reasons and paths to every status', () => {
    expect(restockReasonFor('cancelled')).toBe('cancel');
    expect(restockReasonFor('refunded')).toBe('refund');
    expect(restockReasonFor('shipped')).toBeUndefined();
    for (const target of ORDER_STATUSES) {
      const path = pathTo('pending', target)!;
      let at = 'pending' as (typeof ORDER_STATUSES)[number];
      for (const step of path) {
        expect(ORDER_TRANSITIONS[at]).toContain(step);
        at = step;
      }
      expect(at).toBe(target);
    }
  });
});

describe('ISO timestamps', () => {
  it('canonicalises dates and timestamps to microsecond text with offset', () => {
    expect(parseIsoTimestamp('2026-01-31')).toBe('2026-01-31T00:00:00.000000+00:00');
    expect(parseIsoTimestamp('2026-01-31T12:30:05.123456Z')).toBe('2026-01-31T12:30:05.123456+00:00');
    expect(parseIsoTimestamp('2026-01-31T12:30:05+0530')).toBe('2026-01-31T12:30:05.000000+05:30');
    expect(parseIsoTimestamp('2026-01-31T12:30')).toBe('2026-01-31T12:30:00.000000+00:00');
  });
  it('rejects what is not one', () => {
    for (const bad of [
      '',
      'yesterday',
      '2026-02-30',
      '2026-13-01',
      '2026-01-01T24:00:00Z',
      '2026-01-01T00:00:00.1234567Z',
      '2026-01-01T00:00:00+15:00',
      "2026-01-01' OR 1=1",
    ]) {
      expect(parseIsoTimestamp(bad), bad).toBeUndefined();
    }
    expect(parseIsoTimestamp('2026-01-01', { dateOnly: false })).toBeUndefined();
  });
});

describe('cursors', () => {
  it('round-trips a next_cursor and accepts a plain timestamp', () => {
    const id = '0192f7a0-0000-7000-8000-000000000001';
    const c = formatCursor('2026-11-21T10:00:00.123456Z', id);
    expect(parseCursor(c)).toEqual({ ts: '2026-11-21T10:00:00.123456+00:00', id });
    expect(parseCursor('2026-11-21T10:00:00Z')).toEqual({ ts: '2026-11-21T10:00:00.000000+00:00', id: undefined });
  });
  it('rejects malformed cursors with a 400 naming the parameter', () => {
    for (const bad of ['x', '2026-11-21_', '2026-11-21T10:00:00Z_abc', '2026-11-21_0192f7a0-0000-7000-8000-000000000001']) {
      try {
        parseCursor(bad);
        expect.unreachable(bad);
      } catch (error) {
        expect(error).toBeInstanceOf(ApiError);
        expect((error as ApiError).errors?.[0]?.param).toBe('cursor');
      }
    }
  });
});

describe('money', () => {
  it('is exact in cents', () => {
    expect(toCents(19.99)).toBe(1999);
    expect(toCents(0.1 + 0.2)).toBe(30);
    expect(toCents(1.999)).toBeUndefined();
    expect(toCents(Number.NaN)).toBeUndefined();
    expect(centsToDecimal(1999)).toBe('19.99');
    expect(centsToDecimal(5)).toBe('0.05');
    expect(centsToDecimal(-150)).toBe('-1.50');
  });
});

describe('uuidv7', () => {
  it('is a version 7 UUID and monotonic within a millisecond', () => {
    const ids = Array.from({ length: 5000 }, () => uuidv7(1_700_000_000_000));
    for (const id of ids.slice(0, 5)) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
