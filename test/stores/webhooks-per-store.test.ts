/**
 * The worker works across stores (decision 0051) and still never mixes them: each store's changes
 * reach that store's endpoints, signed with that endpoint's secret, and no other store's endpoint.
 * And every statement run meanwhile over a store-owned table names its store
 * (test/helpers/statement-audit.ts): the worker's polls, claims and settles, the admin API's.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { STORE_OWNED_TABLES, createStore, deleteStore, homeStore, setStoreStatus } from '../../src/stores/store.service.ts';
import { asPlatform, inStore } from '../../src/db/store-scope.ts';
import { sql } from 'kysely';
import { updateProduct } from '../../src/catalog/catalog.service.ts';
import { startWebhookWorker } from '../../src/webhooks/webhook-worker.ts';
import { verifyWebhook } from '@store-api/client';
import { startStatementAudit, type StatementAudit } from '../helpers/statement-audit.ts';

describe.each(backends)('webhooks per store (%s)', (backend) => {
  let t: TestApp;
  let receiver: Server;
  const received: { path: string; body: string; headers: Record<string, string> }[] = [];
  let audit: StatementAudit | undefined;

  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_POLL_INTERVAL_MS: '50' });
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        received.push({ path: request.url!, body, headers: request.headers as Record<string, string> });
        response.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    audit?.stop();
    await new Promise((resolve) => receiver?.close(resolve));
    await t?.close();
  });

  /** Stops the audit the test started: every statement it saw named its store. */
  function expectEveryStatementNamedItsStore(): void {
    const checked = audit!.checked();
    const wrong = audit!.stop();
    audit = undefined;
    expect(checked).toBeGreaterThan(0);
    expect(wrong).toEqual([]);
  }

  it("sends each store's changes to its own endpoints only, signed with their secrets", async () => {
    audit = startStatementAudit();
    const db = t.database.db;
    const port = (receiver.address() as { port: number }).port;
    const stores = { alpha: (await homeStore(db))!.id, bravo: (await createStore(db, { name: 'Bravo' })).id };
    const secrets: Record<string, string> = {};
    const products: Record<string, string> = {};
    for (const [name, store] of Object.entries(stores)) {
      const { token } = await inStore(store, () => createToken(db, { name, scopes: [...SCOPES] }));
      const endpoint = await t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/webhooks/endpoints',
        headers: { authorization: `Bearer ${token}` },
        payload: { url: `http://127.0.0.1:${port}/${name}` },
      });
      expect(endpoint.statusCode, endpoint.body).toBe(201);
      secrets[name] = endpoint.json().data.secret;
    }
    for (const [name, store] of Object.entries(stores)) {
      await inStore(store, async () => {
        const product = await aProduct(db);
        await updateProduct(db, product.id, { name: `${name}-only product` });
        products[name] = product.id;
      });
    }
    const worker = await startWebhookWorker(t.ctx, backend === 'postgres' ? { listenUrl: t.database.url } : {});
    try {
      await vi.waitFor(
        () => {
          for (const name of Object.keys(stores)) {
            expect(received.some((r) => r.path === `/${name}` && r.body.includes(`${name}-only product`))).toBe(true);
          }
        },
        { timeout: 30_000, interval: 100 },
      );
    } finally {
      await worker.stop();
    }
    for (const r of received) {
      const name = r.path.slice(1);
      const other = name === 'alpha' ? 'bravo' : 'alpha';
      expect(r.body).not.toContain(products[other]);
      expect(r.body).not.toContain(`${other}-only product`);
      // Signed with its own endpoint's secret (verifyWebhook throws otherwise).
      expect(verifyWebhook(r.body, r.headers, secrets[name]!).data).toBeDefined();
    }
    expectEveryStatementNamedItsStore();
  });

  it("holds a suspended store's deliveries until it is resumed, while other stores' go on", async () => {
    audit = startStatementAudit();
    const db = t.database.db;
    const alpha = (await homeStore(db))!.id;
    const bravo = (await createStore(db, { name: 'Bravo paused' })).id;
    const port = (receiver.address() as { port: number }).port;
    for (const [store, path] of [
      [bravo, '/held'],
      [alpha, '/rounds'],
    ] as const) {
      const { token } = await inStore(store, () => createToken(db, { name: path, scopes: [...SCOPES] }));
      const endpoint = await t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/webhooks/endpoints',
        headers: { authorization: `Bearer ${token}` },
        payload: { url: `http://127.0.0.1:${port}${path}` },
      });
      expect(endpoint.statusCode, endpoint.body).toBe(201);
    }
    await setStoreStatus(db, bravo, 'suspended');
    await inStore(bravo, async () => updateProduct(db, (await aProduct(db)).id, { name: 'held while suspended' }));
    const worker = await startWebhookWorker(t.ctx, backend === 'postgres' ? { listenUrl: t.database.url } : {});
    try {
      // Two rounds of another store's changes go through while the suspended store's wait.
      for (const round of ['first', 'second']) {
        await inStore(alpha, async () => updateProduct(db, (await aProduct(db)).id, { name: `alpha ${round} round` }));
        await vi.waitFor(() => expect(received.some((r) => r.path === '/rounds' && r.body.includes(`alpha ${round} round`))).toBe(true), {
          timeout: 30_000,
          interval: 50,
        });
      }
      expect(received.filter((r) => r.path === '/held')).toEqual([]);
      await setStoreStatus(db, bravo, 'active');
      await vi.waitFor(() => expect(received.some((r) => r.path === '/held' && r.body.includes('held while suspended'))).toBe(true), {
        timeout: 30_000,
        interval: 50,
      });
    } finally {
      await worker.stop();
    }
    expectEveryStatementNamedItsStore();
  });

  it("deletes a store with its deliveries and their attempts, naming the store in every statement, while another store's go on", async () => {
    const db = t.database.db;
    const alpha = (await homeStore(db))!.id;
    const charlie = (await createStore(db, { name: 'Charlie deleted' })).id;
    const port = (receiver.address() as { port: number }).port;
    const { token } = await inStore(charlie, () => createToken(db, { name: 'charlie', scopes: [...SCOPES] }));
    const endpoint = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/webhooks/endpoints',
      headers: { authorization: `Bearer ${token}` },
      payload: { url: `http://127.0.0.1:${port}/charlie` },
    });
    expect(endpoint.statusCode, endpoint.body).toBe(201);
    await inStore(charlie, async () => updateProduct(db, (await aProduct(db)).id, { name: 'charlie before deletion' }));
    /** The store's rows per store-owned table (those it has). */
    const rowsOf = async (store: string) => {
      const counts: Record<string, number> = {};
      for (const table of STORE_OWNED_TABLES) {
        const { rows } = await asPlatform(() =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE store_id = ${store}::uuid`.execute(db),
        );
        if (rows[0]!.n > 0) counts[table] = rows[0]!.n;
      }
      return counts;
    };
    const worker = await startWebhookWorker(t.ctx, backend === 'postgres' ? { listenUrl: t.database.url } : {});
    try {
      await vi.waitFor(() => expect(received.some((r) => r.path === '/charlie' && r.body.includes('charlie before deletion'))).toBe(true), {
        timeout: 30_000,
        interval: 50,
      });
      // Its attempts recorded too.
      await vi.waitFor(
        async () =>
          expect(await rowsOf(charlie)).toMatchObject({
            webhook_attempts: expect.any(Number),
            webhook_deliveries: expect.any(Number),
            webhook_endpoints: 1,
            events: expect.any(Number),
          }),
        { timeout: 30_000, interval: 50 },
      );
      audit = startStatementAudit();
      await deleteStore(db, charlie);
      expect(await rowsOf(charlie)).toEqual({});
      // The worker goes on for the other store (to its endpoints of the tests above).
      await inStore(alpha, async () => updateProduct(db, (await aProduct(db)).id, { name: 'alpha after a deletion' }));
      await vi.waitFor(() => expect(received.some((r) => r.body.includes('alpha after a deletion'))).toBe(true), {
        timeout: 30_000,
        interval: 50,
      });
    } finally {
      await worker.stop();
    }
    expectEveryStatementNamedItsStore();
  });
});
