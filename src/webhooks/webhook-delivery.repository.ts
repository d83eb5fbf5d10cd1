/**
 * SQL of deliveries as the admin API reads and changes them: lists (newest first, keyset by
 * created_at and id), one delivery with its attempts and event, manual retries, replays and the
 * hourly statistics. Each acts in the request's store and names it in every table it reads or
 * writes (`ownStoreIs`, decision 0051). The worker's claim and settle statements are in delivery-queue.ts.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { WriteContext } from '../db/write-clock.ts';
import { ownStoreIs } from '../db/store-scope.ts';
import './webhook.tables.ts';
import { redactDestinationUrl } from './webhook-destination.ts';

export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed', 'dead'] as const;
/** pending: not tried yet (or retried by hand); failed: last attempt failed, retry scheduled; dead: dead letter. */
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface WebhookDelivery {
  id: string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  endpoint_url: string;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  /** A test delivery of an example event sent by an administrator (decision 0020). */
  test: boolean;
}

export interface WebhookAttempt {
  id: string;
  attempt_number: number;
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  response_body_excerpt: string | null;
  error: string | null;
  outcome: string;
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
}

export interface DeliveryEvent {
  id: string;
  type: string;
  created_at: string;
  data: unknown;
  /** What an update changed, as the event's body carries it (decision 0057); absent on other events. */
  previous?: unknown;
}

const deliveryColumns = sql`
  d.id, d.event_id, d.event_type, d.endpoint_id, e.url AS endpoint_url, d.status, d.attempt_count,
  iso_utc(d.next_attempt_at) AS next_attempt_at, d.last_status_code, d.last_error,
  iso_utc(d.created_at) AS created_at, iso_utc(d.updated_at) AS updated_at, d.test`;

/** One row → the admin API's Delivery (the SELECT already has its shape). */
export function deliveryRowToDelivery(row: WebhookDelivery): WebhookDelivery {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    endpoint_id: row.endpoint_id,
    // A broker URL's password is never shown after creation (decision 0031).
    endpoint_url: redactDestinationUrl(row.endpoint_url),
    status: row.status,
    attempt_count: row.attempt_count,
    next_attempt_at: row.next_attempt_at,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    created_at: row.created_at,
    updated_at: row.updated_at,
    test: row.test,
  };
}

export interface DeliveryListQuery {
  endpointId?: string;
  status?: DeliveryStatus;
  /** A delivery id or an event id: that delivery, or every delivery of that event. */
  id?: string;
  eventType?: string;
  /** Created at or after (inclusive), before (exclusive). */
  fromIso?: string;
  toIso?: string;
  limit: number;
  /** Keyset position: deliveries strictly older than (ts, id). */
  before?: { ts: string; id?: string };
}

/** A page of deliveries, newest first; `limit + 1` rows are read to tell whether more follow. */
export async function listDeliveryRows(db: Kysely<Database>, query: DeliveryListQuery): Promise<WebhookDelivery[]> {
  const conditions = [ownStoreIs('d.store_id')];
  if (query.endpointId) conditions.push(sql`d.endpoint_id = ${query.endpointId}::uuid`);
  if (query.status) conditions.push(sql`d.status = ${query.status}`);
  // Two indexed equalities (primary key, webhook_deliveries_event_idx), never a scan.
  if (query.id) conditions.push(sql`(d.id = ${query.id}::uuid OR d.event_id = ${query.id}::uuid)`);
  if (query.eventType) conditions.push(sql`d.event_type = ${query.eventType}`);
  if (query.fromIso) conditions.push(sql`d.created_at >= ${query.fromIso}::timestamptz`);
  if (query.toIso) conditions.push(sql`d.created_at < ${query.toIso}::timestamptz`);
  if (query.before) {
    conditions.push(
      query.before.id
        ? sql`(d.created_at, d.id) < (${query.before.ts}::timestamptz, ${query.before.id}::uuid)`
        : sql`d.created_at < ${query.before.ts}::timestamptz`,
    );
  }
  const { rows } = await sql<WebhookDelivery>`
    SELECT ${deliveryColumns}
    FROM webhook_deliveries d JOIN webhook_endpoints e ON ${ownStoreIs('e.store_id')} AND e.id = d.endpoint_id
    WHERE ${sql.join(conditions, sql` AND `)}
    ORDER BY d.created_at DESC, d.id DESC
    LIMIT ${query.limit + 1}
  `.execute(db);
  return rows.map(deliveryRowToDelivery);
}

