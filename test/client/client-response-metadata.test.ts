/**
 * Every answer's metadata reaches the caller, as Stripe's SDK gives it (`lastResponse`): status,
 * the request id, the key's rate-limit budget, ETag, Retry-After, attempts and the raw headers, on
 * what each call returns (non-enumerable: the record's JSON is unchanged), on iterators per page, and
 * on a StoreApiError. First what is read from headers (no I/O), then each kind of call against the
 * service on each back end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import type { PageProgress, StoreApiClient } from '../../packages/client/src/index.ts';
import { responseMetadata, withResponse } from '../../packages/client/src/response-metadata.ts';
import { startClientTestServer, type ClientTestServer, failureOf } from './client-test-kit.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('the metadata read from an answer', () => {
  it('parses the rate-limit budget and its class, Retry-After (seconds or a date), the validators and every header', () => {
    const now = Date.now();
    const response = new Response(null, {
      status: 429,
      headers: {
        'X-Request-Id': 'req-1',
        'X-RateLimit-Limit': '60',
        'X-RateLimit-Remaining': '0',
        'X-RateLimit-Reset': '1767225600',
        'RateLimit-Policy': '"export";q=60;w=60',
        'Retry-After': '42',
        ETag: '"abc"',
        'Last-Modified': 'Wed, 21 Oct 2026 07:28:00 GMT',
      },
    });
    const metadata = responseMetadata(response, 'GET /api/v1/products/export', { attempts: 3 });
    expect(metadata).toMatchObject({
      status: 429,
      request: 'GET /api/v1/products/export',
      requestId: 'req-1',
      rateLimit: { limit: 60, remaining: 0, reset: 1767225600, policy: 'export' },
      retryAfterMs: 42_000,
      etag: '"abc"',
      lastModified: 'Wed, 21 Oct 2026 07:28:00 GMT',
      idempotencyKey: undefined,
      attempts: 3,
    });
    expect(metadata.headers['x-ratelimit-remaining']).toBe('0');
    expect(Object.isFrozen(metadata)).toBe(true);
    const dated = responseMetadata(new Response(null, { status: 503, headers: { 'Retry-After': new Date(now + 90_000).toUTCString() } }), 'GET /');
    expect(dated.retryAfterMs).toBeGreaterThan(80_000);
    expect(dated.retryAfterMs).toBeLessThanOrEqual(90_000);
    // No budget where none is counted, or only half of one.
    expect(dated.rateLimit).toBeUndefined();
    expect(responseMetadata(new Response(null, { headers: { 'X-RateLimit-Limit': '60' } }), 'GET /').rateLimit).toBeUndefined();
  });

  it('rides on the value without changing its JSON, keys, spread or deep equality', () => {
    const metadata = responseMetadata(new Response(null, { headers: { 'x-request-id': 'r' } }), 'GET /');
    const record = withResponse({ id: 'a', name: 'Kettle' }, metadata);
    expect(record.lastResponse).toBe(metadata);
    expect(JSON.stringify(record)).toBe('{"id":"a","name":"Kettle"}');
    expect(Object.keys(record)).toEqual(['id', 'name']);
    expect({ ...record }).not.toHaveProperty('lastResponse');
    expect(record).toEqual({ id: 'a', name: 'Kettle' });
    const list = withResponse([1, 2], metadata);
    expect(JSON.stringify(list)).toBe('[1,2]');
    expect(list.lastResponse.requestId).toBe('r');
  });
});

describe.each(backends)('response metadata against the service (%s)', (backend) => {
  let server: ClientTestServer;
  let admin: StoreApiClient;
  let productId: string;

  beforeAll(async () => {
    server = await startClientTestServer(backend, { RATE_LIMIT_STANDARD: '1000', RATE_LIMIT_EXPORT: '1000' });
    admin = server.client({ token: (await server.t.auth(['admin'])).authorization.slice('Bearer '.length) });
    for (let i = 0; i < 5; i++) productId = (await aProduct(server.t.ctx.database.db)).id;
  });
  afterAll(async () => server?.close());

  it('a list page: status, request id, the standard budget counting down; its JSON unchanged', async () => {
    const client = server.client();
    const page = await client.products.list({ limit: 2 });
    const metadata = page.lastResponse;
    expect(metadata).toMatchObject({ status: 200, request: 'GET /api/v1/products?limit=2', attempts: 1, idempotencyKey: undefined });
    expect(metadata.requestId).toMatch(UUID);
    expect(metadata.requestId).toBe(metadata.headers['x-request-id']);
    expect(metadata.rateLimit).toMatchObject({ limit: 1000, policy: 'standard' });
    expect(metadata.rateLimit!.reset).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
    expect(Object.keys(page)).toEqual(['data', 'pagination']);
    expect(JSON.parse(JSON.stringify(page))).toEqual({ data: page.data, pagination: page.pagination });
    const next = await client.listProducts({ limit: 2 });
    expect(next.lastResponse.rateLimit!.remaining).toBe(metadata.rateLimit!.remaining - 1);
    expect(next.lastResponse.requestId).not.toBe(metadata.requestId);
  });

  it('a single record: its ETag, and the record itself without a lastResponse key', async () => {
    const product = await server.client().products.get(productId);
    expect(product.lastResponse.etag).toMatch(/^"[^"]+"$/);
    expect(product.lastResponse.status).toBe(200);
    expect(Object.keys(product)).not.toContain('lastResponse');
    expect(JSON.stringify(product)).not.toContain('lastResponse');
  });

  it('iterate(): each page and the iterator carry the metadata of the request that fetched it', async () => {
    const progress: PageProgress[] = [];
    const walk = server.client().products.iterate({ limit: 2 }, { onPage: (p) => void progress.push(p) });
    expect(walk.lastResponse).toBeNull();
    await walk.toArray();
    expect(progress).toHaveLength(3);
    const ids = progress.map((p) => p.lastResponse.requestId);
    expect(new Set(ids).size).toBe(3);
    expect(walk.lastResponse).toBe(progress.at(-1)!.lastResponse);
    expect(walk.lastResponse!.request).toMatch(/^GET \/api\/v1\/products\?limit=2&cursor=/);
  });

  it('export() and snapshot(): the export budget, and the stream headers among the raw headers', async () => {
    const client = server.client();
    const exported = client.products.export({ limit: 3 });
    await exported.toArray();
    expect(exported.lastResponse).toMatchObject({ status: 200, rateLimit: { limit: 1000, policy: 'export' } });
    expect(exported.lastResponse!.headers['x-has-more']).toBe('false');
    const snapshot = client.products.snapshot();
    await snapshot.toArray();
    expect(snapshot.lastResponse!.headers['x-snapshot-cursor']).toBe(snapshot.cursor);
    expect(snapshot.lastResponse!.requestId).toMatch(UUID);
  });

  it('checksums, record checksums and attributes carry it too', async () => {
    const client = server.client();
    expect((await client.products.checksums({ digits: 1 })).lastResponse.status).toBe(200);
    const records = client.products.recordChecksums({ limit: 2 });
    expect(records.lastResponse).toBeNull();
    let count = 0;
    for await (const _ of records) count++;
    expect(count).toBe(5);
    expect(records.lastResponse!.request).toMatch(/^GET \/api\/v1\/products\/checksums\/records/);
    expect((await client.listAttributes()).lastResponse.status).toBe(200);
    const attributes = client.iterateAttributes();
    await attributes.toArray();
    expect(attributes.lastResponse!.status).toBe(200);
  });

  it('an admin write: the Idempotency-Key it was sent with; a GET has none', async () => {
    const created = await admin.admin.tokens.create({ name: 'meta' }, { idempotencyKey: 'meta-key-1' });
    expect(created.lastResponse).toMatchObject({ status: 201, idempotencyKey: 'meta-key-1', request: 'POST /admin/api/v1/tokens' });
    const listed = await admin.admin.tokens.list();
    expect(listed.lastResponse.idempotencyKey).toBeUndefined();
    expect(listed.lastResponse.requestId).toMatch(UUID);
  });

  it("a StoreApiError carries the failed answer's metadata: a 404, and a 429 with Retry-After and the spent budget", async () => {
    const missing = await failureOf(server.client().products.get('00000000-0000-4000-8000-000000000000'));
    expect(missing.lastResponse).toMatchObject({ status: 404, requestId: missing.requestId });
    expect(missing.lastResponse!.headers['content-type']).toMatch(/problem\+json/);
    const limited = await admin.admin.tokens.create({ name: 'tight', scopes: ['products:read'], rate_limit_standard: 1 });
    const client = server.client({ token: limited.token, maxRetries: 0 });
    expect((await client.products.list()).lastResponse.rateLimit).toMatchObject({ limit: 1, remaining: 0 });
    const refused = await failureOf(client.products.list());
    expect(refused.code).toBe('rate_limited');
    expect(refused.lastResponse).toMatchObject({ status: 429, rateLimit: { limit: 1, remaining: 0 } });
    expect(refused.lastResponse!.retryAfterMs).toBeGreaterThan(0);
    // No answer, no metadata.
    const unreachable = await failureOf(server.client({ baseUrl: 'http://127.0.0.1:9', maxRetries: 0 }).products.list());
    expect(unreachable.lastResponse).toBeUndefined();
  });

  it('attempts counts the retries it took: an answer lost once is fetched again', async () => {
    let lost = false;
    const lossy: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (!lost) {
        lost = true;
        await response.arrayBuffer();
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
      }
      return response;
    };
    const page = await server.client({ fetch: lossy }).products.list({ limit: 1 });
    expect(page.lastResponse.attempts).toBe(2);
  });
});
