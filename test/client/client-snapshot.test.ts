/**
 * The client's snapshot() and the sync tool's reader on it: the whole resource from one request,
 * the end cursor kept, and the paged exports used against a server without snapshots.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { startClientTestServer, type ClientTestServer } from './client-test-kit.ts';
import { clientStoreReader, SYNC_RESOURCES } from '../../packages/sync/src/index.ts';

const PRODUCTS = 1200;

describe.each(backends)('client snapshot (%s)', (backend) => {
  let s: ClientTestServer;
  beforeAll(async () => {
    s = await startClientTestServer(backend, { RATE_LIMIT_EXPORT: '1000000' });
    await sql`
      INSERT INTO products (id, name, slug, product_type, price, own_stock, stock, is_active, created_at, last_modified)
      SELECT md5('p' || g)::uuid, 'Product ' || g, 'product-' || g, 'physical', 10, 5, 5, g % 10 <> 0,
             '2026-01-01T00:00:00Z'::timestamptz + (g / 3) * interval '1 second', '2026-01-01T00:00:00Z'::timestamptz + (g / 3) * interval '1 second'
      FROM generate_series(1, ${PRODUCTS}) g`.execute(s.t.database.db);
  }, 240_000);
  afterAll(async () => s?.close());

  it('reads every record in one request and ends on the server end cursor', async () => {
    const snapshot = s.client().products.snapshot({ include_inactive: true });
    expect(snapshot.total).toBeNull(); // nothing asked yet
    const records = await snapshot.toArray();
    expect(records.length).toBe(PRODUCTS);
    expect(snapshot.total).toBe(PRODUCTS); // the server's X-Total-Count
    expect(snapshot.pages).toBe(1);
    expect(snapshot.cursor).toMatch(/_00000000-0000-0000-0000-000000000000$/);
    const after = await s.client().products.list({ cursor: snapshot.cursor!, include_inactive: true });
    expect(after.data).toEqual([]);
    // The default filter is the export's: active products only.
    const active = s.client().products.snapshot();
    expect((await active.toArray()).length).toBe(PRODUCTS - PRODUCTS / 10);
    expect(active.total).toBe(PRODUCTS - PRODUCTS / 10); // counted under the same filters
  });

  it('the sync reader falls back to the paged exports when the server has no snapshot endpoint', async () => {
    const requests: string[] = [];
    const oldServer: typeof fetch = async (input, init) => {
      const url = new URL(String(input instanceof Request ? input.url : input));
      requests.push(url.pathname);
      if (url.pathname.endsWith('/snapshot')) {
        return new Response(JSON.stringify({ type: 'about:blank', title: 'Not Found', status: 404, detail: 'Route not found', code: 'not_found' }), {
          status: 404,
          headers: { 'content-type': 'application/problem+json' },
        });
      }
      return fetch(input, init);
    };
    const reader = clientStoreReader({ baseUrl: s.baseUrl, token: s.token, fetch: oldServer });
    const products = SYNC_RESOURCES.find((r) => r.name === 'products')!;
    const walk = reader.snapshotRecords!(products, null);
    let count = 0;
    for await (const _ of walk) count++;
    expect(count).toBe(PRODUCTS);
    expect(walk.endCursor()).toBeNull();
    expect(requests.filter((p) => p.endsWith('/products/export')).length).toBe(Math.ceil(PRODUCTS / 500));
    expect(requests.filter((p) => p.endsWith('/snapshot')).length).toBe(1);
  });

  it('the sync reader uses the snapshot against this server: one request, its end cursor', async () => {
    const requests: string[] = [];
    const counting: typeof fetch = async (input, init) => {
      requests.push(new URL(String(input instanceof Request ? input.url : input)).pathname);
      return fetch(input, init);
    };
    const reader = clientStoreReader({ baseUrl: s.baseUrl, token: s.token, fetch: counting });
    const walk = reader.snapshotRecords!(SYNC_RESOURCES.find((r) => r.name === 'products')!, null);
    let count = 0;
    for await (const _ of walk) count++;
    expect(count).toBe(PRODUCTS);
    expect(requests).toEqual(['/api/v1/products/snapshot']);
    expect(walk.endCursor()).toMatch(/_00000000-0000-0000-0000-000000000000$/);
  });
});
