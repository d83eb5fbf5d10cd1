/**
 * What an administrator must notice in an incident: endpoints paused by the circuit breaker or
 * disabled, and dead letters — in total and since this administrator last looked
 * (admin_users.alerts_seen_at, migration 0012; the overview marks them seen). The same conditions
 * are Prometheus gauges read from the database at scrape time (docs/operations.md has an example
 * alert rule):
 *
 *   store_api_webhook_endpoints{state="active|paused|disabled"}   endpoints by state
 *   store_api_webhook_dead_letters                                 deliveries dead now
 */
import client from 'prom-client';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { ownStoreIs } from '../../db/store-scope.ts';
import type {} from '../sessions/admin-user.table.ts';
import { redactDestinationUrl } from '../../webhooks/webhook-destination.ts';

export interface AlertEndpoint {
  id: string;
  url: string;
  state: 'paused' | 'disabled';
  paused_until: string | null;
  disabled_reason: string | null;
}

/** An admin-scoped key acting as a viewer because its maker has no second factor the store requires. */
export interface AlertKey {
  id: string;
  name: string;
  prefix: string;
  maker_email: string | null;
}

export interface Alerts {
  endpoints: AlertEndpoint[];
  /**
   * While an owner requires a second factor: the store's live admin keys whose maker (an owner or
   * admin) has none; each acts as a viewer until she sets one up (decision 0028, amended).
   */
  keys_without_second_factor: AlertKey[];
  dead_letters: { total: number; since_seen: number };
  /** When this administrator last looked (null: never, or a token). */
  seen_at: string | null;
  /** Anything to look at: an endpoint paused or disabled, or new dead letters. */
  attention: boolean;
}

/** The alerts as one administrator sees them (`adminUserId` undefined: a token, nothing "seen"). */
export async function currentAlerts(db: Kysely<Database>, adminUserId?: string): Promise<Alerts> {
  const seen = adminUserId
    ? ((await db.selectFrom('admin_users').select(sql<string | null>`iso_utc(alerts_seen_at)`.as('seen_at')).where('id', '=', adminUserId).executeTakeFirst())
        ?.seen_at ?? null)
    : null;
  const { rows: stored } = await sql<AlertEndpoint>`
    SELECT id, url, CASE WHEN NOT enabled THEN 'disabled' ELSE 'paused' END AS state,
           iso_utc(paused_until) AS paused_until, disabled_reason
    FROM webhook_endpoints
    WHERE ${ownStoreIs('store_id')} AND (NOT enabled OR paused_until > now())
    ORDER BY url`.execute(db);
  // A broker URL's password is shown nowhere after creation (decision 0031).
  const endpoints = stored.map((endpoint) => ({ ...endpoint, url: redactDestinationUrl(endpoint.url) }));
  const { rows } = await sql<{ total: string; since_seen: string }>`
    SELECT count(*) AS total,
           count(*) FILTER (WHERE ${seen}::timestamptz IS NULL OR dead_at > ${seen}::timestamptz) AS since_seen
    FROM webhook_deliveries WHERE ${ownStoreIs('store_id')} AND status = 'dead'`.execute(db);
  const dead = { total: Number(rows[0]?.total ?? 0), since_seen: Number(rows[0]?.since_seen ?? 0) };
  const { rows: keys } = await sql<AlertKey>`
    SELECT t.id, t.name, t.prefix, t.made_by_email AS maker_email
    FROM api_tokens t
    WHERE ${ownStoreIs('t.store_id')} AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
      AND 'admin' = ANY(t.scopes)
      AND coalesce((SELECT sas.require_second_factor FROM store_admin_settings sas WHERE sas.store_id = t.store_id), false)
      AND EXISTS (SELECT 1 FROM admin_memberships m WHERE m.admin_user_id = t.made_by_admin_id AND m.store_id = t.store_id AND m.role <> 'viewer')
      AND NOT EXISTS (SELECT 1 FROM admin_users u WHERE u.id = t.made_by_admin_id AND (u.totp_enabled_at IS NOT NULL OR EXISTS (SELECT 1 FROM admin_passkeys pk WHERE pk.admin_user_id = u.id)))
    ORDER BY t.name, t.id`.execute(db);
  return {
    endpoints,
    keys_without_second_factor: keys,
    dead_letters: dead,
    seen_at: seen,
    attention: endpoints.length > 0 || dead.since_seen > 0 || keys.length > 0,
  };
}

/** Marks the alerts seen by an administrator now (new dead letters count from here). */
export async function markAlertsSeen(db: Kysely<Database>, adminUserId: string): Promise<void> {
  await db.updateTable('admin_users').set({ alerts_seen_at: sql<string>`now()` }).where('id', '=', adminUserId).execute();
}

let source: Kysely<Database> | undefined;

/** Sets the database the alert gauges read at scrape time (undefined: stop). */
export function setAlertMetricsSource(db: Kysely<Database> | undefined): void {
  source = db;
}

// The gauges count every store's rows (a scrape runs in the platform scope, ops/ops.routes.ts): each
// row is joined to its store by store_id, as a statement across stores names its rows' store.
function gauge<T extends string>(name: string, help: string, labelNames: T[], collect: (g: client.Gauge<T>) => Promise<void>): void {
  if (client.register.getSingleMetric(name)) return;
  new client.Gauge<T>({
    name,
    help,
    labelNames,
    async collect() {
      if (!source) return;
      try {
        await collect(this);
      } catch {
        // A scrape during shutdown or a database outage keeps the last value.
      }
    },
  });
}

gauge(
  'store_api_webhook_endpoints',
  'Webhook endpoints by state (active, paused by the circuit breaker, disabled); read from the database at scrape time',
  ['state'],
  async (g) => {
    const { rows } = await sql<{ active: string; paused: string; disabled: string }>`
    SELECT count(*) FILTER (WHERE e.enabled AND (e.paused_until IS NULL OR e.paused_until <= now())) AS active,
           count(*) FILTER (WHERE e.enabled AND e.paused_until > now()) AS paused,
           count(*) FILTER (WHERE NOT e.enabled) AS disabled
    FROM webhook_endpoints e JOIN stores s ON s.id = e.store_id`.execute(source!);
    for (const state of ['active', 'paused', 'disabled'] as const) g.set({ state }, Number(rows[0]?.[state] ?? 0));
  },
);

gauge(
  'store_api_webhook_dead_letters',
  'Webhook deliveries dead now (waiting for an administrator to retry them); read from the database at scrape time',
  [],
  async (g) => {
    const { rows } = await sql<{ n: string }>`
    SELECT count(*) AS n FROM webhook_deliveries d JOIN stores s ON s.id = d.store_id WHERE d.status = 'dead'`.execute(source!);
    g.set(Number(rows[0]?.n ?? 0));
  },
);
