/**
 * Long work bounded per store (decision 0051, "Limits per store"): at most STORE_MAX_SNAPSHOTS
 * snapshots and STORE_MAX_IMPORTS stock imports of one store at once, one more refused at once with
 * 429 rate_limited naming the limit and Retry-After, nothing written; another store's are counted
 * apart. Per process (StoreSlots), and across processes through Redis: the HTTP cases hold the
 * store's slots as another process would (leases in the store's sorted set), so they need no race.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { createStore } from '../../src/stores/store.service.ts';
import { inStore } from '../../src/db/store-scope.ts';
import { loadConfig } from '../../src/config/config.ts';
import { StoreSlots } from '../../src/stores/store-slots.ts';

const REDIS_URL = process.env.TEST_REDIS_URL;

describe('store work bounds: defaults', () => {
  it('four snapshots and one stock import per store at once', () => {
    const config = loadConfig({});
    expect(config.STORE_MAX_SNAPSHOTS).toBe(4);
    expect(config.STORE_MAX_IMPORTS).toBe(1);
  });
});

describe('StoreSlots in one process', () => {
  it('holds up to its limit per store, counts stores apart, and frees a slot once per release', async () => {
    const slots = new StoreSlots('snapshots', 2);
    const a1 = await slots.acquire('a');
    const a2 = await slots.acquire('a');
    expect(a1).toBeTypeOf('function');
    expect(a2).toBeTypeOf('function');
    expect(await slots.acquire('a')).toBeUndefined();
    expect(await slots.acquire('b')).toBeTypeOf('function');
    a1!();
    a1!();
    const a3 = await slots.acquire('a');
    expect(a3).toBeTypeOf('function');
    // A second release of the same slot did not free another one.
    expect(await slots.acquire('a')).toBeUndefined();
  });

  it('0 sets no bound', async () => {
    const slots = new StoreSlots('imports', 0);
    for (let i = 0; i < 50; i++) expect(await slots.acquire('a')).toBeTypeOf('function');
  });
});

describe.skipIf(!REDIS_URL)('StoreSlots across processes (Redis)', () => {
  let redis: Redis;
  const prefix = `store-api-test:${randomBytes(6).toString('hex')}:`;
  beforeAll(() => {
    redis = new Redis(REDIS_URL!, { lazyConnect: false });
  });
  afterAll(async () => redis?.quit());
  const shared = () => ({ redis, prefix, usable: () => true });

  it("shares a store's bound between instances, and a dead process's lease expires", async () => {
    const one = new StoreSlots('imports', 1, shared());
    const two = new StoreSlots('imports', 1, shared());
    const release = await one.acquire('s');
    expect(release).toBeTypeOf('function');
    expect(await two.acquire('s')).toBeUndefined();
    expect(await two.acquire('t')).toBeTypeOf('function');
    release!();
    // The release's ZREM is sent without waiting for it: the next command on the connection follows it.
    await redis.ping();
    const again = await two.acquire('s');
    expect(again).toBeTypeOf('function');
    again!();
    await redis.ping();
    // A lease that expired (its process died) no longer counts.
    await redis.zadd(`${prefix}imports:u`, Date.now() - 1, 'dead');
    expect(await one.acquire('u')).toBeTypeOf('function');
  });

  it('counts per process while Redis is not usable', async () => {
    const slots = new StoreSlots('imports', 1, { redis, prefix, usable: () => false });
    await redis.zadd(`${prefix}imports:v`, Date.now() + 60_000, 'held elsewhere');
    expect(await slots.acquire('v')).toBeTypeOf('function');
    expect(await slots.acquire('v')).toBeUndefined();
  });
});

describe.skipIf(!REDIS_URL).each(backends)('store work bounds over HTTP (%s)', (backend) => {
  let t: TestApp;
  let redis: Redis;
  const prefix = `store-api-test:${randomBytes(6).toString('hex')}:`;
  let alpha: string;
  let bravo: string;
  const keyOf = async (store: string) =>
    ({ authorization: `Bearer ${(await inStore(store, () => createToken(t.database.db, { name: 'k', scopes: [...SCOPES] }))).token}` }) as Record<
      string,
      string
    >;
  /** What another process running the store's work holds. */
  const holdElsewhere = (kind: string, store: string, n: number) =>
    Promise.all(Array.from({ length: n }, () => redis.zadd(`${prefix}${kind}:${store}`, Date.now() + 60_000, randomUUID())));

  beforeAll(async () => {
    redis = new Redis(REDIS_URL!);
    t = await buildTestApp(backend, { REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: prefix, STORE_MAX_SNAPSHOTS: '2', STORE_MAX_IMPORTS: '1' });
    alpha = (await createStore(t.database.db, { name: `Alpha ${randomUUID()}` })).id;
    bravo = (await createStore(t.database.db, { name: `Bravo ${randomUUID()}` })).id;
    for (const store of [alpha, bravo]) {
      const created = await t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/products',
        headers: await keyOf(store),
        payload: { name: 'Boot', product_type: 'physical', sku: 'BOOT-1', price: 10, stock: 5 },
      });
      expect(created.statusCode).toBe(201);
    }
  });
  afterAll(async () => {
    await t?.close();
    await redis?.quit();
  });

  it("refuses a store's snapshot past STORE_MAX_SNAPSHOTS with 429 and Retry-After; another store's still streams", async () => {
    await holdElsewhere('snapshots', alpha, 2);
    const refused = await t.app.inject({ url: '/api/v1/products/snapshot', headers: await keyOf(alpha) });
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['content-type']).toContain('application/problem+json');
    expect(refused.json()).toMatchObject({ code: 'rate_limited' });
    expect(refused.json().detail).toContain('STORE_MAX_SNAPSHOTS = 2');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const other = await t.app.inject({ url: '/api/v1/products/snapshot', headers: await keyOf(bravo) });
    expect(other.statusCode).toBe(200);
    expect(
      other.body
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).sku),
    ).toEqual(['BOOT-1']);
    // One of them ends: the store's next snapshot streams.
    await redis.zpopmin(`${prefix}snapshots:${alpha}`);
    expect((await t.app.inject({ url: '/api/v1/products/snapshot', headers: await keyOf(alpha) })).statusCode).toBe(200);
  });

  it("refuses a store's second stock import with 429, nothing written; another store's imports", async () => {
    const stockOf = async (store: string) =>
      (await inStore(store, () => sql<{ stock: number }>`SELECT stock FROM products WHERE store_id = ${store}::uuid AND sku = 'BOOT-1'`.execute(t.database.db)))
        .rows[0]!.stock;
    const csv = (stock: number) => ({ 'content-type': 'text/csv', payload: `sku,stock\nBOOT-1,${stock}\n` });
    const before = await stockOf(alpha);
    await holdElsewhere('imports', alpha, 1);
    const importTo = async (store: string, stock: number) => {
      const { payload, ...headers } = csv(stock);
      return t.app.inject({ method: 'POST', url: '/admin/api/v1/inventory/import', headers: { ...(await keyOf(store)), ...headers }, payload });
    };
    const refused = await importTo(alpha, before + 7);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'rate_limited' });
    expect(refused.json().detail).toContain('STORE_MAX_IMPORTS = 1');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await stockOf(alpha)).toBe(before);
    expect((await importTo(bravo, 42)).statusCode).toBe(201);
    expect(await stockOf(bravo)).toBe(42);
    await redis.del(`${prefix}imports:${alpha}`);
    expect((await importTo(alpha, 9)).statusCode).toBe(201);
    expect(await stockOf(alpha)).toBe(9);
  });
});
