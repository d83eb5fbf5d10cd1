/**
 * The client's SDK manners: a hung service fails within timeoutMs with a typed `timeout` error and is
 * not retried blindly; an export that stalls fails after idleTimeoutMs; toArray() has a cap; the
 * admin API calls send an Idempotency-Key on every POST, so a POST whose answer was lost is retried
 * and writes once; error codes are a typed union of the service's problem codes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { StoreApiClient, type StoreApiErrorCode } from '../../packages/client/src/index.ts';
import { errorCodes } from '../../src/shared/problem.ts';
import { startClientTestServer, type ClientTestServer, failureOf } from './client-test-kit.ts';

// Compile-time: `code` is a union of the service's problem codes and the client's own.
const known: StoreApiErrorCode[] = ['unauthorized', 'idempotency_key_reused', 'timeout', 'network_error'];
// @ts-expect-error not a code the service or the client has
const unknownCode: StoreApiErrorCode = 'teapot';
void known;
void unknownCode;

describe('a hung service', () => {
  let hung: TcpServer;
  let stalling: Server;
  const sockets: Socket[] = [];
  let connections = 0;
  let hungUrl: string;
  let stallingUrl: string;

  beforeAll(async () => {
    // Accepts connections and never answers.
    hung = createTcpServer((socket) => {
      connections++;
      sockets.push(socket);
    });
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    hungUrl = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
    // Answers an export's headers and one record, then goes silent.
    stalling = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson', 'x-has-more': 'false', 'x-next-cursor': 'x' });
      res.write(`${JSON.stringify({ id: 'a', last_modified: '2026-01-01T00:00:00.000000Z' })}\n`);
    });
    await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
    stallingUrl = `http://127.0.0.1:${(stalling.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    stalling.closeAllConnections();
    await new Promise<void>((resolve) => hung.close(() => resolve()));
    await new Promise<void>((resolve) => stalling.close(() => resolve()));
  });

  it('fails a call with a typed timeout error naming the cause, without retrying it', async () => {
    let attempts = 0;
    const counting: typeof fetch = (input, init) => {
      attempts++;
      return fetch(input, init);
    };
    const client = new StoreApiClient({ baseUrl: hungUrl, token: 'sia_x', timeoutMs: 200, retryBaseDelayMs: 1, fetch: counting });
    const error = await failureOf(client.products.list());
    expect(error.code).toBe('timeout');
    expect(error.message).toMatch(/No answer from the Store API at http:\/\/127\.0\.0\.1:\d+ within 200 ms \(timeoutMs\) on GET \/api\/v1\/products/);
    expect(attempts).toBe(1);
    expect(connections).toBeGreaterThan(0);
  });

  it('retries a timeout only as often as maxTimeoutRetries says', async () => {
    let attempts = 0;
    const counting: typeof fetch = (input, init) => {
      attempts++;
      return fetch(input, init);
    };
    const client = new StoreApiClient({
      baseUrl: hungUrl,
      token: 'sia_x',
      timeoutMs: 100,
      maxTimeoutRetries: 2,
      retryBaseDelayMs: 1,
      retryMaxDelayMs: 2,
      fetch: counting,
    });
    expect((await failureOf(client.customers.list())).code).toBe('timeout');
    expect(attempts).toBe(3);
  });

  it('defaults: 30 s per answer, 60 s of export silence, timeouts not retried', () => {
    const client = new StoreApiClient({ baseUrl: hungUrl, token: 'sia_x' });
    expect(client.timeouts).toEqual({ timeoutMs: 30_000, idleTimeoutMs: 60_000 });
    expect(client.retryPolicy.maxTimeoutRetries).toBe(0);
  });

  it('fails an export that stalls mid-stream after idleTimeoutMs, having yielded what came', async () => {
    const client = new StoreApiClient({ baseUrl: stallingUrl, token: 'sia_x', idleTimeoutMs: 200 });
    const seen: unknown[] = [];
    const error = await failureOf(
      (async () => {
        for await (const record of client.products.export()) seen.push(record);
      })(),
    );
    expect(error.code).toBe('timeout');
    expect(error.message).toMatch(/stopped sending the export for 200 ms \(idleTimeoutMs\)/);
    expect(seen).toHaveLength(1);
  });
});

describe.each(backends)('client SDK manners against the service (%s)', (backend) => {
  let server: ClientTestServer;
  let admin: StoreApiClient;
  beforeAll(async () => {
    server = await startClientTestServer(backend, { ...UNLIMITED, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    const { authorization } = await server.t.auth(['admin']);
    admin = server.client({ token: authorization.slice('Bearer '.length) });
    for (let i = 0; i < 5; i++) await aProduct(server.t.ctx.database.db);
  });
  afterAll(async () => server?.close());

  it('caps toArray(): past max records it fails typed instead of holding everything', async () => {
    const client = server.client();
    const error = await failureOf(client.products.iterate({ limit: 2 }).toArray({ max: 3 }));
    expect(error.code).toBe('too_many_records');
    expect(error.message).toMatch(/cap of 3 records/);
    expect(await client.products.iterate().toArray({ max: 5 })).toHaveLength(5);
  });

  it('a revoked token fails with a typed unauthorized error', async () => {
    const created = await admin.admin.tokens.create({ name: 'erp', scopes: ['products:read'] });
    expect(created.token).toMatch(/^sia_/);
    await admin.admin.tokens.revoke(created.id);
    const error = await failureOf(server.client({ token: created.token }).products.list());
    expect(error.code).toBe('unauthorized');
    expect(error.status).toBe(401);
    expect(error.message).toMatch(/rejected the token/);
  });

  it('every admin POST carries an Idempotency-Key; one whose answer was lost is retried and writes once', async () => {
    const sent: { method: string; url: string; key: string | null }[] = [];
    let dropped = false;
    const lossy: typeof fetch = async (input, init) => {
      const headers = new Headers(init?.headers);
      sent.push({ method: init?.method ?? 'GET', url: String(input), key: headers.get('idempotency-key') });
      const response = await fetch(input, init);
      if (init?.method === 'POST' && !dropped) {
        // The service wrote and answered; the answer is lost on the way back.
        dropped = true;
        await response.arrayBuffer();
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
      }
      return response;
    };
    const { authorization } = await server.t.auth(['admin']);
    const client = server.client({ token: authorization.slice('Bearer '.length), fetch: lossy });
    const tokens = async () =>
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM api_tokens WHERE name = 'pos-retry'`.execute(server.t.ctx.database.db)).rows[0]!.n;
    const created = await client.admin.tokens.create({ name: 'pos-retry', scopes: ['orders:read'] });
    expect(created.name).toBe('pos-retry');
    expect(await tokens()).toBe(1);
    const posts = sent.filter((s) => s.method === 'POST');
    expect(posts).toHaveLength(2);
    expect(posts[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(posts[1]!.key).toBe(posts[0]!.key);
    // A new call gets a new key; a caller's own key is sent as given.
    await client.admin.tokens.create({ name: 'pos-retry-2' }, { idempotencyKey: 'my-key-1' });
    const last = sent.filter((s) => s.method === 'POST').at(-1)!;
    expect(last.key).toBe('my-key-1');
    // GETs carry none.
    await client.admin.tokens.list();
    expect(sent.at(-1)).toMatchObject({ method: 'GET', key: null });
  });

  it('webhook endpoints, pings, deliveries, retries and replays through client.admin', async () => {
    const endpoint = await admin.admin.webhookEndpoints.create({ url: 'http://127.0.0.1:9/hooks', event_types: ['product.updated'] });
    expect(endpoint.secret).toMatch(/^whsec_/);
    expect((await admin.admin.webhookEndpoints.list()).map((e) => e.id)).toContain(endpoint.id);
    expect((await admin.admin.webhookEndpoints.update(endpoint.id, { description: 'ERP' })).description).toBe('ERP');
    const ping = await admin.admin.webhookEndpoints.ping(endpoint.id);
    const delivery = await admin.admin.deliveries.get(ping.delivery_id);
    expect(delivery.endpoint_id).toBe(endpoint.id);
    const listed = [];
    for await (const d of admin.admin.deliveries.iterate({ endpoint_id: endpoint.id, limit: 1 })) listed.push(d.id);
    expect(listed).toContain(ping.delivery_id);
    const rotated = await admin.admin.webhookEndpoints.rotateSecret(endpoint.id);
    expect(rotated.secret).not.toBe(endpoint.secret);
    const replay = await admin.admin.webhookEndpoints.replay(endpoint.id, { from: '2020-01-01T00:00:00Z', to: new Date(Date.now() + 60_000).toISOString() });
    expect(replay.queued).toBeGreaterThanOrEqual(0);
    // A pending delivery cannot be retried: a typed 409.
    const error = await failureOf(admin.admin.deliveries.retry(ping.delivery_id));
    expect(error.code).toBe('conflict');
    expect((await admin.admin.deliveries.retryMany({ delivery_ids: [ping.delivery_id] })).retried).toBeGreaterThanOrEqual(0);
  });

  it("the error-code union covers the service's registry exactly", async () => {
    const document = (await server.t.app.inject({ url: '/api/v1/openapi.json' })).json();
    expect([...document.components.schemas.Problem.properties.code.enum].sort()).toEqual(Object.keys(errorCodes).sort());
  });
});
