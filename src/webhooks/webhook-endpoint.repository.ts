/**
 * SQL of webhook endpoints. Rows become `WebhookEndpoint` (the admin API's shape) through one
 * mapping function, `endpointRowToEndpoint`. The admin API's statements act in the request's store
 * and name it (`ownStoreIs`, `ownStore`: decision 0051); the worker's (`enabledEndpoint…`) work
 * across stores and name each endpoint's store.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { WriteContext } from '../db/write-clock.ts';
import { ownStore, ownStoreIs } from '../db/store-scope.ts';
import type { DeliveryOrder } from './webhook.tables.ts';
import { destinationKind, redactDestinationUrl, type DestinationKind } from './webhook-destination.ts';
import type { CredentialsSummary } from './endpoint-credentials.ts';

export type EndpointState = 'active' | 'paused' | 'disabled';

/** An endpoint as the admin API shows it (never with its secret, nor a broker URL's password). */
export interface WebhookEndpoint {
  id: string;
  /** The URL; a broker URL's password reads `****` (decision 0031). */
  url: string;
  /** Where deliveries go, from the URL's scheme: an HTTPS receiver or a broker. */
  destination: DestinationKind;
  description: string | null;
  event_types: string[];
  enabled: boolean;
  /** `fifo`: in the events' order, a batch at a time (decision 0059); `unordered`: as slots allow. */
  delivery_order: DeliveryOrder;
  /** Most events in one FIFO batch. */
  batch_size: number;
  state: EndpointState;
  paused_until: string | null;
  consecutive_failures: number;
  disabled_reason: string | null;
  /** Extra headers, OAuth client credentials and a client certificate, their secrets as "set" (decision 0058); null: none. */
  credentials: CredentialsSummary | null;
  created_at: string;
  updated_at: string;
}

export interface EndpointSecrets {
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
}

interface EndpointRow {
  id: string;
  url: string;
  description: string | null;
  event_types: string[];
  enabled: boolean;
  delivery_order: DeliveryOrder;
  batch_size: number;
  paused_until: string | null;
  paused_until_ms: number | null;
  consecutive_failures: number;
  disabled_reason: string | null;
  credentials: CredentialsSummary | null;
  created_at: string;
  updated_at: string;
}

const endpointColumns = sql`
  e.id, e.url, e.description, e.event_types, e.enabled, e.delivery_order, e.batch_size, iso_utc(e.paused_until) AS paused_until,
  (extract(epoch FROM e.paused_until) * 1000)::float8 AS paused_until_ms,
  e.consecutive_failures, e.disabled_reason, e.credentials, iso_utc(e.created_at) AS created_at, iso_utc(e.updated_at) AS updated_at`;

/**
 * The admin view of a row at `now`: disabled when not enabled; paused while the breaker holds it
 * (paused_until ahead, or failures at the threshold with the probe still to succeed); else active.
 */
