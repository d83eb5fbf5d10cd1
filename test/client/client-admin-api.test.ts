/**
 * client.admin covers the whole admin API an API key may call, checked from the OpenAPI document the
 * running service serves: every such operation is in the generated ADMIN_OPERATIONS with the
 * document's method and path, and a named method of client.admin sends it and gets its success
 * answer here, on each back end. The last test of each back end names every operation no method
 * reached. Operations only a dashboard session can call are left out by their declared security (no
 * bearerAuth), which is checked against the route table: exactly the routes whose `config.permission`
 * refuses every key (`owner`, `account`: decision 0026) declare no bearerAuth.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { collectRoutes, type RouteSpec } from '../helpers/hostile-requests.ts';
import { ADMIN_OPERATIONS, type StoreApiClient } from '../../packages/client/src/index.ts';
import { startClientTestServer, type ClientTestServer, failureOf } from './client-test-kit.ts';

const ADMIN_PREFIX = '/admin/api/v1/';
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

interface Operation {
  id: string;
  method: string;
  /** Below /admin/api/v1/, with `{name}` parameters. */
  path: string;
  bearer: boolean;
}

/** Every operation of the admin API in `document`. */
function adminOperationsOf(document: { paths: Record<string, Record<string, unknown>>; security?: Record<string, unknown>[] }): Operation[] {
  return Object.entries(document.paths)
    .filter(([path]) => path.startsWith(ADMIN_PREFIX))
    .flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]).map((m) => {
        const operation = item[m] as { operationId: string; security?: Record<string, unknown>[] };
        const security = operation.security ?? document.security ?? [];
        return { id: operation.operationId, method: m.toUpperCase(), path: path.slice(ADMIN_PREFIX.length), bearer: security.some((s) => 'bearerAuth' in s) };
      }),
    );
}

/** The operation a request went to: same method, path matching the template segment by segment. */
function operationOf(operations: Operation[], method: string, pathname: string): Operation | undefined {
  const segments = pathname.slice(ADMIN_PREFIX.length).split('/');
  const matches = operations.filter((op) => {
    const template = op.path.split('/');
    return op.method === method && template.length === segments.length && template.every((t, i) => t.startsWith('{') || t === segments[i]);
  });
  // A literal segment wins over a parameter (deliveries/retry over deliveries/{id}).
  return matches.sort((a, b) => a.path.split('{').length - b.path.split('{').length)[0];
}

