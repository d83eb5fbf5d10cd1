/**
 * Bytes passed through by binary COPY (src/db/copy-out.ts, decision 0037): the statement with its
 * parameters inlined means what it means with bind parameters, whatever the values hold, and a list
 * page, an export page and a snapshot chunk read that way are byte for byte what the statements
 * return through Kysely.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { inlineParameters, parseBinaryCopy } from '../../src/db/copy-out.ts';
import { readOneRow, readPageBody, fetchPageBody, fetchPageKeys, streamPage } from '../../src/db/keyset-page.ts';
import { inStatementHorizon, readHorizon } from '../../src/db/write-clock.ts';
import { customerSource } from '../../src/customers/customer.json-sql.ts';

/** One field of a binary COPY row: its 32-bit length, then its bytes (-1: NULL). */
const field = (text: string | null) => {
  if (text === null) return Buffer.from([0xff, 0xff, 0xff, 0xff]);
  const bytes = Buffer.from(text);
  const length = Buffer.alloc(4);
  length.writeInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
};
/** A binary COPY's signature, flags and empty header extension. */
const header = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);

describe('inlineParameters', () => {
  it('replaces placeholders outside quotes and comments only', () => {
    expect(inlineParameters(`SELECT $1::int, '$1', "$2", $2 -- $1\n, $10`, [1, "it's", 3, 4, 5, 6, 7, 8, 9, 'ten'])).toBe(
      `SELECT '1'::int, '$1', "$2", 'it''s' -- $1\n, 'ten'`,
    );
    expect(inlineParameters('SELECT $1', [null])).toBe('SELECT NULL');
    expect(() => inlineParameters('SELECT $2', [1])).toThrow(/no parameter/);
  });

  it('parses what a binary COPY sends, NULLs included', () => {
    const stream = Buffer.concat([header, Buffer.from([0, 2]), field('é{"a":1}'), field(null), Buffer.from([0xff, 0xff])]);
    const rows = parseBinaryCopy(stream);
    expect(rows).toHaveLength(1);
    expect(rows[0]![0]!.toString('utf8')).toBe('é{"a":1}');
    expect(rows[0]![1]).toBeNull();
    expect(() => parseBinaryCopy(Buffer.from('not a copy at all, not at all'))).toThrow(/binary COPY/);
  });

  it('parses a binary COPY from the pieces it arrived in, split anywhere, without joining them', () => {
    const long = `[${'{"name":"ünïcödé 💡"},'.repeat(40)}{}]`;
    const row = (a: string, b: string | null, c: string) => Buffer.concat([Buffer.from([0, 3]), field(a), field(b), field(c)]);
    const stream = Buffer.concat([header, row('7', null, long), row('', 'x', 'y'), Buffer.from([0xff, 0xff])]);
    const expected = [
      ['7', null, long],
      ['', 'x', 'y'],
    ];
    // Every split of the stream into two pieces, and into pieces of every size from 1 to 9 bytes:
    // inside the signature, a field count, a length, a field's bytes and the trailer.
    const splits: Buffer[][] = [];
    for (let at = 1; at < stream.length; at++) splits.push([stream.subarray(0, at), stream.subarray(at)]);
    for (let size = 1; size < 10; size++) {
      const pieces: Buffer[] = [];
      for (let at = 0; at < stream.length; at += size) pieces.push(stream.subarray(at, at + size));
      splits.push(pieces);
    }
    for (const pieces of splits) {
      const rows = parseBinaryCopy(pieces);
      expect(rows.map((r) => r.map((f) => (f === null ? null : f.toString('utf8'))))).toEqual(expected);
      // The long field is held as views of the pieces it spans, not as a joined copy.
      const spanned = rows[0]![2]!;
      expect(spanned.length).toBe(Buffer.byteLength(long));
      for (const view of spanned.pieces) expect(pieces.some((p) => p.buffer === view.buffer)).toBe(true);
      expect(spanned.subarray(1, -1).toString('utf8')).toBe(long.slice(1, -1));
      expect(spanned.copy().equals(Buffer.from(long))).toBe(true);
    }
    expect(() => parseBinaryCopy([stream.subarray(0, stream.length - 6)])).toThrow(/ended inside a row/);
  });
});

