/**
 * Idempotent admin writes (decision 0013): every admin POST honours Idempotency-Key. The same key
 * with the same request answers the first response again without writing; another body is a 422;
 * concurrent requests with one key write once; a key belongs to the principal that used it first
 * (another one is refused); keys are kept 24 h, then reusable and pruned. What a crash or a lost
 * connection does to a keyed write: test/production/exactly-once-writes.test.ts. Stored answers are
 * sealed, the key kept only as a hash (decision 0040).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { pruneOnce } from '../../src/retention/retention-pruner.ts';
import { retentionPolicyOf } from '../../src/retention/retention-policy.ts';
import { idempotencyKeyHash } from '../../src/admin/idempotency/sealed-answer.ts';
import { requestHash } from '../../src/admin/idempotency/idempotency.ts';
import { up as sealIdempotentAnswers } from '../../src/schema/migrations/0029-sealed-idempotent-answers.ts';

type Json = Record<string, any>;

describe.each(backends)('Idempotency-Key on the admin API (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };
  let productId: string;
  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    admin = await t.auth(['admin']);
    productId = (await aProduct(t.ctx.database.db, { stock: 100_000 })).id;
  });
  afterAll(async () => t?.close());

  const post = async (url: string, payload: unknown, key?: string, auth = admin) => {
    const res = await t.app.inject({
      method: 'POST',
      url: `/admin/api/v1${url}`,
      headers: { ...auth, 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
      payload: JSON.stringify(payload),
    });
    return { status: res.statusCode, body: res.json() as Json, headers: res.headers, raw: res.body };
  };
  const count = async (table: string) => (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(t.ctx.database.db)).rows[0]!.n;
  const order = () => ({ source: 'pos', payment_method: 'cash', items: [{ product_id: productId, quantity: 1 }] });

  it('a retried order POST answers the first order again and places it once', async () => {
    const [orders, movements, events] = [await count('orders'), await count('stock_movements'), await count('events')];
    const first = await post('/orders', order(), 'pos-7-sale-1001');
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await post('/orders', order(), 'pos-7-sale-1001');
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['content-type']).toMatch(/^application\/json/);
    expect(again.raw).toBe(first.raw);
    expect(await count('orders')).toBe(orders + 1);
    expect(await count('stock_movements')).toBe(movements + 1);
    const newEvents = (await count('events')) - events;
    // A third try is still a replay: the count of events stays.
    await post('/orders', order(), 'pos-7-sale-1001');
    expect((await count('events')) - events).toBe(newEvents);
  });

  it('the same key with another body is refused with 422 problem+json, and nothing is written', async () => {
    await post('/orders', order(), 'pos-7-sale-1002');
    const orders = await count('orders');
    const other = await post('/orders', { ...order(), items: [{ product_id: productId, quantity: 5 }] }, 'pos-7-sale-1002');
    expect(other.status).toBe(422);
    expect(other.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(other.body).toMatchObject({ code: 'idempotency_key_reused', status: 422, errors: [{ param: 'header.Idempotency-Key' }] });
    // …another path too.
    expect((await post('/customers', { name: 'Sam' }, 'pos-7-sale-1002')).status).toBe(422);
    expect(await count('orders')).toBe(orders);
  });

  it('concurrent requests with one key write once: the others get the answer or 409 in use', async () => {
    const orders = await count('orders');
    const answers = await Promise.all(Array.from({ length: 6 }, () => post('/orders', order(), 'pos-7-sale-concurrent')));
    expect(await count('orders')).toBe(orders + 1);
    const created = answers.filter((a) => a.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(new Set(created.map((a) => a.body.data.id)).size).toBe(1);
    for (const a of answers.filter((x) => x.status !== 201)) {
      expect(a.status).toBe(409);
      expect(a.body.code).toBe('idempotency_key_in_use');
      expect(a.headers['retry-after']).toBe('1');
    }
  });

  it('a key belongs to the principal that first used it: another one is refused 422, nothing written; POSTs without a key are not deduplicated', async () => {
    const other = await t.auth(['admin']);
    const orders = await count('orders');
    expect((await post('/orders', order(), 'shared-key', admin)).status).toBe(201);
    const theirs = await post('/orders', order(), 'shared-key', other);
    expect(theirs.status).toBe(422);
    expect(theirs.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(theirs.body).toMatchObject({
      code: 'idempotency_key_reused',
      errors: [{ param: 'header.Idempotency-Key', message: 'was used by another credential' }],
    });
    expect(theirs.raw).not.toContain(admin.authorization.slice(7));
    expect(await count('orders')).toBe(orders + 1);
    await post('/orders', order());
    await post('/orders', order());
    expect(await count('orders')).toBe(orders + 3);
  });

  it('holds for every admin POST: a token is created once, a webhook endpoint once', async () => {
    const tokens = await count('api_tokens');
    const a = await post('/tokens', { name: 'erp', scopes: ['orders:read'] }, 'create-erp-token');
    const b = await post('/tokens', { name: 'erp', scopes: ['orders:read'] }, 'create-erp-token');
    expect(a.status).toBe(201);
    expect(b.body.data).toEqual(a.body.data);
    expect(await count('api_tokens')).toBe(tokens + 1);
    const endpoints = await count('webhook_endpoints');
    const e1 = await post('/webhooks/endpoints', { url: 'http://127.0.0.1:9/hooks/store' }, 'endpoint-1');
    const e2 = await post('/webhooks/endpoints', { url: 'http://127.0.0.1:9/hooks/store' }, 'endpoint-1');
    expect(e2.body.data.id).toBe(e1.body.data.id);
    expect(await count('webhook_endpoints')).toBe(endpoints + 1);
  });

  it('keeps neither the secret of a new token nor the Idempotency-Key in clear, and the retry still replays the secret (decision 0040)', async () => {
    const key = `token-${crypto.randomUUID()}`;
    const first = await post('/tokens', { name: 'sealed', scopes: ['orders:read'] }, key);
    expect(first.status).toBe(201);
    const secret = JSON.stringify(first.body).match(/sia_[A-Za-z0-9_-]+/)?.[0];
    expect(secret).toBeDefined();
    // Every column of every row, as the database shows it.
    const rows = (await sql<{ r: string }>`SELECT row_to_json(k)::text AS r FROM idempotency_keys k`.execute(t.ctx.database.db)).rows.map((x) => x.r);
    expect(rows.some((r) => r.includes(idempotencyKeyHash(key)))).toBe(true);
    for (const r of rows) {
      expect(r).not.toContain(secret!);
      expect(r).not.toContain(key);
    }
    const again = await post('/tokens', { name: 'sealed', scopes: ['orders:read'] }, key);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.raw).toBe(first.raw);
    expect(again.raw).toContain(secret!);
  });

  it('a stored answer altered in the database is not replayed', async () => {
    const key = `tamper-${crypto.randomUUID()}`;
    expect((await post('/customers', { name: 'Cid' }, key)).status).toBe(201);
    const db = t.ctx.database.db;
    await sql`UPDATE idempotency_keys SET response_status = 200 WHERE key_hash = ${idempotencyKeyHash(key)}`.execute(db);
    const again = await post('/customers', { name: 'Cid' }, key);
    expect(again.status).toBe(500);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
  });

  it('a 4xx answer is kept and replayed (the retry does not run again)', async () => {
    const created = await post('/orders', order(), 'order-for-transition');
    const id = created.body.data.id as string;
    const bad = await post(`/orders/${id}/status`, { status: 'pending' }, 'bad-transition');
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).toBeLessThan(500);
    const again = await post(`/orders/${id}/status`, { status: 'pending' }, 'bad-transition');
    expect(again.status).toBe(bad.status);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(bad.body);
  });

  it('refuses a malformed key with 400 naming the header', async () => {
    for (const key of ['', 'has space', 'x'.repeat(256), 'clé']) {
      const res = await post('/customers', { name: 'Sam' }, key);
      expect(res.status, JSON.stringify(key)).toBe(400);
      expect(res.body.errors?.[0]?.param ?? res.body.detail).toMatch(/Idempotency-Key/i);
    }
  });

  it('a key is kept 24 h: then it may be reused, and the pruner deletes it', async () => {
    const db = t.ctx.database.db;
    await post('/customers', { name: 'Ana' }, 'day-old');
    const customers = await count('customers');
    // Within 24 h another body is refused…
    await sql`UPDATE idempotency_keys SET created_at = now() - interval '23 hours' WHERE key_hash = ${idempotencyKeyHash('day-old')}`.execute(db);
    expect((await post('/customers', { name: 'Bea' }, 'day-old')).status).toBe(422);
    // …after 24 h the key is free again.
    await sql`UPDATE idempotency_keys SET created_at = now() - interval '24 hours 1 second' WHERE key_hash = ${idempotencyKeyHash('day-old')}`.execute(db);
    const reused = await post('/customers', { name: 'Bea' }, 'day-old');
    expect(reused.status).toBe(201);
    expect(reused.headers['idempotent-replayed']).toBeUndefined();
    expect(await count('customers')).toBe(customers + 1);

    await sql`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key_hash = ${idempotencyKeyHash('day-old')}`.execute(db);
    const keys = await count('idempotency_keys');
    const report = await pruneOnce(db, retentionPolicyOf(t.ctx.config), Date.now());
    expect(report.idempotencyKeys).toBe(1);
    expect(await count('idempotency_keys')).toBe(keys - 1);
    const left = (await sql<{ k: string }>`SELECT key_hash AS k FROM idempotency_keys`.execute(db)).rows.map((r) => r.k);
    expect(left).not.toContain(idempotencyKeyHash('day-old'));
    expect(left).toContain(idempotencyKeyHash('pos-7-sale-1001'));
  });
});

describe.each(backends)('answers stored before the sealing (migration 0029) stay replayable (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
  });
  afterAll(async () => t?.close());

  it('converts a clear row: no clear key or answer is left, and the retry still replays it without writing', async () => {
    const db = t.ctx.database.db;
    const admin = await t.auth(['admin']);
    const send = (key: string, name: string) =>
      t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/customers',
        headers: { ...admin, 'content-type': 'application/json', 'idempotency-key': key },
        payload: JSON.stringify({ name }),
      });
    // The principal as the service spells it, from a row it wrote.
    const probe = await send(crypto.randomUUID(), 'Probe');
    expect(probe.statusCode).toBe(201);
    // A genuine answer (the contract check sees every answer), stored in clear as before 0029.
    const answer = probe.body;
    const customerId = (probe.json() as Json).data.id as string;
    const { principal } = (await sql<{ principal: string }>`SELECT principal FROM idempotency_keys`.execute(db)).rows[0]!;
    // The table as migration 0018 left it, holding an answer written by the version before 0029.
    await sql`DROP TABLE idempotency_keys`.execute(db);
    await sql`CREATE TABLE idempotency_keys (
      principal text NOT NULL, idempotency_key text PRIMARY KEY, request_hash text NOT NULL, method text NOT NULL,
      path text NOT NULL, response_status integer NOT NULL, response_type text, response_body text NOT NULL, created_at timestamptz NOT NULL)`.execute(db);
    await sql`CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)`.execute(db);
    const key = `old-${crypto.randomUUID()}`;
    await sql`INSERT INTO idempotency_keys VALUES (${principal}, ${key}, ${requestHash('POST', '/admin/api/v1/customers', { name: 'Old' })},
      'POST', '/admin/api/v1/customers', 201, 'application/json; charset=utf-8', ${answer}, now() - interval '1 hour')`.execute(db);

    await sealIdempotentAnswers(db as never);
    // And as migration 0031 then made it: the store's (its statements name store_id).
    await sql`ALTER TABLE idempotency_keys ADD COLUMN store_id uuid NOT NULL DEFAULT store_api_insert_store()`.execute(db);
    await sql`ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey, ADD PRIMARY KEY (store_id, key_hash)`.execute(db);

    const rows = (await sql<{ r: string }>`SELECT row_to_json(k)::text AS r FROM idempotency_keys k`.execute(db)).rows.map((x) => x.r);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain(idempotencyKeyHash(key));
    expect(rows[0]).not.toContain(key);
    expect(rows[0]).not.toContain(customerId);
    const customers = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM customers`.execute(db)).rows[0]!.n;
    const again = await send(key, 'Old');
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(answer);
    expect((await send(key, 'Other')).statusCode).toBe(422);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM customers`.execute(db)).rows[0]!.n).toBe(customers);
  });
});
