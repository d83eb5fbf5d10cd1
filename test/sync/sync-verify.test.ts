/**
 * `store-api-sync verify` by the server's checksums (decision 0038): a matching mirror costs one
 * /checksums request per resource and no export or snapshot; a missing, an extra and a changed
 * record in one range are each named; many differing ranges are compared as one; a record the
 * webhooks wrote (its JSON re-serialised, `12.5` for the service's `12.50`) still matches; against
 * a server without checksums verify walks the export as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { freshMirror as freshMirrorOf } from './mirror-fixture.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';
import { clientStoreReader, initialSync, mirrorMatches, verifyMirror, SYNC_RESOURCES, type MirrorDatabase } from '../../packages/sync/src/index.ts';
import { DRILL_RANGES_MAX } from '../../packages/sync/src/verify.ts';
import type { StoreReader } from '../../packages/sync/src/store-reader.ts';

const products = SYNC_RESOURCES.find((r) => r.name === 'products')!;

describe.each(backends)('store-api-sync verify by checksums (%s)', (backend) => {
  let t: TestApp;
  let baseUrl: string;
  let token: string;
  const closers: { close(): Promise<void> }[] = [];
  const ids: string[] = [];

  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    token = (await t.auth()).authorization.slice('Bearer '.length);
    for (let i = 0; i < 8; i++) ids.push((await aProductWithVariants(t.database.db, [3, 4])).id);
    for (let i = 0; i < 40; i++) ids.push((await aProduct(t.database.db, { price: 12.5 })).id);
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c.close();
    await t?.close();
  });

  /** A reader whose requests' paths are recorded. */
  const countingReader = () => {
    const paths: string[] = [];
    const reader = clientStoreReader({
      baseUrl,
      token,
      fetch: (input, init) => {
        paths.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
        return fetch(input, init);
      },
    });
    return { reader, paths };
  };

  const syncedMirror = async (): Promise<MirrorDatabase> => {
    const mirror = await freshMirrorOf(backend, closers);
    await initialSync(mirror, clientStoreReader({ baseUrl, token }), SYNC_RESOURCES);
    return mirror;
  };

  it('a matching mirror: one /checksums request per resource, no export, snapshot or record checksums', async () => {
    const mirror = await syncedMirror();
    const { reader, paths } = countingReader();
    const results = await verifyMirror(mirror, reader, SYNC_RESOURCES);
    expect(mirrorMatches(results)).toBe(true);
    expect(results.find((r) => r.resource === 'products')).toMatchObject({ apiCount: 48, mirrorCount: 48 });
    expect(paths.sort()).toEqual(SYNC_RESOURCES.map((r) => `/api/v1/${r.path}/checksums`).sort());
  });

  it('names a missing, an extra and a changed record of one range, reading only that range', async () => {
    const mirror = await syncedMirror();
    // Three products of one range (the ids' first two hex digits): pick a range holding two, add one.
    const [gone, changed] = [ids[0]!, ids[1]!];
    const extra = `${gone.slice(0, 2)}${randomUUID().slice(2)}`;
    await sql`DELETE FROM store_mirror.products WHERE id = ${gone}`.execute(mirror.db);
    // Changed behind the mirror's back: a field, not last_modified (newest-wins would never write it).
    await sql`UPDATE store_mirror.products SET record = jsonb_set(record, '{name}', '"tampered"') WHERE id = ${changed}`.execute(mirror.db);
    await sql`INSERT INTO store_mirror.products (id, last_modified, record)
      SELECT ${extra}, last_modified, jsonb_set(record, '{id}', to_jsonb(${extra}::text)) FROM store_mirror.products WHERE id = ${ids[2]!}`.execute(mirror.db);

    const { reader, paths } = countingReader();
    const results = await verifyMirror(mirror, reader, SYNC_RESOURCES);
    const p = results.find((r) => r.resource === 'products')!;
    expect(p).toMatchObject({ missing: [gone], extra: [extra], different: [changed], apiCount: 48, mirrorCount: 48 });
    expect(p.apiChecksum).not.toBe(p.mirrorChecksum);
    for (const other of results.filter((r) => r.resource !== 'products')) expect(other.missing.length + other.extra.length + other.different.length).toBe(0);
    const drilled = paths.filter((path) => path.endsWith('/checksums/records'));
    const ranges = new Set([gone, changed, extra].map((id) => id.slice(0, 2)));
    expect(drilled).toHaveLength(ranges.size);
    expect(paths.some((path) => path.endsWith('/export') || path.endsWith('/snapshot'))).toBe(false);
  });

  it(`more than ${DRILL_RANGES_MAX} differing ranges: the whole resource is compared, every difference named`, async () => {
    const mirror = await syncedMirror();
    await sql`DELETE FROM store_mirror.products`.execute(mirror.db);
    const { reader, paths } = countingReader();
    const p = (await verifyMirror(mirror, reader, [products]))[0]!;
    expect(p.missing).toEqual([...ids].sort());
    expect(p).toMatchObject({ extra: [], different: [], mirrorCount: 0 });
    expect(paths.filter((path) => path.endsWith('/checksums/records'))).toHaveLength(1);
  });

  it('a record the webhooks wrote (re-serialised: 12.5 for 12.50) matches the service', async () => {
    const mirror = await syncedMirror();
    const id = ids[20]!;
    const { rows } = await sql<{ record: Record<string, unknown> }>`SELECT record FROM store_mirror.products WHERE id = ${id}`.execute(mirror.db);
    await sql`UPDATE store_mirror.products SET record = ${JSON.stringify(rows[0]!.record)}::jsonb WHERE id = ${id}`.execute(mirror.db);
    const { rows: service } = await sql<{ doc: string }>`SELECT doc::text AS doc FROM products WHERE id = ${id}::uuid`.execute(t.database.db);
    expect(service[0]!.doc).toContain('"price":12.50');
    const { rows: mirrored } = await sql<{ price: string }>`SELECT record->>'price' AS price FROM store_mirror.products WHERE id = ${id}`.execute(mirror.db);
    expect(mirrored[0]!.price).toBe('12.5');
    expect(mirrorMatches(await verifyMirror(mirror, clientStoreReader({ baseUrl, token }), [products]))).toBe(true);
  });

  it('against a server without checksums it compares the exported records, with the same findings', async () => {
    const mirror = await syncedMirror();
    await sql`UPDATE store_mirror.products SET record = jsonb_set(record, '{name}', '"tampered"') WHERE id = ${ids[3]!}`.execute(mirror.db);
    const full = clientStoreReader({ baseUrl, token });
    const old: StoreReader = { listPage: full.listPage, exportRecords: full.exportRecords };
    const p = (await verifyMirror(mirror, old, [products]))[0]!;
    expect(p).toMatchObject({ missing: [], extra: [], different: [ids[3]!], apiCount: 48 });
  });
});
