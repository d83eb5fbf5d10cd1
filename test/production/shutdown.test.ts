/**
 * Process roles, migrations and graceful shutdown of the real CLI: `serve` finishes a streaming
 * export that is in flight when SIGTERM arrives and exits 0; `worker` (with its metrics listener) and
 * `all` exit 0 on SIGTERM too, releasing the database (the embedded data directory can be opened
 * again at once); `migrate` brings an empty database to the current schema.
 */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { request } from 'undici';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { backends } from '../helpers/test-database.ts';
import { listeningUrl, startStoreApi, storeForProcesses } from './process-helpers.ts';

const PRODUCTS = 500;

describe.each(backends)('roles and graceful shutdown (%s)', (backend) => {
  const store = storeForProcesses(backend, 'shutdown', async (db) => {
    await generateDemoStore(db, { products: PRODUCTS, customers: 20, orders: 36 });
    return (await createToken(db, { name: 'shutdown' })).token;
  });
  const start = (role: string, extra: Record<string, string> = {}) => store.start([role], extra, { name: `${role} (${backend})` });

  it('serve: SIGTERM during a streaming export lets it finish, then exits 0', async () => {
    const serve = start('serve', { LOG_LEVEL: 'info' });
    const base = await listeningUrl(serve);
    const res = await request(`${base}/api/v1/products/export?limit=${PRODUCTS}&include_inactive=true`, {
      headers: { authorization: `Bearer ${store.prepared}` },
    });
    expect(res.statusCode).toBe(200);
    const chunks: Buffer[] = [];
    const iterator = res.body[Symbol.asyncIterator]();
    const first = await iterator.next();
    chunks.push(first.value as Buffer);

    serve.child.kill('SIGTERM');
    await serve.waitFor(/shutting down/);
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) chunks.push(next.value as Buffer);

    const lines = Buffer.concat(chunks).toString().trim().split('\n');
    expect(lines).toHaveLength(PRODUCTS);
    for (const line of lines) expect(JSON.parse(line).id).toEqual(expect.any(String));
    expect(await serve.exited).toBe(0);
    expect(serve.output()).toMatch(/shut down cleanly/);
    // Nothing listens any more.
    await expect(request(`${base}/healthz`)).rejects.toThrow();
  });

  it('worker: runs the dispatcher without the API, serves /metrics on METRICS_PORT, exits 0 on SIGTERM', async () => {
    const worker = start('worker', { METRICS_PORT: '0', WEBHOOK_POLL_INTERVAL_MS: '50' });
    const base = await listeningUrl(worker, /Worker metrics listening on (http:\/\/[^\s"]+)/);
    await worker.waitFor(/Webhook worker started/);
    expect(worker.output()).not.toMatch(/Store Integration API listening/);
    const metrics = await request(`${base}/metrics`);
    expect(metrics.statusCode).toBe(200);
    expect(await metrics.body.text()).toContain('store_api_db_pool_connections');
    const api = await request(`${base}/api/v1/products`);
    expect(api.statusCode).toBe(404);
    await api.body.dump();
    expect(await worker.stop('SIGTERM')).toBe(0);
  });

  it('all: API and worker in one process, exits 0 on SIGTERM', async () => {
    const all = start('all');
    const base = await listeningUrl(all);
    await all.waitFor(/Webhook worker started/);
    const res = await request(`${base}/api/v1/customers?limit=1`, { headers: { authorization: `Bearer ${store.prepared}` } });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    expect(await all.stop('SIGTERM')).toBe(0);
  });

  it('migrate: brings an empty database to the current schema, after which a role starts ready', async () => {
    let target: Record<string, string>;
    let cleanup: () => Promise<void>;
    if (backend === 'pglite') {
      const dir = mkdtempSync(join(tmpdir(), 'store-api-migrate-'));
      target = { DATA_DIR: dir };
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    } else {
      const base = process.env.TEST_DATABASE_URL!;
      const name = `store_api_test_${process.ppid}_empty_${randomBytes(4).toString('hex')}`;
      const admin = new pg.Client({ connectionString: base });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name}`);
      await admin.end();
      const url = new URL(base);
      url.pathname = `/${name}`;
      target = { DATABASE_URL: url.toString() };
      cleanup = async () => {
        const dropper = new pg.Client({ connectionString: base });
        await dropper.connect();
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await dropper.end();
      };
    }
    try {
      const migrate = startStoreApi(['migrate', '--create'], target, { name: `migrate (${backend})` });
      expect(await migrate.exited).toBe(0);
      expect(migrate.output()).toContain('Schema is current.');
      const serve = start('serve', target);
      const base = await listeningUrl(serve);
      const ready = await request(`${base}/readyz`);
      expect(ready.statusCode).toBe(200);
      expect(await ready.body.json()).toEqual({ status: 'ready', database: 'ok', migrations: 'current' });
      expect(await serve.stop('SIGTERM')).toBe(0);
    } finally {
      await cleanup();
    }
  });
});
