/**
 * A database of the previous release (every migration up to 0030, which never change once shipped)
 * with its data — an administrator, a key, a product, an endpoint with its secret, an event and a
 * pending delivery — upgraded in place by migration 0031 (decision 0051): every row belongs to the
 * one default store, nothing lost, and the key, the administrator's password, the endpoint and the
 * pending delivery keep working.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { pino } from 'pino';
import { backends, emptyPostgresDatabase } from '../helpers/test-database.ts';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { AppContext } from '../../src/app-context.ts';
import { buildApp, type App } from '../../src/app.ts';
import { migrateToLatest, migrateUpTo, migrationNames } from '../../src/schema/migrate.ts';
import { SCOPES, TOKEN_PREFIX, hashToken } from '../../src/tokens/token.service.ts';
import { hashPassword } from '../../src/admin/sessions/admin-user.service.ts';
import { startWebhookWorker } from '../../src/webhooks/webhook-worker.ts';
import { STORE_OWNED_TABLES, listStores, useDefaultStoreScope } from '../../src/stores/store.service.ts';
import { asPlatform } from '../../src/db/store-scope.ts';
import { updateProduct } from '../../src/catalog/catalog.service.ts';

const PREVIOUS_RELEASE = '0030-cheaper-delivery-writes';
const PASSWORD = 'correct horse battery';

/** An empty database of `backend` (no migration run) and how to drop it. */
async function emptyDatabase(backend: string): Promise<{ database: DatabaseHandle; drop: () => Promise<void> }> {
  if (backend === 'pglite') {
    const database = await openDatabase({});
    return { database, drop: () => database.close() };
  }
  const scratch = await emptyPostgresDatabase('upgrade');
  const database = await openDatabase({ databaseUrl: scratch.url, poolSize: 4 });
  return {
    database,
    drop: async () => {
      await database.close();
      await scratch.drop();
    },
  };
}

