/**
 * The events feed (GET /api/v1/events): the event log read like any other list, with the payloads
 * the webhooks POST. Which events a token may see is data (EVENT_TYPE_SCOPES, derived from the resource declarations) plus pure functions,
 * so the rule is tested without I/O.
 */
import { eventEnvelope } from './event-envelope.ts';
import { sql } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';
import { EVENT_TYPE_SCOPES, FEED_EVENT_TYPES, type FeedEventType } from '../resources/registry.ts';
import type { Scope } from '../tokens/token.service.ts';

/** The event types a token with `scopes` may see, in FEED_EVENT_TYPES order. */
export function visibleEventTypes(scopes: readonly Scope[]): FeedEventType[] {
  return FEED_EVENT_TYPES.filter((type) => scopes.includes(EVENT_TYPE_SCOPES[type]));
}

export type TypeFilter = { ok: true; types: FeedEventType[] } | { ok: false; unknown: string[] };

/**
 * Parses the `type` filter: values given repeatedly and/or comma-separated, blanks ignored,
 * duplicates merged. Unknown names are reported, never dropped silently.
 */
export function parseTypeFilter(values: readonly string[]): TypeFilter {
  const names = values
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
  const known = new Set<string>(FEED_EVENT_TYPES);
  const unknown = [...new Set(names.filter((n) => !known.has(n)))];
  if (unknown.length > 0) return { ok: false, unknown };
  return { ok: true, types: FEED_EVENT_TYPES.filter((t) => names.includes(t)) };
}

/** JSON of the event row aliased `e`: the envelope a webhook delivery POSTs too (event-envelope.ts). */
export const eventJson = eventEnvelope('e');

/** The event log as a keyset list: (created_at, id), served by events_created_at_id_idx. */
export const eventSource: ListSource = {
  from: sql`events e`,
  lastModified: sql`e.created_at`,
  id: sql`e.id`,
  json: eventJson,
};
