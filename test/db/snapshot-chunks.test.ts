/**
 * The snapshot's chunks (src/db/snapshot.ts) follow the records' size, not a row count: a chunk is
 * held several times over in memory while it passes (decision 0023), so rows per statement come from
 * the previous chunk's characters per row, and every record still streams once, in key order.
 * On PostgreSQL the chunks are read as the server does, by binary COPY (decision 0037).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { snapshotStream } from '../../src/db/snapshot.ts';
import { readHorizon } from '../../src/db/write-clock.ts';
import { customerSource } from '../../src/customers/customer.json-sql.ts';

const CUSTOMERS = 3000;

describe.each(backends)('snapshot chunks (%s)', (backend) => {
  let t: TestDatabase;

  beforeAll(async () => {
    t = await openTestDatabase(backend);
    await sql`
      INSERT INTO customers (id, name, phone, email, city, is_active, created_at, last_modified)
      SELECT md5('c' || g)::uuid, 'Customer ' || g, NULL, NULL, 'Nairobi', true,
             '2026-01-01T00:00:00Z'::timestamptz + (g / 7) * interval '1 second', '2026-01-01T00:00:00Z'::timestamptz + (g / 7) * interval '1 second'
      FROM generate_series(1, ${CUSTOMERS}) g`.execute(t.db);
  }, 120_000);
  afterAll(async () => t?.close());

  it('sizes each chunk after the first by characters, within the row cap, and streams every record once in order', async () => {
    const chunkChars = 20_000;
    const chunks: string[] = [];
    for await (const chunk of snapshotStream(t.db, customerSource, { horizon: await readHorizon(t.db), filters: [] }, 1000, chunkChars, t.readRows)) {
      chunks.push(typeof chunk === 'string' ? chunk : chunk.toString('utf8'));
    }
    const records = chunks
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { id: string; last_modified: string });
    expect(records.length).toBe(CUSTOMERS);
    const keys = records.map((r) => `${r.last_modified}_${r.id}`);
    expect(new Set(keys).size).toBe(CUSTOMERS);
    expect(keys).toEqual([...keys].sort());
    // The first chunk is its row count (500 rows, the early bytes); each next one fits the characters
    // (records differ by a few characters in length, hence the margin), where 1000 rows would be ~9×.
    expect(chunks[0]!.length).toBeGreaterThan(chunkChars);
    for (const chunk of chunks.slice(1)) expect(chunk.length).toBeLessThanOrEqual(chunkChars * 1.1);
    expect(chunks.length).toBeGreaterThan(CUSTOMERS / 1000 + 2);
  });

  const streamed = async (depth: number, chunkChars: number, between?: () => Promise<void>) => {
    const chunks: string[] = [];
    let first = true;
    for await (const chunk of snapshotStream(t.db, customerSource, { horizon: await readHorizon(t.db), filters: [] }, 1000, chunkChars, t.readRows, depth)) {
      chunks.push(typeof chunk === 'string' ? chunk : chunk.toString('utf8'));
      if (first && between) await between();
      first = false;
    }
    return chunks;
  };
  const idsOf = (chunks: string[]) =>
    chunks
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { id: string }).id);

  it('reads two chunks at once (decision 0069) into the same bytes as one at a time, chunk for chunk sized alike', async () => {
    const one = await streamed(1, 20_000);
    const two = await streamed(2, 20_000);
    expect(two.join('')).toBe(one.join(''));
    expect(idsOf(two)).toHaveLength(CUSTOMERS);
    for (const chunk of two.slice(1)) expect(chunk.length).toBeLessThanOrEqual(20_000 * 1.1);
    expect(two.length).toBeGreaterThan(CUSTOMERS / 1000 + 2);
  });

  it('never exceeds the row cap, however small the records', async () => {
    const chunks: string[] = [];
    for await (const chunk of snapshotStream(t.db, customerSource, { horizon: await readHorizon(t.db), filters: [] }, 700, 1 << 30, t.readRows)) {
      chunks.push(typeof chunk === 'string' ? chunk : chunk.toString('utf8'));
    }
    const rows = chunks.map((c) => c.split('\n').filter(Boolean).length);
    expect(rows.reduce((a, b) => a + b, 0)).toBe(CUSTOMERS);
    expect(Math.max(...rows)).toBe(700);
  });

  it('reading chunks at once, misses nothing and repeats nothing when records move past the horizon or go after their bounds were fixed', async () => {
    const { rows } = await sql<{ id: string }>`SELECT id::text AS id FROM customers ORDER BY last_modified, id`.execute(t.db);
    const order = rows.map((r) => r.id);
    // After the first chunk (500 rows) with two chunks of ~115 rows in flight, the bounds of the next
    // eight are fixed (to ~1,450): these records lie inside them and are read only later.
    const moved = order.slice(1000, 1050);
    const gone = order.slice(1100, 1150);
    const chunks = await streamed(2, 20_000, async () => {
      await sql`UPDATE customers SET last_modified = clock_timestamp() + interval '1 hour' WHERE id = ANY(${moved}::uuid[])`.execute(t.db);
      await sql`DELETE FROM customers WHERE id = ANY(${gone}::uuid[])`.execute(t.db);
    });
    const touched = new Set([...moved, ...gone]);
    expect(idsOf(chunks)).toEqual(order.filter((id) => !touched.has(id)));
  });
});
