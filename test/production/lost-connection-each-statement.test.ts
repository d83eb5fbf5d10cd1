/**
 * An admin write whose connection is lost before ANY of its statements — the key's claim, the
 * route's statements, each savepoint (begun, released, rolled back), its read-backs, the audit entry,
 * the stored answer, the COMMIT — is answered 503 service_unavailable with Retry-After, never 500, and
 * leaves nothing written (decision 0027: exactly-once writes). The step hook of
 * exactly-once-writes.test.ts reaches only the five steps between statements; a CI run once saw a
 * 500 for a backend terminated in the middle of a write, so this walks every statement.
 *
 * PostgreSQL: the request transaction's backend is terminated (`pg_terminate_backend(pid, 5000)`
 * waits until it is gone) just before statement k. Embedded: the statement fails with the error a
 * lost connection gives (57P01), as PGlite has no connection to lose.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { setRequestStatementHook } from '../../src/db/request-transaction.ts';
import type { Database } from '../../src/db/schema.ts';
import { backends, type TestDatabase, drainDeadConnections } from '../helpers/test-database.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';

interface Write {
  name: string;
  url: string;
  body: (tag: string) => Record<string, unknown>;
  /** How many rows the write made for `tag`. */
  count: (db: Kysely<Database>, tag: string) => Promise<number>;
  idempotent?: boolean;
}

const count = async (db: Kysely<Database>, query: ReturnType<typeof sql<{ n: number }>>) => (await query.execute(db)).rows[0]!.n;

const WRITES: Write[] = [
  {
    name: 'customer (flat record, keyed)',
    url: '/admin/api/v1/customers',
    body: (tag) => ({ name: tag }),
    count: (db, tag) => count(db, sql<{ n: number }>`SELECT count(*)::int AS n FROM customers WHERE name = ${tag}`),
    idempotent: true,
  },
  {
    name: 'product with a variant (nested rows)',
    url: '/admin/api/v1/products',
    body: (tag) => ({ name: tag, product_type: 'physical', price: 9, variants: [{ name: 'One', price: 9, stock: 1 }] }),
    count: (db, tag) => count(db, sql<{ n: number }>`SELECT count(*)::int AS n FROM products WHERE name = ${tag}`),
  },
  {
    name: 'API key',
    url: '/admin/api/v1/tokens',
    body: (tag) => ({ name: tag }),
    count: (db, tag) => count(db, sql<{ n: number }>`SELECT count(*)::int AS n FROM api_tokens WHERE name = ${tag}`),
  },
];

describe.each(backends)('an admin write losing its connection before each statement (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };
  let killer: pg.Client | undefined;

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    admin = await t.auth(['admin']);
    if (backend === 'postgres') {
      killer = new pg.Client({ connectionString: (t.ctx.database as TestDatabase).url });
      await killer.connect();
    }
  });
  afterEach(() => setRequestStatementHook(undefined));
  afterAll(async () => {
    setRequestStatementHook(undefined);
    await killer?.end();
    if (t) await drainDeadConnections(t.ctx.database.db);
    await t?.close();
  });

  it.each(WRITES)('$name: 503 and nothing written at every statement, then 201 once past the last', async (write) => {
    const seen: string[] = [];
    for (let k = 1; k < 200; k++) {
      const tag = `lost-${backend}-${write.url.split('/').pop()}-${k}`;
      let n = 0;
      let lostAt: string | undefined;
      let pid: number | undefined;
      setRequestStatementHook(async (sqlText, transaction) => {
        n++;
        // The backend of the request's transaction, read while it is open (not any more at COMMIT).
        pid = (await transaction.backendPid()) ?? pid;
        if (n !== k) return;
        lostAt = sqlText;
        if (killer) {
          expect(pid, sqlText).toBeDefined();
          const { rows } = await killer.query<{ done: boolean }>('SELECT pg_terminate_backend($1, 5000) AS done', [pid]);
          expect(rows[0]!.done).toBe(true);
        } else {
          throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
        }
      });
      const res = await t.app.inject({
        method: 'POST',
        url: write.url,
        headers: { ...admin, 'content-type': 'application/json', ...(write.idempotent ? { 'idempotency-key': tag } : {}) },
        payload: JSON.stringify(write.body(tag)),
      });
      setRequestStatementHook(undefined);
      if (lostAt === undefined) {
        // k is past the write's last statement: it ran whole.
        expect(res.statusCode, res.body).toBe(201);
        expect(await write.count(t.ctx.database.db, tag)).toBe(1);
        // The walk did lose the connection at each statement before this one.
        expect(seen.length).toBe(k - 1);
        expect(seen).toContain('COMMIT');
        return;
      }
      seen.push(lostAt);
      expect({ at: lostAt, status: res.statusCode, body: res.json() }).toMatchObject({
        at: lostAt,
        status: 503,
        body: { code: 'service_unavailable' },
      });
      expect(res.headers['retry-after'], lostAt).toBeDefined();
      // The pool drops the dead connection on its next use; read until a live one answers.
      let written: number | undefined;
      for (let attempt = 0; attempt < 6 && written === undefined; attempt++) {
        written = await write.count(t.ctx.database.db, tag).catch(() => undefined);
      }
      expect(written, `written after losing the connection at ${lostAt}`).toBe(0);
    }
    throw new Error(`the write never ran whole within 200 statements (${seen.length} seen)`);
  });
});
