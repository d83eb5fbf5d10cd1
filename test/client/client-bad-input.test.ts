/**
 * What an integrator sees when the setup is wrong: a wrong base URL (nothing listening, an unknown
 * host, something that is not the Store API), a revoked token, a token without the scope, a bad
 * option. Each is one clear line (error.message), never a stack of fetch internals.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { backends } from '../helpers/test-database.ts';
import { createToken, revokeToken } from '../../src/tokens/token.service.ts';
import { StoreApiClient, StoreApiError } from '../../packages/client/src/index.ts';
import { startClientTestServer, type ClientTestServer } from './client-test-kit.ts';

async function failureOf(promise: Promise<unknown>): Promise<StoreApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreApiError);
  const e = error as StoreApiError;
  expect(e.message.split('\n')).toHaveLength(1);
  return e;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('client options and unreachable services', () => {
  let html: Server;
  let htmlUrl: string;

  beforeAll(async () => {
    html = createServer((req, res) => {
      if (req.url?.includes('/inventory')) res.writeHead(200, { 'content-type': 'text/html' }).end('<html>welcome</html>');
      else if (req.url?.includes('/orders')) res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      else res.writeHead(404, { 'content-type': 'text/html' }).end('<html>not here</html>');
    });
    await new Promise<void>((resolve) => html.listen(0, '127.0.0.1', resolve));
    htmlUrl = `http://127.0.0.1:${(html.address() as AddressInfo).port}`;
  });
  afterAll(async () => new Promise<void>((resolve) => html.close(() => resolve())));

  it('rejects a base URL that is not an http(s) URL, and a missing token, at construction', () => {
    expect(() => new StoreApiClient({ baseUrl: '127.0.0.1:3000', token: 'sia_x' })).toThrow(/baseUrl must/);
    expect(() => new StoreApiClient({ baseUrl: 'ftp://host', token: 'sia_x' })).toThrow(/http or https/);
    expect(() => new StoreApiClient({ baseUrl: 'http://host', token: '' })).toThrow(/token is required/);
    expect(() => new StoreApiClient({ baseUrl: 'http://host', token: 'sia_x', maxRetries: -1 })).toThrow(/maxRetries/);
  });

  it('nothing listening: connection refused, after the retries, in one line naming the URL', async () => {
    const port = await freePort();
    let retries = 0;
    const client = new StoreApiClient({ baseUrl: `http://127.0.0.1:${port}`, token: 'sia_x', maxRetries: 2, retryBaseDelayMs: 5, onRetry: () => retries++ });
    const e = await failureOf(client.listProducts());
    expect(e.code).toBe('network_error');
    expect(e.status).toBeUndefined();
    expect(e.message).toBe(
      `Cannot reach the Store API at http://127.0.0.1:${port}: connection refused (ECONNREFUSED); check the base URL and that the service is running`,
    );
    expect(retries).toBe(2);
  });

  it('unknown host: not found, not retried', async () => {
    let retries = 0;
    const client = new StoreApiClient({ baseUrl: 'http://store-api.invalid:3000', token: 'sia_x', retryBaseDelayMs: 5, onRetry: () => retries++ });
    const e = await failureOf(client.getProduct('00000000-0000-4000-8000-000000000000'));
    expect(e.code).toBe('network_error');
    expect(e.message).toMatch(/^Cannot reach the Store API at http:\/\/store-api\.invalid:3000: host "store-api\.invalid" not found \((ENOTFOUND|EAI_AGAIN)\)/);
    expect(retries).toBe(0);
  });

  it('something else answering: "did not answer like the Store Integration API"', async () => {
    const client = new StoreApiClient({ baseUrl: htmlUrl, token: 'sia_x', maxRetries: 0 });
    const notFound = await failureOf(client.listProducts());
    expect(notFound.code).toBe('not_store_api');
    expect(notFound.message).toBe(`${htmlUrl} did not answer like the Store Integration API (HTTP 404, text/html on GET /api/v1/products); check the base URL`);
    const ok = await failureOf(client.listInventory());
    expect(ok.code).toBe('not_store_api');
    expect(ok.message).toMatch(/did not answer like the Store Integration API \(HTTP 200, text\/html/);
    const otherJson = await failureOf(client.listOrders());
    expect(otherJson.message).toBe(
      `${htmlUrl} did not answer like the Store Integration API (a list without data and pagination on GET /api/v1/orders); check the base URL`,
    );
    expect((await failureOf(client.getOrder('00000000-0000-4000-8000-000000000000'))).code).toBe('not_store_api');
    const exported = await failureOf(client.inventory.export().toArray());
    expect(exported.code).toBe('not_store_api');
  });
});

describe.each(backends)('client and tokens (%s)', (backend) => {
  let server: ClientTestServer;

  beforeAll(async () => {
    server = await startClientTestServer(backend);
  }, 120_000);
  afterAll(async () => server?.close());

  it('a revoked token: 401 in one line saying it was revoked, not retried', async () => {
    const db = server.t.ctx.database.db;
    const { token, summary } = await createToken(db, { name: 'erp', scopes: ['products:read'] });
    let retries = 0;
    const client = server.client({ token, onRetry: () => retries++ });
    expect((await client.listProducts()).data).toEqual([]);
    await revokeToken(db, summary.id);
    const e = await failureOf(client.listProducts());
    expect(e.status).toBe(401);
    expect(e.code).toBe('unauthorized');
    expect(e.message).toBe('The Store API rejected the token (401 unauthorized): The API token has been revoked.');
    expect(retries).toBe(0);
  });

  it('an unknown token and a token without the scope', async () => {
    // Well-formed but never issued: the real token with its last characters changed.
    const forged = server.token.slice(0, -4) + (server.token.endsWith('aaaa') ? 'bbbb' : 'aaaa');
    const unknown = await failureOf(server.client({ token: forged }).listOrders());
    expect(unknown.message).toBe('The Store API rejected the token (401 unauthorized): The API token is not valid.');
    const { token } = await createToken(server.t.ctx.database.db, { name: 'products only', scopes: ['products:read'] });
    const forbidden = await failureOf(server.client({ token }).listOrders());
    expect(forbidden.status).toBe(403);
    expect(forbidden.message).toMatch(/^The token lacks the scope for GET \/api\/v1\/orders \(403 forbidden\): /);
  });

  it('a base URL with a path prefix that serves nothing there', async () => {
    const e = await failureOf(server.client({ baseUrl: `${server.baseUrl}/store` }).listProducts());
    expect(e.status).toBe(404);
    expect(e.message).toMatch(/GET \/store\/api\/v1\/products/);
  });
});
