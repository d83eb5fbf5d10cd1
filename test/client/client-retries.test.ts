/**
 * The client's retry policy against a real server: a 429 waits the Retry-After the rate limiter sent
 * (tiny limit through configuration), a 5xx or a dropped connection is retried with backoff up to
 * maxRetries (a fault proxy in front of the server fails the first requests), an export cut in the
 * middle of its body resumes from the last record consumed, and 4xx are never retried.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { StoreApiClient, StoreApiError, type RetryInfo } from '../../packages/client/src/index.ts';
import { startClientTestServer, type ClientTestServer } from './client-test-kit.ts';
import { FaultProxy, forward, type Fault } from './fault-proxy.ts';

describe.each(backends)('client retries (%s)', (backend) => {
  let server: ClientTestServer;
  let proxy: FaultProxy;
  let productIds: string[];
  const retries: RetryInfo[] = [];
  const viaProxy = (maxRetries = 3) =>
    new StoreApiClient({
      baseUrl: proxy.url,
      token: server.token,
      maxRetries,
      retryBaseDelayMs: 5,
      retryMaxDelayMs: 20,
      onRetry: (r) => retries.push(r),
    });

  beforeAll(async () => {
    server = await startClientTestServer(backend, UNLIMITED);
    await generateDemoStore(server.t.ctx.database.db, { products: 300, customers: 10, orders: 10, batchSize: 300 });
    productIds = (await sql<{ id: string }>`SELECT id::text AS id FROM products WHERE is_active`.execute(server.t.ctx.database.db)).rows
      .map((r) => r.id)
      .sort();
    proxy = await new FaultProxy(server.baseUrl).start();
  }, 300_000);
  afterEach(() => {
    retries.length = 0;
    proxy.log.length = 0;
    proxy.fault = () => forward;
  });
  afterAll(async () => {
    await proxy?.close();
    await server?.close();
  });

  const problem503: Fault = {
    kind: 'status',
    status: 503,
    contentType: 'application/problem+json',
    body: JSON.stringify({
      type: 'about:blank',
      title: 'Service Unavailable',
      status: 503,
      detail: 'The database is not reachable.',
      code: 'service_unavailable',
    }),
  };

  it('retries a 5xx with backoff until the service answers', async () => {
    proxy.fault = (_req, n) => (n <= 2 ? problem503 : forward);
    const page = await viaProxy().listProducts({ limit: 3 });
    expect(page.data).toHaveLength(3);
    expect(proxy.log.map((r) => r.fault)).toEqual(['status', 'status', 'forward']);
    expect(retries.map((r) => [r.attempt, r.status, r.error.code])).toEqual([
      [1, 503, 'service_unavailable'],
      [2, 503, 'service_unavailable'],
    ]);
  });

  it('gives up after maxRetries with the last error, typed, in one line', async () => {
    proxy.fault = () => ({ kind: 'status', status: 502 });
    const error = (await viaProxy(2)
      .getProduct(productIds[0]!)
      .catch((e: unknown) => e)) as StoreApiError;
    expect(error).toBeInstanceOf(StoreApiError);
    expect(proxy.log).toHaveLength(3);
    expect(error.status).toBe(502);
    expect(error.code).toBe('server_error');
    expect(error.message).toMatch(/failed: HTTP 502/);
    expect(error.message).not.toContain('\n');
  });

  it('retries a connection dropped before any answer', async () => {
    proxy.fault = (_req, n) => (n <= 2 ? { kind: 'drop' } : forward);
    const product = await viaProxy().getProduct(productIds[5]!);
    expect(product.id).toBe(productIds[5]);
    expect(retries).toHaveLength(2);
    expect(retries.every((r) => r.status === undefined && r.error.code === 'network_error')).toBe(true);
  });

  it('does not retry a 4xx', async () => {
    proxy.fault = () => ({
      kind: 'status',
      status: 400,
      contentType: 'application/problem+json',
      body: JSON.stringify({
        type: 'about:blank',
        title: 'Invalid Parameter',
        status: 400,
        detail: 'limit must be ≤ 200',
        code: 'invalid_parameter',
        errors: [{ param: 'limit', message: 'must be ≤ 200' }],
      }),
    });
    const error = (await viaProxy()
      .listProducts()
      .catch((e: unknown) => e)) as StoreApiError;
    expect(error.status).toBe(400);
    expect(error.errors).toEqual([{ param: 'limit', message: 'must be ≤ 200' }]);
    expect(proxy.log).toHaveLength(1);
    expect(retries).toHaveLength(0);
  });

  it('resumes an export cut in the middle of its body from the last record consumed: every record exactly once', async () => {
    // Every first attempt of an export request is cut after 40 kB (a few dozen products in).
    const seenUrls = new Set<string>();
    proxy.fault = (req) => {
      if (!req.url?.includes('/export') || seenUrls.has(req.url)) return forward;
      seenUrls.add(req.url);
      return { kind: 'cut', afterBytes: 40_000 };
    };
    const client = new StoreApiClient({
      baseUrl: proxy.url,
      token: server.token,
      maxRetries: 3,
      onRetry: (r) => retries.push(r),
      fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), 'accept-encoding': 'identity' } }),
    });
    // Pages of 100 products (~100 kB), each cut at 40 kB on its first attempt.
    const iterator = client.products.export({ limit: 100 });
    const seen: string[] = [];
    for await (const product of iterator) seen.push(product.id);
    expect(seen).toHaveLength(productIds.length);
    expect([...seen].sort()).toEqual(productIds);
    // Each resume asks from a new cursor, which the proxy cuts again: many resumes, none lost.
    expect(retries.length).toBeGreaterThanOrEqual(3);
    expect(retries.length).toBeLessThanOrEqual(proxy.log.filter((r) => r.fault === 'cut').length);
    expect(retries.every((r) => r.error.code === 'network_error')).toBe(true);
  });

  it('fails an export that breaks off before any record maxRetries + 1 times in a row', async () => {
    proxy.fault = (req) => (req.url?.includes('/export') ? { kind: 'cut', afterBytes: 100 } : forward);
    const client = new StoreApiClient({
      baseUrl: proxy.url,
      token: server.token,
      maxRetries: 1,
      fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), 'accept-encoding': 'identity' } }),
    });
    const iterator = client.products.export();
    let consumed = 0;
    const error = (await (async () => {
      for await (const _ of iterator) consumed++;
    })().catch((e: unknown) => e)) as StoreApiError;
    expect(error).toBeInstanceOf(StoreApiError);
    expect(error.code).toBe('network_error');
    expect(error.message).toMatch(/^(Lost the connection to the Store API|The export of products .* broke off)/);
    expect(consumed).toBe(0);
    expect(iterator.cursor).toBeNull();
    expect(proxy.log.filter((r) => r.fault === 'cut')).toHaveLength(2);
  });
});

describe.each(backends)('client and the rate limit (%s)', (backend) => {
  let server: ClientTestServer;

  beforeAll(async () => {
    server = await startClientTestServer(backend, { RATE_LIMIT_STANDARD: '3', RATE_LIMIT_WINDOW_MS: '1000' });
    await generateDemoStore(server.t.ctx.database.db, { products: 8, customers: 2, orders: 2 });
  }, 300_000);
  afterAll(async () => server?.close());

  it('waits the Retry-After of a 429 and carries on: the walk completes, each record once', async () => {
    const retries: RetryInfo[] = [];
    const client = server.client({ onRetry: (r) => retries.push(r) });
    const seen = await client.products.iterate({ limit: 1, include_inactive: true }).toArray();
    const count = await sql<{ n: number }>`SELECT count(*)::int AS n FROM products`.execute(server.t.ctx.database.db);
    expect(seen.map((p) => p.id).sort()).toEqual([...new Set(seen.map((p) => p.id))].sort());
    expect(seen).toHaveLength(count.rows[0]!.n);
    const limited = retries.filter((r) => r.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    for (const r of limited) {
      expect(r.error.code).toBe('rate_limited');
      // The wait is the server's Retry-After (whole seconds), not the 10 ms backoff of this client.
      expect(r.delayMs % 1000).toBe(0);
      expect(r.delayMs).toBeGreaterThanOrEqual(1000);
    }
  });

  it('with no retries left, or a Retry-After longer than allowed, a 429 is a typed error', async () => {
    const strict = server.client({ maxRetries: 0 });
    const impatient = server.client({ maxRetryAfterMs: 10 });
    let error: unknown;
    for (let i = 0; i < 10 && !error; i++)
      error = await strict.listProducts({ limit: 1 }).then(
        () => undefined,
        (e: unknown) => e,
      );
    expect((error as StoreApiError).status).toBe(429);
    expect((error as StoreApiError).code).toBe('rate_limited');
    const second = (await impatient.listProducts({ limit: 1 }).catch((e: unknown) => e)) as StoreApiError;
    expect(second.status).toBe(429);
  });
});
