/**
 * GET /api/v1/{resource}/snapshot (src/db/snapshot.ts): a whole resource in one stream, past the
 * 500-record export limit, ending with a cursor that misses nothing changed meanwhile, resumable,
 * one per token at a time, and bad input answered 4xx problem+json.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { startClientTestServer, type ClientTestServer } from '../client/client-test-kit.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { createCustomer, updateCustomer } from '../../src/customers/customer.service.ts';

/** More customers than one snapshot chunk (1000) and than socket buffers hold unread. */
const CUSTOMERS = 20_000;

interface Customer {
  id: string;
  name: string;
  last_modified: string;
}

describe.each(backends)('snapshot export (%s)', (backend) => {
  let s: ClientTestServer;
  const get = (path: string, init: RequestInit = {}) =>
    fetch(`${s.baseUrl}/api/v1/${path}`, { ...init, headers: { authorization: `Bearer ${s.token}`, ...(init.headers ?? {}) } });
  const lines = (text: string) =>
    text
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Customer);

  beforeAll(async () => {
    s = await startClientTestServer(backend, UNLIMITED);
    await sql`
      INSERT INTO customers (id, name, phone, email, city, is_active, created_at, last_modified)
      SELECT md5('c' || g)::uuid, 'Customer ' || g, NULL, NULL, 'Nairobi', true,
             '2026-01-01T00:00:00Z'::timestamptz + (g / 7) * interval '1 second', '2026-01-01T00:00:00Z'::timestamptz + (g / 7) * interval '1 second'
      FROM generate_series(1, ${CUSTOMERS}) g`.execute(s.t.database.db);
  }, 240_000);
  afterAll(async () => s?.close());

  it('streams every record once in key order, past the page limit, with the end cursor in a header', async () => {
    const response = await get('customers/snapshot');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const end = response.headers.get('x-snapshot-cursor');
    expect(end).toMatch(/^\d{4}-\d\d-\d\dT.+Z_00000000-0000-0000-0000-000000000000$/);
    // The size of the stream, known before its first record (a sync tool's percentage and ETA).
    expect(response.headers.get('x-total-count')).toBe(String(CUSTOMERS));
    const records = lines(await response.text());
    expect(records.length).toBe(CUSTOMERS);
    expect(new Set(records.map((r) => r.id)).size).toBe(CUSTOMERS);
    const keys = records.map((r) => `${r.last_modified}_${r.id}`);
    expect(keys).toEqual([...keys].sort());
    // Nothing left after the end cursor while nothing changed.
    const after = await get(`customers?cursor=${encodeURIComponent(end!)}`);
    expect(((await after.json()) as { data: unknown[] }).data).toEqual([]);
  });

  it('misses nothing changed while it streams: each record is in the stream or after the end cursor', async () => {
    const response = await get('customers/snapshot');
    const end = response.headers.get('x-snapshot-cursor')!;
    const total = Number(response.headers.get('x-total-count'));
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    // While the stream runs: change one record surely streamed already and one surely not yet, add one.
    const {
      rows: [early, late],
    } = await sql<{ id: string }>`
      (SELECT id::text AS id FROM customers ORDER BY last_modified, id LIMIT 1)
      UNION ALL (SELECT id::text FROM customers ORDER BY last_modified DESC, id DESC LIMIT 1)`.execute(s.t.database.db);
    const created = (await createCustomer(s.t.database.db, { name: 'Made during the snapshot' })) as Customer;
    for (const id of [early!.id, late!.id]) await updateCustomer(s.t.database.db, id, { name: `Renamed ${id}` });
    let text = new TextDecoder().decode(first.value);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const streamed = lines(text);
    // X-Total-Count is an upper bound (decision 0032): never more lines than it says. (Fewer when the
    // renamed record had not been read yet; the server may also have read all 20,000 into the
    // socket's buffers before the rename, which a test cannot prevent: so not asserted.)
    expect(streamed.length).toBeLessThanOrEqual(total);
    expect(new Set(streamed.map((r) => r.id)).size).toBe(streamed.length);
    const since = await get(`customers/export?cursor=${encodeURIComponent(end)}`);
    const changed = lines(await since.text());
    const seen = new Map<string, string>();
    for (const r of [...streamed, ...changed]) seen.set(r.id, r.name);
    const { rows: now } = await sql<{ id: string; name: string }>`SELECT id::text, name FROM customers`.execute(s.t.database.db);
    expect(now.filter((r) => seen.get(r.id) !== r.name)).toEqual([]);
    expect(changed.map((r) => r.id)).toEqual(expect.arrayContaining([early!.id, late!.id, created.id]));
  });

  it('resumes from the last record received without repeating or skipping one', async () => {
    const all = lines(await (await get('customers/snapshot')).text());
    const cut = all[1234]!;
    const resumed = await get(`customers/snapshot?cursor=${encodeURIComponent(`${cut.last_modified}_${cut.id}`)}`);
    // The count of a resumed stream is what is left after its cursor.
    expect(resumed.headers.get('x-total-count')).toBe(String(all.length - 1235));
    const rest = lines(await resumed.text());
    expect([...all.slice(0, 1235), ...rest].map((r) => r.id)).toEqual(all.map((r) => r.id));
  });

  it('runs one per token at a time: a second one while the first streams is 429 with Retry-After; a closed one frees the token', async () => {
    const controller = new AbortController();
    const first = await get('customers/snapshot', { signal: controller.signal });
    expect(first.status).toBe(200);
    const second = await get('products/snapshot');
    expect(second.status).toBe(429);
    expect(second.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await second.json()) as { detail: string }).detail).toMatch(/one at a time/);
    controller.abort();
    await first.body?.cancel().catch(() => {});
    // The server notices the closed connection and frees the token: the next snapshot is served.
    let third: Response;
    for (;;) {
      third = await get('customers/snapshot');
      if (third.status !== 429) break;
      await third.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, Number(third.headers.get('retry-after')) * 100));
    }
    expect(third.status).toBe(200);
    expect(lines(await third.text()).length).toBeGreaterThanOrEqual(CUSTOMERS);
    // The database keeps serving: nothing was left open by the abandoned stream.
    expect((await get('customers?limit=1')).status).toBe(200);
  });

  it.runIf(backend === 'postgres')('leaves no statement, transaction or extra connection behind when the client goes away mid-stream', async () => {
    const db = s.t.database.db;
    const sessions = async () =>
      (
        await sql<{ state: string | null; query: string }>`
          SELECT state, query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`.execute(
          db,
        )
      ).rows;
    const controller = new AbortController();
    const response = await get('customers/snapshot', { signal: controller.signal });
    const reader = response.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    controller.abort();
    await reader.cancel().catch(() => {});
    // Once the server has noticed (the token is free again), nothing it ran for the stream is still open.
    for (;;) {
      const again = await get('customers/snapshot?cursor=2999-01-01T00:00:00Z');
      await again.text();
      if (again.status === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await vi.waitFor(async () => {
      expect((await sessions()).filter((r) => r.state !== 'idle')).toEqual([]);
      // Every connection is back in the pool: the stream kept none checked out.
      const pool = s.t.database.poolStats();
      expect(pool.total - pool.idle).toBe(0);
    });
  });

  it('hands a resume cursor at or past the read horizon back as the end cursor, with an empty stream', async () => {
    const future = '2999-01-01T00:00:00.000000Z_00000000-0000-0000-0000-0000000000ff';
    const response = await get(`customers/snapshot?cursor=${encodeURIComponent(future)}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-total-count')).toBe('0');
    // Never behind what the client asked for: continuing from it re-reads nothing it skipped on purpose.
    expect(response.headers.get('x-snapshot-cursor')).toBe(future);
    expect(await response.text()).toBe('');
  });

  it('answers unknown parameters and bad cursors with 400 problem+json naming them', async () => {
    const unknown = await get('customers/snapshot?limit=10');
    expect(unknown.status).toBe(400);
    expect(unknown.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.stringify(await unknown.json())).toContain('limit');
    const bad = await get('customers/snapshot?cursor=yesterday');
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain('cursor');
  });

  it('refuses an events snapshot whose cursor reaches behind the event log retention (400 naming the oldest cursor)', async () => {
    const db = s.t.database.db;
    await sql`INSERT INTO retention_watermarks (table_name, oldest_available, updated_at) VALUES ('events', '2026-03-01T00:00:00Z'::timestamptz, now())
      ON CONFLICT (table_name) DO UPDATE SET oldest_available = EXCLUDED.oldest_available`.execute(db);
    try {
      const behind = await get(`events/snapshot?cursor=${encodeURIComponent('2026-01-01T00:00:00Z')}`);
      expect(behind.status).toBe(400);
      expect(behind.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const problem = (await behind.json()) as { errors: { param: string; message: string }[] };
      expect(problem.errors[0]!.param).toBe('cursor');
      expect(problem.errors[0]!.message).toMatch(/retention/);
      expect((await get(`events/snapshot?cursor=${encodeURIComponent('2026-03-02T00:00:00Z')}`)).status).toBe(200);
    } finally {
      await sql`DELETE FROM retention_watermarks`.execute(db);
    }
  });
});

describe.each(backends)('snapshot export and the export budget (%s)', (backend) => {
  let s: ClientTestServer;
  beforeAll(async () => {
    s = await startClientTestServer(backend, { RATE_LIMIT_EXPORT: '2' });
    await sql`
      INSERT INTO customers (id, name, phone, email, city, is_active, created_at, last_modified)
      SELECT md5('b' || g)::uuid, 'Customer ' || g, NULL, NULL, NULL, true, now() - interval '1 hour', now() - interval '1 hour'
      FROM generate_series(1, 2500) g`.execute(s.t.database.db);
  }, 240_000);
  afterAll(async () => s?.close());

  it('counts one request against the export budget however many chunks it streams', async () => {
    const get = () => fetch(`${s.baseUrl}/api/v1/customers/snapshot`, { headers: { authorization: `Bearer ${s.token}` } });
    const first = await get();
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit')).toBe('2');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('1');
    expect((await first.text()).split('\n').filter(Boolean).length).toBe(2500);
    const second = await get();
    expect(second.headers.get('x-ratelimit-remaining')).toBe('0');
    await second.text();
    const third = await get();
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBeTruthy();
  });
});
