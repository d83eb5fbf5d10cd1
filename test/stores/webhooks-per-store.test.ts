/**
 * The worker works across stores (decision 0051) and still never mixes them: each store's changes
 * reach that store's endpoints, signed with that endpoint's secret, and no other store's endpoint.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { createStore, homeStore, setStoreStatus } from '../../src/stores/store.service.ts';
import { inStore } from '../../src/db/store-scope.ts';
import { updateProduct } from '../../src/catalog/catalog.service.ts';
import { startWebhookWorker } from '../../src/webhooks/webhook-worker.ts';
import { verifyWebhook } from '@store-api/client';

describe.each(backends)('webhooks per store (%s)', (backend) => {
  let t: TestApp;
  let receiver: Server;
  const received: { path: string; body: string; headers: Record<string, string> }[] = [];

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
    await new Promise((resolve) => receiver?.close(resolve));
    await t?.close();
  });

  it("sends each store's changes to its own endpoints only, signed with their secrets", async () => {
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
  });

  it("holds a suspended store's deliveries until it is resumed, while other stores' go on", async () => {
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
  });
});
