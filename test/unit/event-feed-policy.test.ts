/** Which events a token sees and how the `type` filter reads: pure policy, no I/O. */
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES, parseTypeFilter, visibleEventTypes } from '../../src/resources/event-types.ts';
import { EVENT_TYPE_SCOPES, FEED_EVENT_TYPES, READ_SCOPES } from '../../src/resources/registry.ts';
import { epochMicros, isoFromMicros } from '../../src/shared/time.ts';

describe('events feed policy', () => {
  it('serves every logged type but ping, each under its resource scope', () => {
    expect([...FEED_EVENT_TYPES, 'ping'].sort()).toEqual([...EVENT_TYPES].sort());
    expect(Object.keys(EVENT_TYPE_SCOPES).sort()).toEqual([...FEED_EVENT_TYPES].sort());
  });

  it('shows a token the types of the resources it may read', () => {
    expect(visibleEventTypes(['orders:read'])).toEqual(['order.created', 'order.updated']);
    expect(visibleEventTypes(['inventory:read'])).toEqual(['inventory.updated', 'stock_movement.created']);
    expect(visibleEventTypes(['products:read', 'customers:read'])).toEqual(['product.created', 'product.updated', 'customer.created', 'customer.updated']);
    expect(visibleEventTypes(['admin'])).toEqual([]);
    expect(visibleEventTypes(READ_SCOPES)).toEqual(FEED_EVENT_TYPES);
  });

  it('reads repeated and comma-separated types, merging duplicates, and reports unknown ones', () => {
    expect(parseTypeFilter(['order.updated,order.created', ' order.created ', 'product.created'])).toEqual({
      ok: true,
      types: ['product.created', 'order.created', 'order.updated'],
    });
    expect(parseTypeFilter([','])).toEqual({ ok: true, types: [] });
    expect(parseTypeFilter(['order.created,order.shipped', 'ping'])).toEqual({ ok: false, unknown: ['order.shipped', 'ping'] });
  });

  it('converts timestamps to microseconds and back exactly', () => {
    const t = '2026-11-21T14:05:30.770123Z';
    expect(epochMicros(t)).toBe(Date.parse('2026-11-21T14:05:30Z') * 1000 + 770123);
    expect(isoFromMicros(epochMicros(t)!)).toBe(t);
    expect(isoFromMicros(epochMicros(t)! - 1)).toBe('2026-11-21T14:05:30.770122Z');
    expect(epochMicros('2026-11-21T16:05:30.770123+02:00')).toBe(epochMicros(t));
    expect(epochMicros('not a time')).toBeUndefined();
  });
});
