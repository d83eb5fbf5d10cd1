import { describe, expect, it } from 'vitest';
import { decideAfterFailure, maxAttempts, MAX_RETRY_AFTER_MS, parseRetryAfter } from '../../src/webhooks/retry-policy.ts';
import { decideSettlement, disablesEndpoint } from '../../src/webhooks/delivery-queue.ts';
import { loadConfig } from '../../src/config/config.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const production = { scheduleMs: loadConfig({}).webhookRetryScheduleMs };
const t0 = Date.UTC(2026, 0, 1);

describe('retry policy (pure)', () => {
  it('defaults to the spec schedule: 1 min, 5 min, 30 min, 2 h, 12 h; 6 attempts in all', () => {
    expect(production.scheduleMs).toEqual([1 * MIN, 5 * MIN, 30 * MIN, 2 * HOUR, 12 * HOUR]);
    expect(maxAttempts(production)).toBe(6);
  });

  it('schedules retry n after failed attempt n, then dead-letters when the 5th retry (attempt 6) fails', () => {
    const delays = [1, 2, 3, 4, 5].map((n) => decideAfterFailure(production, n, t0));
    expect(delays).toEqual([1 * MIN, 5 * MIN, 30 * MIN, 2 * HOUR, 12 * HOUR].map((d) => ({ kind: 'retry', delayMs: d, nextAttemptAt: t0 + d })));
    expect(decideAfterFailure(production, 6, t0)).toEqual({ kind: 'dead' });
    // A dead letter retried by hand has attempts past the schedule: one more failure is dead again.
    expect(decideAfterFailure(production, 7, t0)).toEqual({ kind: 'dead' });
  });

  it('honours a Retry-After longer than the scheduled delay, never a shorter one, capped at 24 h', () => {
    expect(decideAfterFailure(production, 1, t0, 10 * MIN)).toMatchObject({ kind: 'retry', delayMs: 10 * MIN });
    expect(decideAfterFailure(production, 1, t0, 5_000)).toMatchObject({ kind: 'retry', delayMs: 1 * MIN });
    expect(decideAfterFailure(production, 1, t0, 30 * 24 * HOUR)).toMatchObject({ kind: 'retry', delayMs: MAX_RETRY_AFTER_MS });
    expect(decideAfterFailure(production, 6, t0, 10 * MIN)).toEqual({ kind: 'dead' });
  });

  it('follows whatever schedule the configuration gives', () => {
    const scaled = { scheduleMs: loadConfig({ WEBHOOK_RETRY_SCHEDULE_MS: '1000,2000' }).webhookRetryScheduleMs };
    expect(maxAttempts(scaled)).toBe(3);
    expect(decideAfterFailure(scaled, 2, t0)).toMatchObject({ delayMs: 2000 });
    expect(decideAfterFailure(scaled, 3, t0)).toEqual({ kind: 'dead' });
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(parseRetryAfter('120', t0)).toBe(120_000);
    expect(parseRetryAfter(new Date(t0 + 90_000).toUTCString(), t0)).toBe(90_000);
    expect(parseRetryAfter(new Date(t0 - 90_000).toUTCString(), t0)).toBe(0);
    expect(parseRetryAfter('soon', t0)).toBeUndefined();
    expect(parseRetryAfter(undefined, t0)).toBeUndefined();
  });

  it('maps an attempt to the delivery transition: success, failed with a retry, dead; 410 disables', () => {
    expect(decideSettlement(production, 3, { outcome: 'success', retryAfterMs: null }, t0)).toEqual({ status: 'succeeded' });
    expect(decideSettlement(production, 3, { outcome: 'timeout', retryAfterMs: null }, t0)).toEqual({ status: 'failed', nextAttemptAt: t0 + 30 * MIN });
    expect(decideSettlement(production, 6, { outcome: 'connection_error', retryAfterMs: null }, t0)).toEqual({ status: 'dead' });
    expect(disablesEndpoint({ statusCode: 410 })).toBe(true);
    expect(disablesEndpoint({ statusCode: 404 })).toBe(false);
  });
});
