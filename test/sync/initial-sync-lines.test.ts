/**
 * The initial sync's line path: records go from the snapshot's NDJSON lines to the mirror unparsed
 * (COPY into a staging table on PostgreSQL, one JSON array on PGlite), so the text must arrive
 * intact whatever it holds, the newest of one key must win inside a batch and against the table, a
 * failed batch must leave neither rows nor cursor, and a snapshot broken mid-stream must resume
 * after the last line taken.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { freshMirror as freshMirrorOf } from './mirror-fixture.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { clientStoreReader, initialSync, mirrorMatches, verifyMirror, SYNC_RESOURCES, type MirrorDatabase } from '../../packages/sync/src/index.ts';
import { isLoopback } from '../../packages/sync/src/client-store-reader.ts';
import { applyRecordLines, readRecords, readSyncState } from '../../packages/sync/src/mirror/mirror.repository.ts';

const products = SYNC_RESOURCES.find((r) => r.name === 'products')!;

describe.each(backends)('initial sync lines (%s)', (backend) => {
  let t: TestApp;
  let baseUrl: string;
  let token: string;
  const closers: { close(): Promise<void> }[] = [];

  const freshMirror = () => freshMirrorOf(backend, closers);

  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    token = (await t.auth()).authorization.slice('Bearer '.length);
    // Names with what COPY's text format would take for its own: backslashes (JSON's escapes), tabs.
    for (const name of ['back\\slash', 'tab\there', 'quote "q" and \\n', 'plain é ✓']) await aProduct(t.database.db, { name });
    for (let i = 0; i < 20; i++) await aProduct(t.database.db);
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c.close();
    await t?.close();
  });

  const line = (id: string, name: string, micros: number) => JSON.stringify({ id, name, last_modified: `2026-02-01T00:00:00.00000${micros}Z` });
  const stored = async (mirror: MirrorDatabase) => {
    const all: Record<string, unknown>[] = [];
    for await (const record of readRecords(mirror.db, products)) all.push(record);
    return all;
  };

  it('stores each line as its JSON says, escapes and raw tabs included, with the cursor in the same transaction', async () => {
    const mirror = await freshMirror();
    const names = ['a\\b', 'tab\tinside', 'newline\nescaped', 'quote"s', 'ünïcödé ✓', '\\\\N', '\\.'];
    const lines = names.map((name, i) => line(`id-${i}`, name, i));
    // JSON allows a raw tab between tokens: it is whitespace there, not a column separator.
    lines.push(`{"id":"id-tabs",\t"name":"spaced",\t"last_modified":"2026-02-01T00:00:00.000009Z"}`);
    await applyRecordLines(mirror, products, lines, { cursor: 'after-8', records: lines.length, done: false });
    expect(await stored(mirror)).toEqual(lines.map((l) => JSON.parse(l)).sort((a, b) => (a.id < b.id ? -1 : 1)));
    expect(await readSyncState(mirror.db, 'products')).toMatchObject({ export_cursor: 'after-8', initial_records: lines.length, initial_done: false });
  });

  it('keeps the newest of one key within a batch in whatever order, and never overwrites a newer stored record', async () => {
    const mirror = await freshMirror();
    await applyRecordLines(mirror, products, [line('k', 'v2', 2), line('k', 'v1', 1), line('k', 'v3', 3)], { cursor: 'c1', records: 3, done: false });
    expect((await stored(mirror)).map((r) => r.name)).toEqual(['v3']);
    await applyRecordLines(mirror, products, [line('k', 'v4', 4), line('k', 'v2', 2)], { cursor: 'c2', records: 2, done: false });
    expect((await stored(mirror)).map((r) => r.name)).toEqual(['v4']);
    await applyRecordLines(mirror, products, [line('k', 'v1', 1)], { cursor: 'c3', records: 1, done: false });
    expect((await stored(mirror)).map((r) => r.name)).toEqual(['v4']);
    // New keys first, then a stored one (newer) and a repeat (older): written once each, newest kept.
    await applyRecordLines(mirror, products, [line('m', 'm1', 1), line('n', 'n1', 1), line('k', 'v5', 5), line('m', 'm0', 0)], {
      cursor: 'c4',
      records: 4,
      done: false,
    });
    expect((await stored(mirror)).map((r) => `${r.id}:${r.name}`)).toEqual(['k:v5', 'm:m1', 'n:n1']);
    expect(await readSyncState(mirror.db, 'products')).toMatchObject({ export_cursor: 'c4', initial_records: 10 });
  });

  it('a batch that fails leaves neither its rows nor its cursor, and the next batch goes through', async () => {
    const mirror = await freshMirror();
    await applyRecordLines(mirror, products, [line('a', 'first', 1)], { cursor: 'c1', records: 1, done: false });
    await expect(applyRecordLines(mirror, products, [line('b', 'second', 2), '{"id":"broken",'], { cursor: 'c2', records: 2, done: false })).rejects.toThrow();
    expect((await stored(mirror)).map((r) => r.id)).toEqual(['a']);
    expect(await readSyncState(mirror.db, 'products')).toMatchObject({ export_cursor: 'c1', initial_records: 1 });
    await applyRecordLines(mirror, products, [line('b', 'second', 2)], { cursor: 'c2', records: 1, done: false });
    expect((await stored(mirror)).map((r) => r.id)).toEqual(['a', 'b']);
  });

  it('init mirrors the store exactly, and a snapshot cut off mid-line resumes after the last line taken', async () => {
    const mirror = await freshMirror();
    const snapshots: string[] = [];
    const encodings = new Set<string | null>();
    let retries = 0;
    // The first snapshot answer breaks off in the middle of its fifth line.
    const cutting: typeof fetch = async (input, init) => {
      const url = new URL(String(input instanceof Request ? input.url : input));
      encodings.add(new Headers(init?.headers).get('accept-encoding'));
      const response = await fetch(input, init);
      if (!url.pathname.endsWith('/products/snapshot')) return response;
      snapshots.push(url.search);
      if (snapshots.length > 1) return response;
      const text = await response.text();
      const cut = text.split('\n').slice(0, 4).join('\n').length + 1 + 20;
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pulls++ === 0) controller.enqueue(new TextEncoder().encode(text.slice(0, cut)));
          else controller.error(new TypeError('terminated'));
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    const reader = clientStoreReader({ baseUrl, token, fetch: cutting, onRetry: () => retries++ });
    const totals = await initialSync(mirror, reader, [products], { batchSize: 3 });
    expect(retries).toBe(1);
    expect(snapshots).toHaveLength(2);
    expect(new URLSearchParams(snapshots[1]).get('cursor')).toMatch(/_[0-9a-f-]{36}$/);
    const all = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM products`.execute(t.database.db)).rows[0]!.n;
    expect(totals.get('products')).toBe(all);
    expect(mirrorMatches(await verifyMirror(mirror, reader, [products]))).toBe(true);
    // The service is on this machine: its answers come uncompressed.
    expect([...encodings]).toEqual(['identity']);
  });
});

describe('isLoopback', () => {
  it('is true for this machine only', () => {
    for (const host of ['localhost', '127.0.0.1', '127.1.2.3', '[::1]']) expect(isLoopback(host)).toBe(true);
    for (const host of ['store.example.com', '10.0.0.1', '128.0.0.1', '127.example.com', '[::2]']) expect(isLoopback(host)).toBe(false);
  });
});