describe.each(backends)('binary COPY reads (%s)', (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(backend);
    await sql`
      INSERT INTO customers (id, name, phone, email, city, is_active, created_at, last_modified)
      SELECT md5('c' || g)::uuid, 'Customer ' || g || E' "quoted" \\ back\\slash \t tab ünïcödé 💡', NULL, NULL, 'Nairobi', g % 3 <> 0,
             '2026-01-01T00:00:00Z'::timestamptz + (g / 7) * interval '1 second', '2026-01-01T00:00:00Z'::timestamptz + (g / 7) * interval '1 second'
      FROM generate_series(1, 700) g`.execute(t.db);
  });
  afterAll(async () => t?.close());

  it('runs a statement with hostile parameter values as with bind parameters', async () => {
    const values = ["'; DROP TABLE customers; --", "back\\slash \\' quote", 'ünïcödé 💡\nline', '$1 $2', ''];
    for (const value of values) {
      const text = await readOneRow(t.readRows!, t.db, sql`SELECT ${value}::text AS v, ${value} = ${value} AS same`, (row) => row![0]!.toString('utf8'));
      expect(text).toBe(value);
    }
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM customers`.execute(t.db);
    expect(rows[0]!.n).toBe(700);
  });

  it.runIf(backend === 'postgres')('hands a large field over in the pieces the connection read, not joined (decision 0068)', async () => {
    const size = 2 * 1048576;
    const { pieces, text } = await readOneRow(t.readRows!, t.db, sql`SELECT repeat('ab', ${size / 2}::int) || 'end'`, (row, owned) => {
      expect(owned).toBe(true);
      return { pieces: row![0]!.pieces.length, text: row![0]!.toString('latin1') };
    });
    expect(text).toBe(`${'ab'.repeat(size / 2)}end`);
    // pg-copy-streams' pieces are the socket's reads (64 KiB at most each): a joined copy would be one.
    expect(pieces).toBeGreaterThan(1);
  });

  it('passes on what a read callback throws, and the connection goes on', async () => {
    const failure = new Error('the reader refused the row');
    await expect(
      readOneRow(t.readRows!, t.db, sql`SELECT 'x'::text`, () => {
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await readOneRow(t.readRows!, t.db, sql`SELECT 'after'::text`, (row) => row![0]!.toString('utf8'))).toBe('after');
  });

  it("fails as a statement fails, with PostgreSQL's code, and the connection goes on", async () => {
    await expect(readOneRow(t.readRows!, t.db, sql`SELECT (1 / (${0}::int))::text`, (row) => row)).rejects.toMatchObject({ code: '22012' });
    await expect(readOneRow(t.readRows!, t.db, sql`SELECT no_such_column::text FROM customers`, (row) => row)).rejects.toMatchObject({
      code: '42703',
      message: expect.stringContaining('no_such_column'),
    });
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM customers`.execute(t.db);
    expect(rows[0]!.n).toBe(700);
  });

  it('answers copies asked together each with its own bytes, and one larger than the shared area whole', async () => {
    // The embedded database writes a copy's answer into one of a few areas shared with this thread
    // (decision 0046) and runs the next copies sent before this thread has read it: no answer may
    // be overwritten before it is read, with more copies asked at once than there are areas.
    const values = Array.from({ length: 24 }, (_, i) => `${i}:${'ü'.repeat(1000 * (i + 1))}`);
    const texts = await Promise.all(
      values.map((value) => readOneRow(t.readRows!, t.db, sql`SELECT ${value}::text`, (row, owned) => (owned ? row![0]!.toBuffer() : row![0]!.copy()))),
    );
    expect(texts.map((b) => b.toString('utf8'))).toEqual(values);
    // 6 MiB: more than the 4 MiB area, answered in a buffer of its own.
    const size = 6 * 1048576;
    const big = await readOneRow(t.readRows!, t.db, sql`SELECT repeat('x', ${size}::int) || 'end'`, (row) => row![0]!.length);
    expect(big).toBe(size + 3);
    const after = await readOneRow(t.readRows!, t.db, sql`SELECT 'small'::text`, (row) => row![0]!.toString('utf8'));
    expect(after).toBe('small');
  });

  it.runIf(backend === 'pglite')('ends the turn once a copy is sent: the next statement is sent before its answer, and runs after it', async () => {
    // The copy takes a third of a second; the write asked after it is sent at once (two statements
    // in the thread: one waiting there), yet runs after the copy, which does not see it.
    const id = '00000000-0000-4000-8000-0000000000c1';
    const copy = readOneRow(t.readRows!, t.db, sql`SELECT (SELECT count(*) FROM customers WHERE id = ${id}::uuid)::text FROM pg_sleep(0.3)`, (row) =>
      row![0]!.toString('latin1'),
    );
    await new Promise((resolve) => setImmediate(resolve));
    const write = sql`INSERT INTO customers (id, name, is_active, created_at, last_modified) VALUES (${id}::uuid, 'late', true, now(), now())`.execute(t.db);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(t.poolStats().waiting).toBe(1);
    expect(await copy).toBe('0');
    await write;
    const after = await readOneRow(t.readRows!, t.db, sql`SELECT count(*)::text FROM customers WHERE id = ${id}::uuid`, (row) => row![0]!.toString('latin1'));
    expect(after).toBe('1');
    await sql`DELETE FROM customers WHERE id = ${id}::uuid`.execute(t.db);
  });

  it.runIf(backend === 'pglite')(
    'keeps a page statement prepared and runs it on its generic plan, planned once, the setting back to the default after (decision 0050)',
    async () => {
      const prepared = sql<{ name: string; generic: number; custom: number }>`
        SELECT name, generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE statement LIKE '%string_agg%'`;
      const before = (await prepared.execute(t.db)).rows;
      const horizon = inStatementHorizon(backend)!;
      const { rows: ids } = await sql<{ iso: string; id: string }>`
        SELECT iso_utc(last_modified) AS iso, id::text AS id FROM customers ORDER BY last_modified, id LIMIT 3 OFFSET 100`.execute(t.db);
      const pages = [];
      for (const cursor of ids) {
        const req = { cursor: { ts: cursor.iso, id: cursor.id }, limit: 20, order: 'asc' as const, horizon, filters: [] };
        const page = await readPageBody(t.readRows!, t.db, customerSource, req);
        // The prepared run answers what the statement answers through Kysely (bind parameters, planned for them).
        const kysely = await fetchPageBody(t.db, customerSource, req);
        expect(page.data.toString('utf8')).toBe(kysely.data);
        expect(page.last).toEqual(kysely.last);
        pages.push(page.last!.id);
      }
      expect(new Set(pages).size).toBe(3);
      const after = (await prepared.execute(t.db)).rows.filter((r) => !before.some((b) => b.name === r.name));
      // One statement for the three cursors, each run on the generic plan: none planned for its values.
      expect(after).toHaveLength(1);
      expect(after[0]).toMatchObject({ generic: 3, custom: 0 });
      const { rows: mode } = await sql<{ plan_cache_mode: string }>`SHOW plan_cache_mode`.execute(t.db);
      expect(mode[0]!.plan_cache_mode).toBe('auto');
    },
  );

  it.runIf(backend === 'pglite')('keeps at most 64 statements prepared, and none that failed to parse', async () => {
    const count = async () => (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements`.execute(t.db)).rows[0]!.n;
    for (let i = 0; i < 70; i++) {
      const text = await readOneRow(t.readRows!, t.db, sql`SELECT ${`v${i}`}::text || ${sql.lit(i)}::text`, (row) => row![0]!.toString('utf8'));
      expect(text).toBe(`v${i}${i}`);
    }
    expect(await count()).toBe(64);
    // A statement that cannot be prepared fails each time with its own error, never "does not exist".
    for (let i = 0; i < 2; i++) {
      await expect(readOneRow(t.readRows!, t.db, sql`SELECT no_such_column::text FROM customers WHERE id = ${'x'}`, (row) => row)).rejects.toMatchObject({
        code: '42703',
      });
    }
    // (Each failure may have closed the oldest statement to make room.) The statements kept still run.
    expect(await count()).toBeLessThanOrEqual(64);
    for (let i = 60; i < 70; i++) {
      const text = await readOneRow(t.readRows!, t.db, sql`SELECT ${`w${i}`}::text || ${sql.lit(i)}::text`, (row) => row![0]!.toString('utf8'));
      expect(text).toBe(`w${i}${i}`);
    }
    const { rows } = await sql<{ plan_cache_mode: string }>`SHOW plan_cache_mode`.execute(t.db);
    expect(rows[0]!.plan_cache_mode).toBe('auto');
  });

  it("reads a page below the horizon its own statement reads on the embedded database, below a horizon statement's on PostgreSQL", async () => {
    const own = inStatementHorizon(backend);
    // PostgreSQL: none (a writer could commit between the statement's snapshot and its look at the lock table).
    expect(own === undefined).toBe(backend === 'postgres');
    if (!own) return;
    // What the embedded database's statement reads is readHorizon's answer at its start: every write committed before it.
    const id = '00000000-0000-4000-8000-0000000000c2';
    await sql`INSERT INTO customers (id, name, is_active, created_at, last_modified) VALUES (${id}::uuid, 'just now', true, clock_timestamp(), clock_timestamp())`.execute(
      t.db,
    );
    const page = await readPageBody(t.readRows!, t.db, customerSource, { limit: 5, order: 'desc', horizon: own, filters: [] });
    expect(page.last).toBeDefined();
    expect(page.data.toString('utf8')).toContain(id);
    const before = await readHorizon(t.db);
    const { rows } = await sql<{ same: boolean }>`SELECT ${own} = statement_timestamp() AND ${own} >= ${before}::timestamptz AS same`.execute(t.db);
    expect(rows[0]!.same).toBe(true);
    await sql`DELETE FROM customers WHERE id = ${id}::uuid`.execute(t.db);
  });

  it('reads list pages and export pages byte for byte as the statements through Kysely do', async () => {
    const horizon = await readHorizon(t.db);
    for (const order of ['asc', 'desc'] as const) {
      for (const filters of [[], [sql`c.is_active`]]) {
        let cursor: { ts: string; id: string } | undefined;
        for (let pages = 0; pages < 20; pages++) {
          const req = { cursor, limit: 97, order, horizon, filters };
          const viaKysely = await fetchPageBody(t.db, customerSource, req);
          const viaCopy = await readPageBody(t.readRows!, t.db, customerSource, req);
          expect(viaCopy.data.toString('utf8')).toBe(viaKysely.data);
          expect(viaCopy.hasMore).toBe(viaKysely.hasMore);
          expect(viaCopy.last).toEqual(viaKysely.last);
          // The export page: one statement by COPY against the keys-then-chunks walk through Kysely.
          const { keys, hasMore } = await fetchPageKeys(t.db, customerSource, req);
          const last = keys[keys.length - 1];
          const exported = await readPageBody(t.readRows!, t.db, customerSource, req, '\n');
          expect(exported.hasMore).toBe(hasMore);
          expect(exported.last).toEqual(last);
          let lines = '';
          if (last) for await (const rows of streamPage(t.db, customerSource, req, last)) lines += `${rows.map((r) => r.json).join('\n')}\n`;
          expect(exported.last ? `${exported.data.toString('utf8')}\n` : '').toBe(lines);
          if (!viaKysely.hasMore) break;
          cursor = { ts: viaKysely.last!.iso, id: viaKysely.last!.id };
        }
      }
    }
  });
});