describe.each(backends)('upgrading a database of the previous release in place (%s)', (backend) => {
  let database: DatabaseHandle;
  let drop: () => Promise<void>;
  let ctx: AppContext;
  let app: App;
  let receiver: Server;
  const received: string[] = [];
  const before: Record<string, number> = {};
  let token: string;
  let productId: string;
  let endpointId: string;
  let pendingDeliveryId: string;

  beforeAll(async () => {
    ({ database, drop } = await emptyDatabase(backend));
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        received.push(body);
        response.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as { port: number }).port;
    const config = loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_POLL_INTERVAL_MS: '50' });
    ctx = { config, database, logger: pino({ level: 'silent' }) };

    // The previous release: its migrations, and data written by it.
    const names = migrationNames();
    expect(names[names.indexOf(PREVIOUS_RELEASE) + 1]).toBe('0031-stores-as-tenants');
    await migrateUpTo(database.db, PREVIOUS_RELEASE);
    const db = database.db;
    expect((await sql<{ found: boolean }>`SELECT to_regclass('stores') IS NOT NULL AS found`.execute(db)).rows[0]!.found).toBe(false);
    // Written as the previous release wrote it: its statements name no store (today's services
    // name one in every statement, decision 0051, and could not run on this schema).
    await sql`
      INSERT INTO admin_users (id, email, password_hash, role, created_at, password_changed_at)
      VALUES (gen_random_uuid(), 'owner@example.com', ${await hashPassword(PASSWORD)}, 'owner', now(), now())
    `.execute(db);
    token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    await sql`
      INSERT INTO api_tokens (id, name, prefix, token_hash, scopes, created_at)
      VALUES (gen_random_uuid(), 'erp', ${token.slice(0, 12)}, ${hashToken(token)}, ${[...SCOPES]}::text[], now())
    `.execute(db);
    productId = randomUUID();
    await sql`
      INSERT INTO products (id, name, slug, product_type, price, created_at, last_modified)
      VALUES (${productId}::uuid, 'Made before the upgrade', ${`made-${productId}`}, 'physical', 12.5, now(), now())
    `.execute(db);
    endpointId = randomUUID();
    await sql`
      INSERT INTO webhook_endpoints (id, url, secret, created_at, updated_at)
      VALUES (${endpointId}::uuid, ${`http://127.0.0.1:${port}/hook`}, ${`whsec_${randomBytes(24).toString('base64url')}`}, now(), now())
    `.execute(db);
    await sql`UPDATE products SET name = 'Changed before the upgrade', last_modified = now() WHERE id = ${productId}::uuid`.execute(db);
    await sql`
      INSERT INTO events (id, type, resource_type, resource_id, data, created_at)
      SELECT gen_random_uuid(), 'product.updated', 'product', id, doc, now() FROM products WHERE id = ${productId}::uuid
    `.execute(db);
    // A delivery the previous release queued and had not sent yet; the poller's position past it.
    const { rows } = await sql<{ id: string }>`
      INSERT INTO webhook_deliveries (id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at)
      SELECT gen_random_uuid(), ev.id, ev.type, ${endpointId}::uuid, 'pending', now(), now(), now()
      FROM events ev ORDER BY ev.created_at DESC, ev.seq DESC LIMIT 1
      RETURNING id
    `.execute(db);
    pendingDeliveryId = rows[0]!.id;
    await sql`UPDATE webhook_poller_state SET position_created_at = (SELECT max(created_at) FROM events), position_seq = (SELECT max(seq) FROM events)`.execute(
      db,
    );
    for (const table of STORE_OWNED_TABLES) {
      // A store-owned table a later migration creates (import_jobs, 0042) is not in the previous release: none of its rows.
      const { rows: exists } = await sql<{ t: string | null }>`SELECT to_regclass(${table})::text AS t`.execute(db);
      before[table] = exists[0]!.t === null ? 0 : (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(db)).rows[0]!.n;
    }
    expect(before.products).toBe(1);
    expect(before.webhook_deliveries).toBe(1);

    // The upgrade.
    await migrateToLatest(db);
    await useDefaultStoreScope(database);
    app = await buildApp(ctx);
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await new Promise((resolve) => receiver?.close(resolve));
    await drop?.();
  });

  it('gives every row the one default store, losing none', async () => {
    const stores = await listStores(database.db);
    expect(stores).toHaveLength(1);
    const store = stores[0]!.id;
    expect(database.scopes.default).toEqual({ kind: 'store', storeId: store });
    for (const table of STORE_OWNED_TABLES) {
      const { rows } = await asPlatform(() =>
        sql<{
          n: number;
          others: number;
        }>`SELECT count(*)::int AS n, count(*) FILTER (WHERE store_id IS DISTINCT FROM ${store}::uuid)::int AS others FROM ${sql.table(table)}`.execute(
          database.db,
        ),
      );
      expect({ table, ...rows[0] }).toEqual({ table, n: before[table], others: 0 });
    }
  });

  it("keeps the key, the administrator's password and the endpoint working", async () => {
    const products = await app.inject({ url: '/api/v1/products', headers: { authorization: `Bearer ${token}` } });
    expect(products.statusCode, products.body).toBe(200);
    expect(products.json().data.map((p: { id: string }) => p.id)).toEqual([productId]);
    const signIn = await app.inject({ method: 'POST', url: '/admin/session', payload: { email: 'owner@example.com', password: PASSWORD } });
    expect(signIn.statusCode, signIn.body).toBe(200);
    const endpoint = await app.inject({ url: `/admin/api/v1/webhooks/endpoints/${endpointId}`, headers: { authorization: `Bearer ${token}` } });
    expect(endpoint.statusCode, endpoint.body).toBe(200);
    // A new change after the upgrade is an event of the store, fanned out to its endpoint.
    const write = await updateProduct(database.db, productId, { name: 'Changed after the upgrade' });
    expect(write.name).toBe('Changed after the upgrade');
  });

  it('sends the delivery the previous release left pending, and the new change', async () => {
    const worker = await startWebhookWorker(ctx, backend === 'postgres' ? { listenUrl: database.url } : {});
    try {
      await vi.waitFor(
        async () => {
          const { rows } = await asPlatform(() =>
            sql<{ status: string }>`SELECT status FROM webhook_deliveries WHERE id = ${pendingDeliveryId}::uuid`.execute(database.db),
          );
          expect(rows[0]?.status).toBe('succeeded');
          expect(received.some((body) => body.includes('Changed after the upgrade'))).toBe(true);
        },
        { timeout: 30_000, interval: 100 },
      );
    } finally {
      await worker.stop();
    }
    expect(received.some((body) => body.includes('Changed before the upgrade'))).toBe(true);
  });
});
