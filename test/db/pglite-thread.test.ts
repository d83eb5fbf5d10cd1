/**
 * The embedded database runs in its own thread (decision 0030): while one statement runs,
 * however long, the HTTP side answers what needs no database. Ordering, not timing: a single
 * statement of several seconds of work is sent, then /healthz is asked over real HTTP; the answer
 * must come before the statement's result. With PGlite on the HTTP thread the statement holds the
 * thread from start to end (no yield can split one statement), so the answer could only come after.
 * Also: errors cross the thread with their SQLSTATE and constraint, and rows keep the shared types.
 * PGlite only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

describe('the embedded database in its own thread', () => {
  let t: TestApp;
  let base: string;
  beforeAll(async () => {
    t = await buildTestApp('pglite');
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  });
  afterAll(async () => t?.close());

  it('answers /healthz while one long statement runs', async () => {
    const order: string[] = [];
    const statement = sql<{ n: number }>`SELECT count(*)::int AS n FROM generate_series(1, 3000000)`.execute(t.database.db).then((result) => {
      order.push('statement');
      return result;
    });
    const health = await fetch(`${base}/healthz`);
    order.push('healthz');
    expect(health.status).toBe(200);
    expect((await statement).rows[0]!.n).toBe(3_000_000);
    expect(order).toEqual(['healthz', 'statement']);
  });

  it('carries a statement error’s SQLSTATE and constraint across the thread, and the shared types back', async () => {
    const failure = await sql`INSERT INTO products (id, name, slug, product_type, sku, price, created_at, last_modified)
      SELECT gen_random_uuid(), 'A', 'dup-' || i, 'physical', 'DUP', 1, now(), now() FROM generate_series(1, 2) AS i`
      .execute(t.database.db)
      .then(
        () => undefined,
        (error: unknown) => error as { code?: string; constraint?: string; message: string },
      );
    expect(failure).toMatchObject({ code: '23505', constraint: 'products_sku_key' });
    const { rows } = await sql<{ big: number; stamp: string; dec: number }>`
      SELECT 9007199254740991::int8 AS big, '2026-11-26 10:00:00.123456+00'::timestamptz AS stamp, 12.5::numeric AS dec`.execute(t.database.db);
    expect(rows[0]).toEqual({ big: 9007199254740991, stamp: '2026-11-26 10:00:00.123456+00', dec: 12.5 });
  });
});
