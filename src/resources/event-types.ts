/**
 * The event types as the API names them: each declared resource's (registry.ts) and `ping`, and
 * which of them a token may see. Data plus pure functions, so the scope rule is tested without I/O.
 * The event log itself (events/event-log.ts) stores whatever type its caller names: it is
 * infrastructure and knows no resource.
 */
import { EVENT_TYPE_SCOPES, FEED_EVENT_TYPES, type FeedEventType } from './registry.ts';

export type EventType = FeedEventType | 'ping';
export const EVENT_TYPES: readonly EventType[] = [...FEED_EVENT_TYPES, 'ping'];

/** The event types a token with `scopes` may see, in FEED_EVENT_TYPES order. */
export function visibleEventTypes(scopes: readonly string[]): FeedEventType[] {
  // Any scope list (a token's): the read scopes among them decide.
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