export async function findDelivery(db: Kysely<Database>, id: string): Promise<WebhookDelivery | undefined> {
  const { rows } = await sql<WebhookDelivery>`
    SELECT ${deliveryColumns} FROM webhook_deliveries d JOIN webhook_endpoints e ON ${ownStoreIs('e.store_id')} AND e.id = d.endpoint_id
    WHERE ${ownStoreIs('d.store_id')} AND d.id = ${id}::uuid
  `.execute(db);
  return rows[0] && deliveryRowToDelivery(rows[0]);
}

export async function listAttempts(db: Kysely<Database>, deliveryId: string): Promise<WebhookAttempt[]> {
  const { rows } = await sql<WebhookAttempt>`
    SELECT id, attempt_number, iso_utc(started_at) AS started_at, duration_ms, status_code, response_body_excerpt, error, outcome,
      request_headers, response_headers
    FROM webhook_attempts WHERE ${ownStoreIs('store_id')} AND delivery_id = ${deliveryId}::uuid ORDER BY attempt_number, started_at
  `.execute(db);
  return rows;
}

export async function findEvent(db: Kysely<Database>, eventId: string): Promise<DeliveryEvent | undefined> {
  const { rows } = await sql<DeliveryEvent & { previous: unknown }>`
    SELECT id, type, iso_utc(created_at) AS created_at, data, previous FROM events WHERE ${ownStoreIs('store_id')} AND id = ${eventId}::uuid
  `.execute(db);
  const row = rows[0];
  if (!row) return undefined;
  const { previous, ...event } = row;
  return previous === null || previous === undefined ? event : { ...event, previous };
}

/**
 * Makes the dead or failed deliveries among `ids` (or all dead letters of `endpointId`) due now.
 * A retried dead letter gets one more attempt (its attempt count is past the schedule), a failed
 * delivery keeps its place in the schedule. Returns the ids retried.
 */
export async function retryDeliveries(
  db: Kysely<Database>,
  target: { ids: readonly string[] } | { deadOfEndpoint: string },
  nowIso: string,
): Promise<string[]> {
  const which =
    'ids' in target
      ? sql`id = ANY(${[...new Set(target.ids)]}::uuid[]) AND status IN ('dead','failed')`
      : sql`endpoint_id = ${target.deadOfEndpoint}::uuid AND status = 'dead'`;
  const { rows } = await sql<{ id: string }>`
    UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ${nowIso}, updated_at = ${nowIso}
    WHERE ${ownStoreIs('store_id')} AND ${which}
    RETURNING id
  `.execute(db);
  return rows.map((r) => r.id);
}

/** Queues one delivery of `eventId` to `endpointId`, due at once. */
export async function insertDelivery(
  db: Kysely<Database> | WriteContext['trx'],
  eventId: string,
  eventType: string,
  endpointId: string,
  nowIso: string,
  test = false,
): Promise<string> {
  const id = randomUUID();
  await sql`
    INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at, test)
    SELECT ${id}, e.store_id, ${eventId}, ${eventType}, e.id, 'pending', ${nowIso}, ${nowIso}, ${nowIso}, ${test}
    FROM webhook_endpoints e WHERE ${ownStoreIs('e.store_id')} AND e.id = ${endpointId}
  `.execute(db);
  return id;
}

/**
 * With `failedOnly`, only events that never got through to this endpoint: at least one of their
 * deliveries to it is a dead letter and none succeeded or is still on its way (pending, or failed
 * with a retry scheduled). Decision 0021.
 */
function replayFilter(failedOnly: boolean) {
  if (!failedOnly) return sql`true`;
  return sql`EXISTS (SELECT 1 FROM webhook_deliveries x WHERE ${ownStoreIs('x.store_id')} AND x.event_id = ev.id AND x.endpoint_id = e.id AND x.status = 'dead')
    AND NOT EXISTS (SELECT 1 FROM webhook_deliveries x WHERE ${ownStoreIs('x.store_id')} AND x.event_id = ev.id AND x.endpoint_id = e.id AND x.status <> 'dead')`;
}

