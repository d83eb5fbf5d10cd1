/**
 * GET /api/v1/events and /api/v1/events/export: the event log within its retention, with the
 * payloads the webhooks POST, the same cursors and read horizon as every list (decision 0001), and
 * only the event types the token's scopes cover (decision 0004).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sql, type RawBuilder } from 'kysely';
import { eventSource } from '../../../events/event-feed.ts';
import { parseTypeFilter, visibleEventTypes } from '../../../resources/event-types.ts';
import { EVENT_TYPE_SCOPES, FEED_EVENT_TYPES, READ_SCOPES } from '../../../resources/registry.ts';
import { oldestAvailable } from '../../../retention/retention.repository.ts';
import { epochMicros, isoFromMicros, parseIsoTimestamp } from '../../../shared/time.ts';
import { parseCursor } from '../../../shared/cursor.ts';
import { ApiError, invalidParameter } from '../../../shared/problem.ts';
import { Event, eventFilters } from '../../schemas.ts';
import { registerResource, type ListQuery } from './resource-routes.ts';

type EventQuery = ListQuery & { type?: string[]; since?: string };

/** The event types this request asks for and may see; 400 on an unknown type, 403 on one it may not see. */
function requestedTypes(query: EventQuery, request: FastifyRequest) {
  const visible = visibleEventTypes(request.token!.scopes);
  if (query.type === undefined) return visible;
  const parsed = parseTypeFilter(query.type);
  if (!parsed.ok) {
    throw invalidParameter(
      'type',
      `unknown event type ${parsed.unknown.map((t) => `'${t}'`).join(', ')}; expected one or several of ${FEED_EVENT_TYPES.join(', ')}`,
    );
  }
  if (parsed.types.length === 0) throw invalidParameter('type', `must name at least one event type (${FEED_EVENT_TYPES.join(', ')})`);
  const hidden = parsed.types.filter((t) => !visible.includes(t));
  if (hidden.length > 0) {
    const scopes = [...new Set(hidden.map((t) => EVENT_TYPE_SCOPES[t]))];
    throw new ApiError('forbidden', `The API token lacks the scope ${scopes.map((s) => `'${s}'`).join(', ')} needed to read ${hidden.join(', ')} events.`);
  }
  return parsed.types;
}

/**
 * Conditions of one feed page. Events older than the oldest available instant (retention) are
 * hidden even where a dead letter still keeps one, so the feed is always a complete suffix of the
 * log; a cursor or `since` reaching behind it is refused, naming the oldest usable cursor.
 */
async function feedConditions(app: FastifyInstance, query: EventQuery, request: FastifyRequest): Promise<RawBuilder<unknown>[]> {
  const types = requestedTypes(query, request);
  // Test events (decision 0020) are examples sent to one endpoint, never part of the store's history.
  const conditions: RawBuilder<unknown>[] = [sql`e.type = ANY(${types}::text[])`, sql`NOT e.test`];
  const since = query.since === undefined ? undefined : parseIsoTimestamp(query.since);
  if (query.since !== undefined && !since) {
    throw invalidParameter('since', 'must be an ISO 8601 date or timestamp (e.g. 2026-01-31 or 2026-01-31T12:00:00Z)');
  }
  if (since) conditions.push(sql`e.created_at > ${since}::timestamptz`);

  const oldest = await oldestAvailable(app.ctx.database.db, 'events');
  if (oldest) {
    conditions.push(sql`e.created_at >= ${oldest}::timestamptz`);
    const oldestMicros = epochMicros(oldest)!;
    // "Strictly after" this instant is the whole retained log.
    const oldestCursor = isoFromMicros(oldestMicros - 1);
    const behind = (param: string) =>
      invalidParameter(
        param,
        `reaches behind the retention of the event log: events before ${oldest} have been pruned; the oldest available cursor is ${oldestCursor}`,
      );
    if (since && epochMicros(since)! < oldestMicros - 1) throw behind('since');
    if (query.cursor !== undefined && (query.order ?? 'asc') === 'asc') {
      const cursor = parseCursor(query.cursor);
      // A next_cursor (with a tie-breaker) continues inside its instant, which must be complete.
      const limit = cursor.id === undefined ? oldestMicros - 1 : oldestMicros;
      if (epochMicros(cursor.ts)! < limit) throw behind('cursor');
    }
  }
  return conditions;
}

/** Registers the events feed and its export. */
export function registerEventFeed(app: FastifyInstance): void {
  registerResource(app, {
    path: 'events',
    noun: 'event',
    scope: READ_SCOPES,
    tag: 'Events',
    source: eventSource,
    record: Event,
    filters: eventFilters,
    conditions: (query, request) => feedConditions(app, query as EventQuery, request),
    description: {
      list: 'Events of the log within its retention, oldest first: the recommended way to catch up on missed webhooks',
      export: 'Export events as NDJSON',
    },
  });
}
