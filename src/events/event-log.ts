/**
 * The append-only event log. Every write appends its events in the same transaction as the change
 * (see db/write-clock.ts), stamped with the transaction's stamp, so the log and the data never
 * disagree. Product, order and customer events carry the full resource as `data`, built by the same
 * SQL as the read API.
 *
 * Event types (docs/contract/decisions.md): each resource's and `ping` (resources/event-types.ts); the log is
 * infrastructure and stores the type its caller names.
 */
import { sql, type RawBuilder } from 'kysely';
import { randomUUID } from 'node:crypto';
import type { WriteContext } from '../db/write-clock.ts';
import { ownStore } from '../db/store-scope.ts';
import { wroteRows } from '../db/statistics.ts';
import { currentTraceContext } from '../shared/tracing.ts';

/** The resource kind of each event type (the first part of the type). */
export function resourceTypeOf(type: string): string {
  return type.split('.')[0]!;
}

/**
 * Appends one event of `type` per row of each part's `source` (a SELECT returning columns
 * `resource_id`, `data` (json) and, when the part says `previous`, `previous` (json: what an update
 * changed, decision 0057), over the rows of the statement's store: the events are that
 * store's), all in ONE statement whatever the row count, so a bulk import stays cheap: in the order
 * of `parts` and, within a part, by resource id (a step of an import appends three kinds).
 * The parts' `resource_id` columns must have one type (every resource's is its uuid). Returns the
 * number of events appended.
 */
export async function appendEventsInOrder(
  ctx: WriteContext,
  parts: readonly { type: string; source: RawBuilder<unknown>; previous?: boolean }[],
): Promise<number> {
  if (parts.length === 0) return 0;
  const sources = sql.join(
    parts.map(
      ({ type, source, previous }, part) =>
        sql`SELECT ${part}::int AS part, ${type}::text AS type, ${resourceTypeOf(type)}::text AS resource_type, s.resource_id, s.data,
          ${previous ? sql`s.previous` : sql`NULL`}::json AS previous FROM (${source}) AS s`,
    ),
    sql` UNION ALL `,
  );
  const trace = currentTraceContext();
  const result = await sql`
    INSERT INTO events (id, store_id, type, resource_type, resource_id, data, previous, created_at, trace_parent, trace_state)
    SELECT gen_random_uuid(), ${ownStore()}, s.type, s.resource_type, s.resource_id::text, s.data::json, s.previous, ${ctx.stamp}::timestamptz,
      ${trace.traceparent}::text, ${trace.tracestate}::text
    FROM (${sources}) AS s
    ORDER BY s.part, s.resource_id
  `.execute(ctx.trx);
  const appended = Number(result.numAffectedRows ?? 0);
  // A bulk write's events: the next statement's plan (of this transaction or another) needs the
  // log's statistics (decision 0067).
  await wroteRows(ctx.trx, 'events', appended);
  return appended;
}

/**
 * Appends one test event (decision 0020): an example an administrator sends to one endpoint, kept in
 * the log so its delivery is signed and shown like a real one, but never in the feed, the fan-out or
 * a replay; `previous` as an `*.updated` event carries it (decision 0057). Returns its id.
 */
export async function appendTestEvent(ctx: WriteContext, type: string, resourceId: string, data: unknown, previous?: unknown): Promise<string> {
  const id = randomUUID();
  const trace = currentTraceContext();
  await sql`
    INSERT INTO events (id, store_id, type, resource_type, resource_id, data, previous, created_at, test, trace_parent, trace_state)
    VALUES (${id}, ${ownStore()}, ${type}, ${resourceTypeOf(type)}, ${resourceId}, ${JSON.stringify(data)}::json,
      ${previous === undefined ? null : JSON.stringify(previous)}::json, ${ctx.stamp}::timestamptz, true,
      ${trace.traceparent}, ${trace.tracestate})
  `.execute(ctx.trx);
  return id;
}

/** Appends one event with the given JSON data. Returns its id. */
export async function appendEvent(ctx: WriteContext, type: string, resourceId: string, data: unknown): Promise<string> {
  const id = randomUUID();
  const trace = currentTraceContext();
  await sql`
    INSERT INTO events (id, store_id, type, resource_type, resource_id, data, created_at, trace_parent, trace_state)
    VALUES (${id}, ${ownStore()}, ${type}, ${resourceTypeOf(type)}, ${resourceId}, ${JSON.stringify(data)}::json, ${ctx.stamp}::timestamptz,
      ${trace.traceparent}, ${trace.tracestate})
  `.execute(ctx.trx);
  return id;
}