/** Events of [fromIso, toIso) that `endpointId` subscribes to (never pings), at most `max` + 1 counted. */
export async function countReplayEvents(
  db: Kysely<Database>,
  endpointId: string,
  fromIso: string,
  toIso: string,
  max: number,
  failedOnly = false,
): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM (
      SELECT 1 FROM events ev JOIN webhook_endpoints e ON ${ownStoreIs('e.store_id')} AND e.id = ${endpointId}::uuid
      WHERE ${ownStoreIs('ev.store_id')} AND ev.created_at >= ${fromIso}::timestamptz AND ev.created_at < ${toIso}::timestamptz AND ev.type <> 'ping' AND NOT ev.test
        AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types)) AND ${replayFilter(failedOnly)}
      LIMIT ${max + 1}
    ) s
  `.execute(db);
  return rows[0]!.n;
}

/** Queues a new delivery to `endpointId` of every subscribed event of [fromIso, toIso), in log order. */
export async function insertReplayDeliveries(
  db: Kysely<Database>,
  endpointId: string,
  fromIso: string,
  toIso: string,
  nowIso: string,
  failedOnly = false,
): Promise<number> {
  const result = await sql`
    INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at)
    SELECT gen_random_uuid(), e.store_id, ev.id, ev.type, e.id, 'pending', ${nowIso}::timestamptz, ${nowIso}::timestamptz, ${nowIso}::timestamptz
    FROM events ev JOIN webhook_endpoints e ON ${ownStoreIs('e.store_id')} AND e.id = ${endpointId}::uuid
    WHERE ${ownStoreIs('ev.store_id')} AND ev.created_at >= ${fromIso}::timestamptz AND ev.created_at < ${toIso}::timestamptz AND ev.type <> 'ping' AND NOT ev.test
      AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types)) AND ${replayFilter(failedOnly)}
    ORDER BY ev.created_at, ev.seq
  `.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export interface EndpointWindowStats {
  /** Attempts started in the window (every outcome but abandoned: it may never have been sent). */
  attempts: number;
  succeeded: number;
  /** succeeded / attempts, 0–1 (null: no attempt). */
  success_rate: number | null;
  /** Attempts that got an answer (an HTTP response, a broker's acknowledgement or refusal), the ones latency is measured on. */
  responses: number;
  /** Median and 95th percentile of duration_ms over attempts with a response (an observed value; null: none). */
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
}

/**
 * Success rate and latency of one endpoint's attempts started in each window [since, nowIso]
 * (decision 0021), all windows in one pass over the attempts of the widest.
 */
export async function endpointAttemptStats<K extends string>(
  db: Kysely<Database>,
  endpointId: string,
  windows: Record<K, string>,
  nowIso: string,
): Promise<Record<K, EndpointWindowStats>> {
  const entries = Object.entries(windows) as [K, string][];
  const widest = entries.map(([, since]) => since).sort()[0]!;
  const columns = entries.map(([, since], i) => {
    const inside = sql`a.started_at >= ${since}::timestamptz`;
    // An answer: an HTTP response, or a broker's acknowledgement or refusal (it has no status code).
    const responded = sql`${inside} AND (a.status_code IS NOT NULL OR a.outcome IN ('success', 'broker_rejected'))`;
    return sql`count(*) FILTER (WHERE ${inside})::int AS ${sql.ref(`attempts_${i}`)},
      count(*) FILTER (WHERE ${inside} AND a.outcome = 'success')::int AS ${sql.ref(`succeeded_${i}`)},
      count(*) FILTER (WHERE ${responded})::int AS ${sql.ref(`responses_${i}`)},
      percentile_disc(0.5) WITHIN GROUP (ORDER BY a.duration_ms) FILTER (WHERE ${responded}) AS ${sql.ref(`p50_${i}`)},
      percentile_disc(0.95) WITHIN GROUP (ORDER BY a.duration_ms) FILTER (WHERE ${responded}) AS ${sql.ref(`p95_${i}`)}`;
  });
  const { rows } = await sql<Record<string, number | null>>`
    SELECT ${sql.join(columns)}
    FROM webhook_attempts a
    -- A settle stamps updated_at after the attempt started: the deliveries touched since the window
    -- opened hold every attempt of the window. Their ids as an array: whatever plan is chosen (an
    -- index probe per delivery, or a hashed filter over the window's attempts) is linear, even on
    -- tables never analysed (PGlite has no autovacuum), where a join was planned as a nested loop
    -- over both tables (6 s for 5,200 deliveries).
    WHERE ${ownStoreIs('a.store_id')} AND a.delivery_id = ANY(ARRAY(
        SELECT d.id FROM webhook_deliveries d
        WHERE ${ownStoreIs('d.store_id')} AND d.endpoint_id = ${endpointId}::uuid AND d.updated_at >= ${widest}::timestamptz
      ))
      AND a.started_at >= ${widest}::timestamptz AND a.started_at <= ${nowIso}::timestamptz
      -- An abandoned attempt is a claim whose worker died before recording anything: it may never
      -- have been sent, so it is not an attempt that reached the receiver (docs/webhooks.md).
      AND a.outcome <> 'abandoned'
  `.execute(db);
  const r = rows[0]!;
  const number = (v: number | null | undefined) => (v === null || v === undefined ? null : Number(v));
  return Object.fromEntries(
    entries.map(([key], i) => {
      const attempts = Number(r[`attempts_${i}`]);
      const succeeded = Number(r[`succeeded_${i}`]);
      const stats: EndpointWindowStats = {
        attempts,
        succeeded,
        success_rate: attempts === 0 ? null : succeeded / attempts,
        responses: Number(r[`responses_${i}`]),
        latency_p50_ms: number(r[`p50_${i}`]),
        latency_p95_ms: number(r[`p95_${i}`]),
      };
      return [key, stats];
    }),
  ) as Record<K, EndpointWindowStats>;
}

export interface HourBucket {
  hour: string;
  succeeded: number;
  failed: number;
  dead: number;
}

export interface DeliveryStats {
  buckets: HourBucket[];
  totals: { succeeded: number; failed: number; dead: number; pending: number };
}

/**
 * Activity per hour over the last `hours` hours up to `nowIso` (every hour present, zeros
 * included): deliveries that succeeded, failed attempts (not abandoned ones), deliveries dead-lettered. Totals are the
 * deliveries in each status now (pending counts everything waiting: never tried or retried by hand).
 */
export async function deliveryStats(db: Kysely<Database>, hours: number, nowIso: string): Promise<DeliveryStats> {
  // One range scan and GROUP BY per table (date_trunc works in the session's time zone, UTC).
  const { rows: buckets } = await sql<HourBucket>`
    WITH hours AS (
      SELECT generate_series(date_trunc('hour', ${nowIso}::timestamptz) - make_interval(hours => ${hours - 1}),
                             date_trunc('hour', ${nowIso}::timestamptz), interval '1 hour') AS hour
    ), since AS (
      SELECT date_trunc('hour', ${nowIso}::timestamptz) - make_interval(hours => ${hours - 1}) AS t
    ), succeeded AS (
      -- Through each delivery's success attempt (succeeded_at has no index: decision 0044), which
      -- started at most one attempt's duration (WEBHOOK_TIMEOUT_MS, at most 10 minutes) before the
      -- settle stamped succeeded_at; the hour of margin covers that.
      SELECT date_trunc('hour', d.succeeded_at) AS hour, count(DISTINCT d.id)::int AS n
      FROM webhook_attempts a JOIN webhook_deliveries d ON ${ownStoreIs('d.store_id')} AND d.id = a.delivery_id
      WHERE ${ownStoreIs('a.store_id')} AND a.outcome = 'success' AND a.started_at >= (SELECT t FROM since) - interval '1 hour'
        AND d.succeeded_at >= (SELECT t FROM since)
      GROUP BY 1
    ), failed AS (
      SELECT date_trunc('hour', started_at) AS hour, count(*)::int AS n FROM webhook_attempts
      WHERE ${ownStoreIs('store_id')} AND started_at >= (SELECT t FROM since) AND outcome NOT IN ('success', 'abandoned') GROUP BY 1
    ), dead AS (
      SELECT date_trunc('hour', dead_at) AS hour, count(*)::int AS n FROM webhook_deliveries
      WHERE ${ownStoreIs('store_id')} AND dead_at >= (SELECT t FROM since) GROUP BY 1
    )
    SELECT iso_utc(h.hour) AS hour, coalesce(s.n, 0) AS succeeded, coalesce(f.n, 0) AS failed, coalesce(d.n, 0) AS dead
    FROM hours h
    LEFT JOIN succeeded s ON s.hour = h.hour
    LEFT JOIN failed f ON f.hour = h.hour
    LEFT JOIN dead d ON d.hour = h.hour
    ORDER BY h.hour
  `.execute(db);
  const { rows } = await sql<{ status: DeliveryStatus; n: number }>`
    SELECT status, count(*)::int AS n FROM webhook_deliveries WHERE ${ownStoreIs('store_id')} GROUP BY status
  `.execute(db);
  const by = Object.fromEntries(rows.map((r) => [r.status, r.n])) as Partial<Record<DeliveryStatus, number>>;
  return {
    buckets,
    totals: { succeeded: by.succeeded ?? 0, failed: by.failed ?? 0, dead: by.dead ?? 0, pending: by.pending ?? 0 },
  };
}