describe.each(backends)('client.admin covers the admin API (%s)', (backend) => {
  let server: ClientTestServer;
  let routes: RouteSpec[];
  let operations: Operation[];
  let admin: StoreApiClient['admin'];
  let adminToken: string;
  /** Every answer client.admin got, as method, path and status. */
  const answered: { method: string; path: string; status: number }[] = [];

  beforeAll(async () => {
    ({ app: server, routes } = await collectRoutes(() =>
      startClientTestServer(backend, { ...UNLIMITED, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', IMPORT_JOB_ROWS: '1' }),
    ));
    operations = adminOperationsOf(await (await fetch(`${server.baseUrl}/api/v1/openapi.json`)).json());
    adminToken = (await server.t.auth(['admin', 'products:read'])).authorization.slice('Bearer '.length);
    const recording: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      answered.push({ method: init?.method ?? 'GET', path: new URL(String(input)).pathname, status: response.status });
      return response;
    };
    admin = server.client({ token: adminToken, fetch: recording }).admin;
  });
  afterAll(async () => server?.close());

  it('leaves out, by their security, exactly the operations that refuse every key', () => {
    const ruleOf = (op: Operation) =>
      routes.find((r) => r.method === op.method && r.url === `${ADMIN_PREFIX}${op.path.replace(/\{(\w+)\}/g, ':$1')}`)?.config?.permission;
    const unrouted = operations.filter((op) => ruleOf(op) === undefined).map((op) => op.id);
    expect(unrouted, 'operations of the document without a route declaring config.permission').toEqual([]);
    const refuseKeys = operations.filter((op) => ruleOf(op) === 'owner' || ruleOf(op) === 'account').map((op) => op.id);
    const declaredSessionOnly = operations.filter((op) => !op.bearer).map((op) => op.id);
    expect(refuseKeys.length).toBeGreaterThan(0);
    expect(
      declaredSessionOnly.filter((id) => !refuseKeys.includes(id)),
      'declared without bearerAuth, yet a key may call them',
    ).toEqual([]);
    expect(
      refuseKeys.filter((id) => !declaredSessionOnly.includes(id)),
      'refuse every key, yet declared with bearerAuth',
    ).toEqual([]);
  });

  it("every operation a key may call is in the client's generated table, with the document's method and path", () => {
    const table = ADMIN_OPERATIONS as Record<string, { method: string; path: string }>;
    const keyCallable = operations.filter((op) => op.bearer);
    expect(Object.keys(table).sort(), 'ADMIN_OPERATIONS is stale: run `npm run generate -w @store-api/client`').toEqual(keyCallable.map((op) => op.id).sort());
    for (const op of keyCallable) expect(table[op.id], op.id).toMatchObject({ method: op.method, path: op.path });
  });

  it('API tokens: create, get, list, update, roll (the new secret reads), revoke', async () => {
    const created = await admin.tokens.create({ name: 'erp', scopes: ['products:read'] });
    expect(created.token).toMatch(/^sia_/);
    expect(created.lastResponse).toMatchObject({ status: 201, idempotencyKey: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect((await admin.tokens.get(created.id)).name).toBe('erp');
    expect((await admin.tokens.list()).map((t) => t.id)).toContain(created.id);
    const updated = await admin.tokens.update(created.id, { name: 'erp (nightly)', rate_limit_standard: 100 });
    expect(updated).toMatchObject({ name: 'erp (nightly)', rate_limit_standard: 100 });
    expect(updated.lastResponse.idempotencyKey).toBeUndefined();
    const rolled = await admin.tokens.roll(created.id, { overlap_seconds: 0 });
    expect(rolled.token).toMatch(/^sia_/);
    expect(rolled.token).not.toBe(created.token);
    const page = await server.client({ token: rolled.token }).products.list({ limit: 1 });
    expect(page.lastResponse.rateLimit?.limit).toBe(100);
    expect((await failureOf(server.client({ token: created.token }).products.list())).status).toBe(401);
    expect((await admin.tokens.revoke(rolled.id)).revoked_at).not.toBeNull();
  });

  it('webhook endpoints: create, get, list, update, secret, rotate, ping, test event, replay preview and replay, stats, delete', async () => {
    const endpoint = await admin.webhookEndpoints.create({ url: 'http://127.0.0.1:9/hooks', event_types: ['product.updated'] });
    expect(endpoint.secret).toMatch(/^whsec_/);
    expect((await admin.webhookEndpoints.get(endpoint.id)).url).toBe('http://127.0.0.1:9/hooks');
    expect((await admin.webhookEndpoints.list()).map((e) => e.id)).toContain(endpoint.id);
    expect((await admin.webhookEndpoints.update(endpoint.id, { description: 'ERP' })).description).toBe('ERP');
    expect((await admin.webhookEndpoints.secret(endpoint.id)).secret).toBe(endpoint.secret);
    expect((await admin.webhookEndpoints.rotateSecret(endpoint.id)).secret).not.toBe(endpoint.secret);
    const ping = await admin.webhookEndpoints.ping(endpoint.id);
    expect(ping.lastResponse.status).toBe(202);
    const test = await admin.webhookEndpoints.sendTestEvent(endpoint.id, { type: 'product.updated' });
    expect(test.delivery_id).toMatch(/^[0-9a-f-]{36}$/);
    const window = { from: '2020-01-01T00:00:00Z', to: new Date(Date.now() + 60_000).toISOString() };
    const preview = await admin.webhookEndpoints.previewReplay(endpoint.id, window);
    expect((await admin.webhookEndpoints.replay(endpoint.id, window)).queued).toBe(preview.queued);
    const stats = await admin.webhookEndpoints.stats(endpoint.id);
    expect(stats.as_of).toMatch(/^\d{4}-/);
    expect(stats.last_24h).toBeDefined();
    expect((await admin.webhookEndpoints.delete(endpoint.id)).id).toBe(endpoint.id);
    expect((await failureOf(admin.webhookEndpoints.get(endpoint.id))).status).toBe(404);
  });

  it('deliveries: list, iterate, get, retry one and many, stats', async () => {
    const endpoint = await admin.webhookEndpoints.create({ url: 'http://127.0.0.1:9/dead', event_types: [] });
    const first = await admin.webhookEndpoints.ping(endpoint.id);
    const second = await admin.webhookEndpoints.ping(endpoint.id);
    const page = await admin.deliveries.list({ endpoint_id: endpoint.id, limit: 1 });
    expect(page.data).toHaveLength(1);
    const walk = admin.deliveries.iterate({ endpoint_id: endpoint.id, limit: 1 });
    const seen: string[] = [];
    for await (const delivery of walk) seen.push(delivery.id);
    expect(seen.sort()).toEqual([first.delivery_id, second.delivery_id].sort());
    expect(walk.lastResponse?.status).toBe(200);
    expect((await admin.deliveries.get(first.delivery_id)).endpoint_id).toBe(endpoint.id);
    // Only dead or failed deliveries are retried: these two die without a worker ever trying them.
    await sql`UPDATE webhook_deliveries SET status = 'dead', next_attempt_at = NULL, dead_at = now() WHERE endpoint_id = ${endpoint.id}::uuid`.execute(
      server.t.ctx.database.db,
    );
    expect((await admin.deliveries.retry(first.delivery_id)).status).toBe('pending');
    expect((await admin.deliveries.retryMany({ endpoint_id: endpoint.id, all_dead: true })).retried).toBe(1);
    const stats = await admin.deliveries.stats({ hours: 24 });
    expect(stats.lastResponse.status).toBe(200);
    await admin.webhookEndpoints.delete(endpoint.id);
  });

  it('catalog: create a product, read and update it, add and update a variant and an image', async () => {
    const product = await admin.products.create({ name: 'Kettle', product_type: 'physical', price: 25, sku: 'KET-1' });
    expect(product).toMatchObject({ name: 'Kettle', price: 25 });
    expect((await admin.products.get(product.id)).sku).toBe('KET-1');
    expect((await admin.products.update(product.id, { price: 27.5 })).price).toBe(27.5);
    // Variant and image writes answer the whole product.
    const withVariant = await admin.products.addVariant(product.id, { name: 'Red', price: 28, stock: 3, attributes: { colour: 'red' } });
    const variant = withVariant.variants.find((v) => v.name === 'Red')!;
    const renamed = await admin.products.updateVariant(product.id, variant.id, { name: 'Crimson' });
    expect(renamed.variants.map((v) => v.name)).toEqual(['Crimson']);
    const withImage = await admin.products.addImage(product.id, { image_url: 'https://example.com/kettle.jpg', is_primary: true });
    const image = withImage.images.find((i) => i.image_url === 'https://example.com/kettle.jpg')!;
    const moved = await admin.products.updateImage(product.id, image.id, { image_url: 'https://example.com/kettle-2.jpg' });
    expect(moved.images.map((i) => i.image_url)).toEqual(['https://example.com/kettle-2.jpg']);
    // The read API serves what the admin API wrote.
    const client = server.client({ token: adminToken });
    expect((await client.products.get(product.id)).variants.map((v) => v.name)).toEqual(['Crimson']);
  });

  it('customers, orders and stock: create and update a customer, place an order and move it on, adjust and import stock', async () => {
    const customer = await admin.customers.create({ name: 'Ada', email: 'ada@example.com' });
    expect((await admin.customers.update(customer.id, { city: 'London' })).city).toBe('London');
    const product = await admin.products.create({ name: 'Mug', product_type: 'physical', price: 8, stock: 20, sku: 'MUG-1' });
    const order = await admin.orders.place({ source: 'online', customer_id: customer.id, items: [{ product_id: product.id, quantity: 2 }] });
    expect(order).toMatchObject({ status: 'pending', customer_id: customer.id });
    expect((await admin.orders.changeStatus(order.id, { status: 'processing' })).status).toBe('processing');
    expect((await admin.orders.changePaymentStatus(order.id, { payment_status: 'paid' })).payment_status).toBe('paid');
    const adjustment = await admin.inventory.adjust({ product_id: product.id, quantity_change: 5, note: 'delivery' });
    expect(adjustment.product.stock).toBe(20 - 2 + 5);
    expect(adjustment.lastResponse.status).toBe(201);
    const imported = await admin.inventory.importCsv('sku,stock\nMUG-1,40\n');
    expect(imported).toMatchObject({ rows: 1, products: 1 });
    expect((await admin.products.get(product.id)).stock).toBe(40);
    // A large import (IMPORT_JOB_ROWS, lowered here to 1) is a job, listed and read by its id.
    const job = await admin.inventory.importCsv('sku,stock\nMUG-1,41\nMUG-1,42\n');
    expect(job.lastResponse.status).toBe(202);
    expect(job).toMatchObject({ status: 'queued', rows_total: 2 });
    const jobId = (job as { id: string }).id;
    expect((await admin.inventory.importJob(jobId)).status).toBe('queued');
    expect((await admin.inventory.importJobs({ status: 'waiting' })).map((j) => j.id)).toContain(jobId);
  });

  it("the dashboard's reads: overview, scopes and event groups, event types, alerts, administrators, security settings, audit log", async () => {
    expect((await admin.overview()).products.total).toBeGreaterThan(0);
    expect((await admin.scopesAndEventGroups()).scopes.map((s) => s.value)).toContain('products:read');
    expect((await admin.eventTypes()).map((e) => e.type)).toContain('order.created');
    expect((await admin.alerts()).lastResponse.status).toBe(200);
    expect(Array.isArray(await admin.administrators())).toBe(true);
    expect((await admin.securitySettings()).lastResponse.status).toBe(200);
    const sso = await admin.ssoSettings();
    expect(sso.data).toBeNull();
    expect(sso.lastResponse.status).toBe(200);
    const page = await admin.auditLog.list({ limit: 2 });
    expect(page.data.length).toBeGreaterThan(0);
    const entries = [];
    const walk = admin.auditLog.iterate({ limit: 2 });
    for await (const entry of walk) entries.push(entry.id);
    expect(entries.length).toBeGreaterThan(2);
    expect(new Set(entries).size).toBe(entries.length);
    expect(walk.lastResponse?.requestId).toBeDefined();
  });

  it('request(operationId, …) sends any of them by the name the document gives it', async () => {
    const client = server.client({ token: adminToken });
    const created = await client.admin.request('createApiKey', { body: { name: 'by-id' } });
    expect(created.lastResponse.status).toBe(201);
    const read = await client.admin.request('getApiKey', { path: { id: created.data.id } });
    expect(read.data.name).toBe('by-id');
    expect(read.lastResponse.requestId).toBe(read.lastResponse.headers['x-request-id']);
    expect((await client.admin.request('listEventTypes')).data.length).toBeGreaterThan(0);
    await expect(client.admin.request('getApiKey', { path: { id: '' } })).rejects.toThrow(/getApiKey needs the path parameter id/);
  });

  // Runs last: what the tests above sent through client.admin's named methods.
  it('a named method of client.admin reached every operation a key may call, and got its success answer', () => {
    const keyCallable = operations.filter((op) => op.bearer);
    const succeeded = new Set(
      answered.filter((a) => a.status < 300).map((a) => operationOf(operations, a.method, a.path)?.id ?? `unknown: ${a.method} ${a.path}`),
    );
    expect(
      [...succeeded].filter((id) => id.startsWith('unknown')),
      'requests to no operation of the document',
    ).toEqual([]);
    expect(
      keyCallable.filter((op) => !succeeded.has(op.id)).map((op) => `${op.id} (${op.method} ${ADMIN_PREFIX}${op.path})`),
      'not covered by client.admin',
    ).toEqual([]);
  });
});
