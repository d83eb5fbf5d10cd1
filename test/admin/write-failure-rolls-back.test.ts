/**
 * An admin write that fails inside its route (an error that is not the database's: a bug, a thrown
 * exception after some of its rows were written) is answered 500 and leaves nothing: not the rows its
 * statements wrote before the failure, not an audit entry, not a stored answer for its
 * Idempotency-Key (whose retry then runs once). Decision 0027: 5xx answers roll back, 2xx and 4xx
 * commit. A commit of a 500 would keep a partial, unaudited write that the client retries.
 *
 * The request statement hook throws a plain error before statement k of the write, for every k up to
 * the write's COMMIT: each failure point before it gives 500 and nothing written.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { setRequestStatementHook } from '../../src/db/request-transaction.ts';
import type { Database } from '../../src/db/schema.ts';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';

const countOf = async (db: Kysely<Database>, query: ReturnType<typeof sql<{ n: number }>>) => (await query.execute(db)).rows[0]!.n;

interface Write {
  name: string;
  url: string;
  body: (tag: string) => Record<string, unknown>;
  /** Rows the write made for `tag` (the record and its children). */
  rows: (db: Kysely<Database>, tag: string) => Promise<number>;
}

const WRITES: Write[] = [
  {
    name: 'product with variants (several statements)',
    url: '/admin/api/v1/products',
    body: (tag) => ({
      name: tag,
      product_type: 'physical',
      price: 9,
      variants: [
        { name: 'One', price: 9, stock: 1 },
        { name: 'Two', price: 9, stock: 2 },
      ],
    }),
    rows: (db, tag) =>
      countOf(
        db,
        sql<{
          n: number;
        }>`SELECT ((SELECT count(*) FROM products WHERE name = ${tag}) + (SELECT count(*) FROM variants v JOIN products p ON p.id = v.product_id WHERE p.name = ${tag}))::int AS n`,
      ),
  },
  {
    name: 'API key',
    url: '/admin/api/v1/tokens',
    body: (tag) => ({ name: tag }),
    rows: (db, tag) => countOf(db, sql<{ n: number }>`SELECT count(*)::int AS n FROM api_tokens WHERE name = ${tag}`),
  },
];

describe.each(backends)('an admin write failing inside its route (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    admin = await t.auth(['admin']);
  });
  afterEach(() => setRequestStatementHook(undefined));
  afterAll(async () => {
    setRequestStatementHook(undefined);
    await t?.close();
  });

  const audited = () => countOf(t.ctx.database.db, sql<{ n: number }>`SELECT count(*)::int AS n FROM admin_audit_log`);
  const storedAnswers = () => countOf(t.ctx.database.db, sql<{ n: number }>`SELECT count(*)::int AS n FROM idempotency_keys`);

  it.each(WRITES)('$name: 500 and nothing written, audited or stored at every statement; the keyed retry then runs once', async (write) => {
    const failedAt: string[] = [];
    for (let k = 1; k < 200; k++) {
      const tag = `fail-${backend}-${write.url.split('/').pop()}-${k}`;
      let n = 0;
      let thrownAt: string | undefined;
      setRequestStatementHook((sqlText) => {
        n++;
        if (n !== k) return;
        thrownAt = sqlText;
        throw new Error('a bug in the route');
      });
      const auditBefore = await audited();
      const storedBefore = await storedAnswers();
      const request = {
        method: 'POST' as const,
        url: write.url,
        headers: { ...admin, 'content-type': 'application/json', 'idempotency-key': tag },
        payload: JSON.stringify(write.body(tag)),
      };
      const res = await t.app.inject(request);
      setRequestStatementHook(undefined);
      if (thrownAt === undefined) {
        // k is past the write's last statement: it ran whole, once.
        expect(res.statusCode, res.body).toBe(201);
        expect(await write.rows(t.ctx.database.db, tag)).toBeGreaterThan(0);
        expect(failedAt.length).toBe(k - 1);
        // The walk failed the write inside its route, not only at its edges.
        expect(failedAt.filter((s) => /^\s*(insert|update)/i.test(s)).length, failedAt.join('\n')).toBeGreaterThan(0);
        return;
      }
      failedAt.push(thrownAt);
      expect({ at: thrownAt, status: res.statusCode }).toEqual({ at: thrownAt, status: 500 });
      expect(res.headers['content-type'], thrownAt).toMatch(/application\/problem\+json/);
      expect(await write.rows(t.ctx.database.db, tag), `rows written after failing at ${thrownAt}`).toBe(0);
      expect(await audited(), `audit entries after failing at ${thrownAt}`).toBe(auditBefore);
      expect(await storedAnswers(), `stored answers after failing at ${thrownAt}`).toBe(storedBefore);
      // The key is free: its retry runs the write once.
      const retry = await t.app.inject(request);
      expect(retry.statusCode, `${thrownAt}: ${retry.body}`).toBe(201);
      const again = await t.app.inject(request);
      expect(again.statusCode).toBe(201);
      expect(again.body).toBe(retry.body);
      expect(await write.rows(t.ctx.database.db, tag)).toBeGreaterThan(0);
      expect(await audited()).toBe(auditBefore + 1);
    }
    throw new Error(`the write never ran whole within 200 statements (${failedAt.length} seen)`);
  });
});
