/**
 * One snapshot per token at a time across a fleet (src/api/snapshot-slots.ts, decision 0017): two
 * app instances on one database and one Redis (TEST_REDIS_URL) refuse a token's second snapshot
 * whichever instance receives it, and free the token when the first stream closes. Without Redis
 * the limit is per process (test/api/snapshot.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { sql } from 'kysely';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';

const REDIS_URL = process.env.TEST_REDIS_URL;

describe.skipIf(!REDIS_URL).each(backends)('snapshot slots across app instances with Redis (%s)', (backend) => {
  let t: TestApp;
  let other: App;
  const origins: string[] = [];
  let authorization: string;

  beforeAll(async () => {
    // A key prefix of this run only, so parallel runs on one Redis never share slots.
    const env = { ...UNLIMITED, REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: `store-api-test:${randomBytes(6).toString('hex')}:` };
    t = await buildTestApp(backend, env);
    other = await buildApp({
      config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', ...env }),
      database: t.database,
      logger: pino({ level: 'silent' }),
    });
    await other.ready();
    origins.push(await t.app.listen({ port: 0, host: '127.0.0.1' }), await other.listen({ port: 0, host: '127.0.0.1' }));
    ({ authorization } = await t.auth());
    // More than socket buffers hold unread, so an unread stream stays open.
    await sql`
      INSERT INTO customers (id, name, phone, email, city, is_active, created_at, last_modified)
      SELECT md5('f' || g)::uuid, 'Customer ' || g, NULL, NULL, 'Mombasa', true, now() - interval '1 hour', now() - interval '1 hour'
      FROM generate_series(1, 20000) g`.execute(t.database.db);
  }, 240_000);
  afterAll(async () => {
    await other?.close();
    await t?.close();
  });

  const snapshot = (origin: string, init: RequestInit = {}) => fetch(`${origin}/api/v1/customers/snapshot`, { ...init, headers: { authorization } });

  it("refuses a token's second snapshot on the other instance (429, Retry-After) and serves it once the first closed", async () => {
    const controller = new AbortController();
    const first = await snapshot(origins[0]!, { signal: controller.signal });
    expect(first.status).toBe(200);
    const second = await snapshot(origins[1]!);
    expect(second.status).toBe(429);
    expect(second.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await second.json()) as { detail: string }).detail).toMatch(/one at a time/);
    controller.abort();
    await first.body?.cancel().catch(() => {});
    // The first instance notices the closed connection and deletes its lease: the other serves.
    let third: Response;
    for (;;) {
      third = await snapshot(origins[1]!);
      if (third.status !== 429) break;
      await third.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(third.status).toBe(200);
    expect((await third.text()).split('\n').filter(Boolean).length).toBe(20000);
    // A finished stream frees the token at once, on either instance.
    expect((await snapshot(origins[0]!)).status).toBe(200);
  });
});