export function endpointRowToEndpoint(row: EndpointRow, now: number, breakerThreshold: number): WebhookEndpoint {
  const paused = (row.paused_until_ms !== null && row.paused_until_ms > now) || row.consecutive_failures >= breakerThreshold;
  return {
    id: row.id,
    url: redactDestinationUrl(row.url),
    destination: destinationKind(row.url),
    description: row.description,
    event_types: row.event_types,
    enabled: row.enabled,
    delivery_order: row.delivery_order,
    batch_size: row.batch_size,
    state: !row.enabled ? 'disabled' : paused ? 'paused' : 'active',
    paused_until: row.paused_until,
    consecutive_failures: row.consecutive_failures,
    disabled_reason: row.disabled_reason,
    credentials: row.credentials,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export interface EndpointView {
  now: number;
  breakerThreshold: number;
}

export async function listEndpointRows(db: Kysely<Database>, view: EndpointView): Promise<WebhookEndpoint[]> {
  const { rows } = await sql<EndpointRow>`
    SELECT ${endpointColumns} FROM webhook_endpoints e WHERE ${ownStoreIs('e.store_id')} ORDER BY e.created_at, e.id
  `.execute(db);
  return rows.map((r) => endpointRowToEndpoint(r, view.now, view.breakerThreshold));
}

export async function findEndpoint(db: Kysely<Database>, id: string, view: EndpointView): Promise<WebhookEndpoint | undefined> {
  const { rows } = await sql<EndpointRow>`
    SELECT ${endpointColumns} FROM webhook_endpoints e WHERE ${ownStoreIs('e.store_id')} AND e.id = ${id}::uuid
  `.execute(db);
  return rows[0] && endpointRowToEndpoint(rows[0], view.now, view.breakerThreshold);
}

/** An endpoint's credentials as stored (decision 0058): the summary shown, and the whole sealed. */
export interface StoredCredentials {
  summary: CredentialsSummary;
  sealed: string;
}

export interface NewEndpoint {
  /** Chosen by the caller: sealed credentials are bound to it. */
  id: string;
  url: string;
  description: string | null;
  eventTypes: string[];
  enabled: boolean;
  deliveryOrder: DeliveryOrder;
  batchSize: number;
  secret: string;
  credentials: StoredCredentials | null;
}

/**
 * Inserts an endpoint inside a write-clock transaction, stamped like events are: the poller sends
 * an endpoint the events stamped at or after its creation, and the read horizon then also covers
 * endpoints still being created (the poller never skips past an event a new endpoint should get).
 */
export async function insertEndpoint(write: WriteContext, input: NewEndpoint): Promise<string> {
  const { id } = input;
  await sql`
    INSERT INTO webhook_endpoints (id, store_id, url, description, event_types, enabled, delivery_order, batch_size, secret, credentials, credentials_sealed, created_at, updated_at)
    VALUES (${id}, ${ownStore()}, ${input.url}, ${input.description}, ${input.eventTypes}::text[], ${input.enabled}, ${input.deliveryOrder}, ${input.batchSize},
      ${input.secret}, ${input.credentials ? JSON.stringify(input.credentials.summary) : null}::jsonb, ${input.credentials?.sealed ?? null},
      ${write.stamp}::timestamptz, ${write.stamp}::timestamptz)
  `.execute(write.trx);
  return id;
}

/** A new endpoint's id. */
export function newEndpointId(): string {
  return randomUUID();
}

export interface EndpointPatch {
  url?: string;
  description?: string | null;
  eventTypes?: string[];
  enabled?: boolean;
  /** New credentials; null removes them; undefined keeps them. */
  credentials?: StoredCredentials | null;
  deliveryOrder?: DeliveryOrder;
  batchSize?: number;
}

/**
 * Applies `patch`; `enabled: true` also closes the breaker and clears a disable (410 Gone), so an
 * admin re-enabling an endpoint gets deliveries flowing at once. Returns false when there is no such
 * endpoint.
 */
export async function updateEndpoint(db: Kysely<Database>, id: string, patch: EndpointPatch, nowIso: string): Promise<boolean> {
  const reenable = patch.enabled === true;
  const result = await sql`
    UPDATE webhook_endpoints SET
      url = coalesce(${patch.url ?? null}::text, url),
      description = CASE WHEN ${patch.description !== undefined}::boolean THEN ${patch.description ?? null}::text ELSE description END,
      event_types = coalesce(${patch.eventTypes ?? null}::text[], event_types),
      enabled = coalesce(${patch.enabled ?? null}::boolean, enabled),
      credentials = CASE WHEN ${patch.credentials !== undefined}::boolean THEN ${patch.credentials ? JSON.stringify(patch.credentials.summary) : null}::jsonb ELSE credentials END,
      credentials_sealed = CASE WHEN ${patch.credentials !== undefined}::boolean THEN ${patch.credentials?.sealed ?? null}::text ELSE credentials_sealed END,
      delivery_order = coalesce(${patch.deliveryOrder ?? null}::text, delivery_order),
      batch_size = coalesce(${patch.batchSize ?? null}::int, batch_size),
      consecutive_failures = CASE WHEN ${reenable}::boolean THEN 0 ELSE consecutive_failures END,
      paused_until = CASE WHEN ${reenable}::boolean THEN NULL ELSE paused_until END,
      disabled_reason = CASE WHEN ${reenable}::boolean THEN NULL WHEN ${patch.enabled === false}::boolean THEN 'disabled by an administrator' ELSE disabled_reason END,
      updated_at = ${nowIso}::timestamptz
    WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid
  `.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/** The sealed credentials of endpoint `id` (null: none), or undefined when there is no such endpoint. */
export async function findEndpointSealedCredentials(db: Kysely<Database>, id: string): Promise<string | null | undefined> {
  const { rows } = await sql<{ credentials_sealed: string | null }>`
    SELECT credentials_sealed FROM webhook_endpoints WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid
  `.execute(db);
  return rows[0]?.credentials_sealed;
}

/** The URL of endpoint `id` as stored (with a broker URL's password), or undefined. */
export async function findEndpointUrl(db: Kysely<Database>, id: string): Promise<string | undefined> {
  const { rows } = await sql<{ url: string }>`SELECT url FROM webhook_endpoints WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid`.execute(db);
  return rows[0]?.url;
}

export async function findEndpointSecrets(db: Kysely<Database>, id: string): Promise<EndpointSecrets | undefined> {
  const { rows } = await sql<EndpointSecrets>`
    SELECT secret, previous_secret, iso_utc(previous_secret_expires_at) AS previous_secret_expires_at
    FROM webhook_endpoints WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid
  `.execute(db);
  return rows[0];
}

/** Makes `secret` current; the current one keeps signing until `previousExpiresAtIso`. */
export async function rotateEndpointSecret(db: Kysely<Database>, id: string, secret: string, previousExpiresAtIso: string, nowIso: string): Promise<boolean> {
  const result = await sql`
    UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_expires_at = ${previousExpiresAtIso},
      secret = ${secret}, updated_at = ${nowIso}::timestamptz
    WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid
  `.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/**
 * Deletes an endpoint with its deliveries and their attempts (decision 0020): pending ones are never
 * sent, and the history goes with the endpoint (the audit log keeps what was deleted). The endpoint's
 * row is locked first, so a poller fanning out at that instant waits and then finds it gone; then its
 * deliveries, so an attempt a worker is recording for one of them at that instant is committed
 * before the attempts are deleted, or not recorded at all (the worker's settle finds the delivery
 * gone): no attempt outlives its delivery (webhook_attempts has no foreign key: decision 0044).
 * Returns the deleted deliveries by status, or undefined when there was no such endpoint.
 */
export async function deleteEndpointCascade(db: Kysely<Database>, id: string): Promise<Record<string, number> | undefined> {
  return db.transaction().execute(async (trx) => {
    const { rows: found } = await sql<{ id: string }>`
      SELECT id FROM webhook_endpoints WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid FOR UPDATE
    `.execute(trx);
    if (found.length === 0) return undefined;
    const { rows: counts } = await sql<{ status: string; n: number }>`
      SELECT status, count(*)::int AS n FROM (
        SELECT status FROM webhook_deliveries WHERE ${ownStoreIs('store_id')} AND endpoint_id = ${id}::uuid FOR UPDATE
      ) d GROUP BY status
    `.execute(trx);
    await sql`
      DELETE FROM webhook_attempts a WHERE ${ownStoreIs('a.store_id')}
        AND a.delivery_id IN (SELECT d.id FROM webhook_deliveries d WHERE ${ownStoreIs('d.store_id')} AND d.endpoint_id = ${id}::uuid)
    `.execute(trx);
    await sql`DELETE FROM webhook_deliveries WHERE ${ownStoreIs('store_id')} AND endpoint_id = ${id}::uuid`.execute(trx);
    await sql`DELETE FROM webhook_endpoints WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid`.execute(trx);
    return Object.fromEntries(counts.map((c) => [c.status, c.n]));
  });
}

/** The scheme of every enabled endpoint's URL ('https', 'amqp', …), each once, in every store not being deleted (the worker's). */
export async function enabledEndpointSchemes(db: Kysely<Database>): Promise<string[]> {
  const { rows } = await sql<{ scheme: string }>`
    SELECT DISTINCT lower(split_part(e.url, ':', 1)) AS scheme
    FROM stores st JOIN webhook_endpoints e ON e.store_id = st.id
    WHERE st.status <> 'deleting' AND e.enabled
  `.execute(db);
  return rows.map((r) => r.scheme);
}

/** The URLs of those of `endpoints` (each with its store) that exist and are enabled (endpoint id → URL); the worker's, across stores. */
export async function enabledEndpointUrls(db: Kysely<Database>, endpoints: readonly { id: string; storeId: string }[]): Promise<Map<string, string>> {
  if (endpoints.length === 0) return new Map();
  // Ids are unique across stores: the endpoints' stores and their ids name exactly them.
  const { rows } = await sql<{ id: string; url: string }>`
    SELECT id, url FROM webhook_endpoints
    WHERE store_id = ANY(${[...new Set(endpoints.map((e) => e.storeId))]}::uuid[]) AND id = ANY(${endpoints.map((e) => e.id)}::uuid[]) AND enabled
  `.execute(db);
  return new Map(rows.map((r) => [r.id, r.url]));
}
