/**
 * GET /api/v1/{resource}/checksums and /checksums/records (decision 0038): ranges that add up to
 * the records, a range's checksum equal to the sum of its records', a change moving exactly its
 * range, the list's filters and scope, the export rate limit, and bad input answered 400 naming
 * the parameter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';

interface Range {
  range: string;
  count: number;
  checksum: string;
}
interface RecordSum {
  id: string;
  last_modified: string;
  checksum: string;
}

describe.each(backends)('record checksums (%s)', (backend) => {
  let t: TestApp;
  let auth: { authorization: string };
  const ids: string[] = [];

  beforeAll(async () => {
    // Distinct budgets, so the answers' X-RateLimit-Limit tells which one a route counts against.
    t = await buildTestApp(backend, { ...UNLIMITED, RATE_LIMIT_EXPORT: '999999' });
    auth = await t.auth();
    for (let i = 0; i < 6; i++) ids.push((await aProductWithVariants(t.database.db, [2, 3])).id);
    for (let i = 0; i < 24; i++) ids.push((await aProduct(t.database.db, { price: 12.5 })).id);
    await aProduct(t.database.db, { is_active: false });
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = async (url: string, headers = auth) => {
    const res = await t.app.inject({ method: 'GET', url, headers });
    return { status: res.statusCode, body: res.json(), limit: res.headers['x-ratelimit-limit'] };
  };
  const ranges = async (query = '') => (await get(`/api/v1/products/checksums?include_inactive=true${query}`)).body.data as Range[];
  const records = async (query = '') => {
    const all: RecordSum[] = [];
    let after = '';
    for (;;) {
      const { status, body } = await get(`/api/v1/products/checksums/records?include_inactive=true&limit=7${after}${query}`);
      expect(status).toBe(200);
      all.push(...body.data);
      if (!body.pagination.has_more) return all;
      after = `&after=${body.pagination.next_cursor}`;
    }
  };
  const sum = (values: readonly { checksum: string }[]) => String(values.reduce((s, v) => s + BigInt(v.checksum), 0n));

  it('ranges add up to every record, each the sum of its records; a filter narrows both', async () => {
    const all = await ranges();
    expect(all.reduce((n, r) => n + r.count, 0)).toBe(31);
    for (const r of all) expect(r.range).toMatch(/^[0-9a-f]{2}$/);
    const each = await records();
    expect(each.map((r) => r.id)).toEqual([...each.map((r) => r.id)].sort());
    expect(each).toHaveLength(31);
    for (const r of all) expect(r.checksum).toBe(sum(each.filter((e) => e.id.startsWith(r.range))));

    const active = (await get('/api/v1/products/checksums')).body.data as Range[];
    expect(active.reduce((n, r) => n + r.count, 0)).toBe(30);
  });

  it('a range one level down, across a dash of the UUID, holds just its records', async () => {
    const id = ids[0]!;
    const prefix = id.slice(0, 7);
    const below = await ranges(`&prefix=${prefix}&digits=2`);
    expect(below.map((r) => r.range)).toContain(id.slice(0, 10)); // 7 chars + one digit, the dash, one digit
    const mine = (await records(`&prefix=${id.slice(0, 10)}`)).map((r) => r.id);
    expect(mine).toContain(id);
    for (const other of mine) expect(other.startsWith(id.slice(0, 10))).toBe(true);
  });

  it("a change moves its record's checksum and its range's, and no other range", async () => {
    const id = ids[10]!;
    const before = await ranges();
    await t.app.inject({
      method: 'PATCH',
      url: `/admin/api/v1/products/${id}`,
      headers: await t.auth(['admin']),
      payload: { name: 'Renamed for the checksum' },
    });
    const after = await ranges();
    const changed = after.filter((r) => before.find((b) => b.range === r.range)?.checksum !== r.checksum).map((r) => r.range);
    expect(changed).toEqual([id.slice(0, 2)]);
  });

  it('the checksum is of the record, not of its text: the same JSON written another way hashes alike', async () => {
    const { rows } = await sql<{ same: boolean }>`
      SELECT jsonb_hash_extended(doc::jsonb, 0) = jsonb_hash_extended((regexp_replace(doc::text, '"price":12.50', '"price":12.5'))::jsonb, 0) AS same,
        doc::text LIKE '%"price":12.50%' AS written_with_zero
      FROM products WHERE id = ${ids[8]!}::uuid`.execute(t.database.db);
    expect(rows[0]).toEqual({ same: true, written_with_zero: true });
  });

  it('counts against the export rate limit, as a snapshot does (a request may hash every record)', async () => {
    expect((await get('/api/v1/products/checksums')).limit).toBe('999999');
    expect((await get('/api/v1/products/checksums/records')).limit).toBe('999999');
    expect((await get('/api/v1/products')).limit).toBe(UNLIMITED.RATE_LIMIT_STANDARD);
  });

  it('scoped like the list: a token without products:read gets 403', async () => {
    const orders = await t.auth(['orders:read']);
    expect((await get('/api/v1/products/checksums', orders)).status).toBe(403);
    expect((await get('/api/v1/products/checksums/records', orders)).status).toBe(403);
    expect((await get('/api/v1/orders/checksums', orders)).status).toBe(200);
  });

  it('bad input is a 400 naming the parameter', async () => {
    for (const [url, param] of [
      ['/api/v1/products/checksums?prefix=XY', 'prefix'],
      ['/api/v1/products/checksums?prefix=123456789', 'prefix'],
      ['/api/v1/products/checksums?digits=4', 'digits'],
      ['/api/v1/products/checksums/records?after=nope', 'after'],
      ['/api/v1/products/checksums/records?limit=20001', 'limit'],
    ] as const) {
      const { status, body } = await get(url);
      expect(status, url).toBe(400);
      expect(body.code).toBe('invalid_parameter');
      expect(JSON.stringify(body.errors ?? body.detail), url).toContain(param);
    }
  });
});
