/**
 * The OpenAPI 3.1 document at /api/v1/openapi.json: valid under @readme/openapi-parser, covering
 * every read API endpoint with its parameters, responses (problem+json errors), headers and security,
 * the operational endpoints, and the webhook payloads; and the offline reference at /docs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileErrors, validate } from '@readme/openapi-parser';
import { expectSchema } from '../helpers/schema-check.ts';
import { EVENT_PAYLOADS } from '../../src/api/schemas.ts';
import { exampleEvent } from '../../src/api/openapi-examples.ts';
import { FIFO_BATCH, fifoBatchCatalogEntry } from '../../src/api/openapi-webhooks.ts';
import { EVENT_TYPES } from '../../src/resources/event-types.ts';
import { READ_SCOPES, RESOURCES } from '../../src/resources/registry.ts';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { CSRF_HEADER, SESSION_COOKIE } from '../../src/admin/sessions/session-cookie.ts';
import { SCOPES } from '../../src/tokens/token.service.ts';

/** Every route of the read API (README "Read API" table) and the operational ones. */
const READ = [...READ_SCOPES];
const API_OPERATIONS: Array<[path: string, scope: string | string[], kind: 'list' | 'export' | 'single' | 'snapshot', query: string[]]> = [
  ['/api/v1/products', 'products:read', 'list', ['limit', 'cursor', 'order', 'include_inactive']],
  ['/api/v1/products/{id}', 'products:read', 'single', []],
  ['/api/v1/products/export', 'products:read', 'export', ['limit', 'cursor', 'order', 'include_inactive']],
  ['/api/v1/orders', 'orders:read', 'list', ['limit', 'cursor', 'order', 'status', 'source', 'since']],
  ['/api/v1/orders/{id}', 'orders:read', 'single', []],
  ['/api/v1/orders/export', 'orders:read', 'export', ['limit', 'cursor', 'order', 'status', 'source', 'since']],
  ['/api/v1/customers', 'customers:read', 'list', ['limit', 'cursor', 'order']],
  ['/api/v1/customers/{id}', 'customers:read', 'single', []],
  ['/api/v1/customers/export', 'customers:read', 'export', ['limit', 'cursor', 'order']],
  ['/api/v1/inventory', 'inventory:read', 'list', ['limit', 'cursor', 'order', 'include_inactive']],
  ['/api/v1/inventory/export', 'inventory:read', 'export', ['limit', 'cursor', 'order', 'include_inactive']],
  ['/api/v1/inventory/movements', 'inventory:read', 'list', ['limit', 'cursor', 'order', 'product_id', 'since']],
  ['/api/v1/inventory/movements/export', 'inventory:read', 'export', ['limit', 'cursor', 'order', 'product_id', 'since']],
  ['/api/v1/events', READ, 'list', ['limit', 'cursor', 'order', 'type', 'since']],
  ['/api/v1/events/export', READ, 'export', ['limit', 'cursor', 'order', 'type', 'since']],
  ['/api/v1/products/snapshot', 'products:read', 'snapshot', ['cursor', 'include_inactive']],
  ['/api/v1/orders/snapshot', 'orders:read', 'snapshot', ['cursor', 'status', 'source', 'since']],
  ['/api/v1/customers/snapshot', 'customers:read', 'snapshot', ['cursor']],
  ['/api/v1/inventory/snapshot', 'inventory:read', 'snapshot', ['cursor', 'include_inactive']],
  ['/api/v1/inventory/movements/snapshot', 'inventory:read', 'snapshot', ['cursor', 'product_id', 'since']],
  ['/api/v1/events/snapshot', READ, 'snapshot', ['cursor', 'type', 'since']],
  ['/api/v1/attributes', 'products:read', 'list', ['limit', 'cursor', 'include_inactive']],
];
const OPS_PATHS = ['/healthz', '/readyz', '/metrics'];
/** The routes every declared resource has (resources/registry.ts): the spec's above, and any added since. */
const DECLARED_PATHS = RESOURCES.flatMap((r) => [
  `/api/v1/${r.path}`,
  `/api/v1/${r.path}/export`,
  `/api/v1/${r.path}/snapshot`,
  // Range checksums a mirror is verified against (decision 0038).
  `/api/v1/${r.path}/checksums`,
  `/api/v1/${r.path}/checksums/records`,
  ...(r.single ? [`/api/v1/${r.path}/{id}`] : []),
]);

type Json = Record<string, any>;

describe.each(backends)('OpenAPI document and /docs (%s)', (backend) => {
  let t: TestApp;
  let doc: Json;
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    const res = await t.app.inject({ url: '/api/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    doc = res.json();
  });
  afterAll(async () => t?.close());

  const resolve = (node: Json): Json => {
    if (!node?.$ref) return node;
    const [, kind, name] = /^#\/components\/(\w+)\/(.+)$/.exec(node.$ref)!;
    return doc.components[kind!][name!];
  };

  it('is served without a token and validates as OpenAPI 3.1', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await validate(structuredClone(doc) as Parameters<typeof validate>[0]);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
  });

  it('documents exactly the read API and operational endpoints, each a real route', async () => {
    const expected = [...new Set([...API_OPERATIONS.map(([path]) => path), ...DECLARED_PATHS, ...OPS_PATHS])].sort();
    const readPaths = Object.keys(doc.paths).filter((path) => !path.startsWith('/admin/'));
    expect(readPaths.sort()).toEqual(expected);
    for (const path of readPaths) {
      expect(Object.keys(doc.paths[path]), path).toEqual(['get']);
      expect(t.app.hasRoute({ method: 'GET', url: path.replace(/\{(\w+)\}/g, ':$1') }), path).toBe(true);
    }
    const ids = (Object.values(doc.paths) as Json[]).flatMap((item) => Object.values(item).map((op: Json) => op.operationId));
    expect(new Set(ids).size).toBe(ids.length);
    for (const path of OPS_PATHS) expect(doc.paths[path].get.security, path).toEqual([]);
  });

  it('documents the admin API apart: Admin tags, the admin scope, problem responses, Idempotency-Key on every POST', () => {
    const adminPaths = Object.keys(doc.paths).filter((path) => path.startsWith('/admin/api/v1/'));
    // The routes the admin API registers, each documented.
    for (const path of [
      '/admin/api/v1/tokens',
      '/admin/api/v1/tokens/{id}/revoke',
      '/admin/api/v1/orders',
      '/admin/api/v1/products',
      '/admin/api/v1/webhooks/endpoints',
      '/admin/api/v1/webhooks/endpoints/{id}/replay',
      '/admin/api/v1/webhooks/deliveries',
      '/admin/api/v1/webhooks/deliveries/{id}/retry',
    ])
      expect(adminPaths).toContain(path);
    const adminTags = new Set((doc.tags as Json[]).map((tag) => tag.name).filter((name: string) => name.startsWith('Admin: ')));
    for (const path of adminPaths) {
      for (const [method, op] of Object.entries(doc.paths[path]) as [string, Json][]) {
        expect(t.app.hasRoute({ method: method.toUpperCase() as 'GET', url: path.replace(/\{(\w+)\}/g, ':$1') }), `${method} ${path}`).toBe(true);
        expect(op.tags.length, path).toBe(1);
        expect(adminTags.has(op.tags[0]), `${path}: ${op.tags[0]}`).toBe(true);
        // An admin-scoped key and the dashboard's session, or the session alone (what each route
        // really accepts is the test below); the CSRF header on every change made with the session.
        const session = method === 'get' ? { dashboardSession: [] } : { dashboardSession: [], csrfToken: [] };
        expect([[{ bearerAuth: ['admin'] }, session], [session]], `${method} ${path}`).toContainEqual(op.security);
        expect(op.responses['401']).toEqual({ $ref: '#/components/responses/AdminUnauthorized' });
        const idempotency = (op.parameters ?? []).some((p: Json) => p.$ref === '#/components/parameters/IdempotencyKey');
        expect(idempotency, `${method} ${path}`).toBe(method === 'post');
      }
    }
    expect(doc.components.parameters.IdempotencyKey).toMatchObject({ name: 'Idempotency-Key', in: 'header', required: false });
  });

  it("declares the dashboard's session: a cookie scheme and the CSRF header scheme the server checks", () => {
    const schemes = doc.components.securitySchemes;
    expect(schemes.dashboardSession).toMatchObject({ type: 'apiKey', in: 'cookie', name: SESSION_COOKIE });
    expect(schemes.csrfToken).toMatchObject({ type: 'apiKey', in: 'header' });
    expect(schemes.csrfToken.name.toLowerCase()).toBe(CSRF_HEADER);
  });

  it("documents the dashboard's sign-in routes: session, setup and one-time links, with their bodies, answers and security", () => {
    const signIn = Object.entries(doc.paths as Json)
      .filter(([path]) => path.startsWith('/admin/') && !path.startsWith('/admin/api/v1/'))
      .flatMap(([path, item]) => Object.entries(item as Json).map(([method, op]) => [`${method.toUpperCase()} ${path}`, op as Json] as const));
    expect(signIn.map(([name]) => name).sort()).toEqual(
      [
        'DELETE /admin/session',
        'GET /admin/session',
        'POST /admin/links/check',
        'POST /admin/links/use',
        'POST /admin/session',
        'POST /admin/session/passkey',
        'POST /admin/session/passkey/options',
        'POST /admin/setup',
        'POST /admin/setup/check',
      ].sort(),
    );
    for (const [name, op] of signIn) {
      const [method, path] = name.split(' ') as [string, string];
      expect(t.app.hasRoute({ method: method as 'GET', url: path }), name).toBe(true);
      expect(op.tags, name).toEqual(['Admin: dashboard session']);
      // Not the admin API's idempotent writes.
      expect(
        (op.parameters ?? []).map((p: Json) => p.$ref ?? p.name),
        name,
      ).not.toContain('#/components/parameters/IdempotencyKey');
      const success = Object.keys(op.responses).filter((status) => /^2/.test(status));
      expect(success.length, name).toBe(1);
      if (method !== 'DELETE') expect(op.responses[success[0]!].content['application/json'].schema.properties.data, name).toBeDefined();
      if (method === 'POST') expect(op.requestBody.content['application/json'].schema.type, name).toBe('object');
    }
    const op = (name: string) => signIn.find(([n]) => n === name)![1];
    // Anyone may ask who is signed in, or sign out; with the cookie (and, to sign out, its CSRF token).
    expect(op('GET /admin/session').security).toEqual([{}, { dashboardSession: [] }]);
    expect(op('DELETE /admin/session').security).toEqual([{}, { dashboardSession: [], csrfToken: [] }]);
    for (const name of [
      'POST /admin/session',
      'POST /admin/session/passkey',
      'POST /admin/session/passkey/options',
      'POST /admin/setup/check',
      'POST /admin/setup',
      'POST /admin/links/check',
      'POST /admin/links/use',
    ])
      expect(op(name).security, name).toEqual([]);
    // What starts a session answers it, with the cookie.
    for (const [name, status] of [
      ['POST /admin/session', '200'],
      ['POST /admin/session/passkey', '200'],
      ['POST /admin/setup', '201'],
      ['POST /admin/links/use', '200'],
    ] as const) {
      expect(op(name).responses[status].content['application/json'].schema.properties.data, name).toEqual({ $ref: '#/components/schemas/DashboardSession' });
      expect(op(name).responses[status].headers['Set-Cookie'], name).toBeDefined();
    }
    expect(Object.keys(doc.components.schemas.DashboardSession.properties)).toEqual(['email', 'role', 'csrf_token', 'expires_at', 'second_factor', 'store']);
  });

  it('types every success body of the admin API (no `{ data: {} }`), declaring the status each route sends', () => {
    const adminPaths = Object.keys(doc.paths).filter((path) => path.startsWith('/admin/api/v1/'));
    const untyped: string[] = [];
    for (const path of adminPaths) {
      for (const [method, op] of Object.entries(doc.paths[path]) as [string, Json][]) {
        const success = Object.keys(op.responses).filter((status) => /^2/.test(status));
        // One success status per route, but for the stock import: 201 done, or 202 with the job of a
        // large import (decision 0060); the client types its answer as the union of the two.
        if (method === 'post' && path === '/admin/api/v1/inventory/import') expect(success).toEqual(['201', '202']);
        else expect(success.length, `${method} ${path}`).toBe(1);
        for (const status of success) {
          if (status === '204') {
            expect(op.responses[status].content, `${method} ${path}`).toBeUndefined();
            continue;
          }
          let schema = op.responses[status].content?.['application/json']?.schema;
          if (schema?.$ref) schema = resolve(schema);
          const data = schema?.properties?.data;
          // An empty schema (or none) types the answer as `unknown` in every generated client.
          if (!data || Object.keys(data).length === 0) untyped.push(`${method} ${path} ${status}`);
        }
      }
    }
    expect(untyped).toEqual([]);
    const status = (path: string, method: string) => Object.keys(doc.paths[path][method].responses).find((s) => /^2/.test(s));
    expect(status('/admin/api/v1/tokens', 'post')).toBe('201');
    expect(status('/admin/api/v1/webhooks/endpoints', 'post')).toBe('201');
    expect(status('/admin/api/v1/inventory/import', 'post')).toBe('201');
    expect(status('/admin/api/v1/webhooks/endpoints/{id}/ping', 'post')).toBe('202');
    expect(status('/admin/api/v1/webhooks/endpoints/{id}/test-events', 'post')).toBe('202');
    const schemas = doc.components.schemas;
    expect(Object.keys(schemas.ApiKey.properties)).toContain('previous_secret_expires_at');
    expect(Object.keys(schemas.ApiKeyWithSecret.properties)).toContain('token');
    expect(Object.keys(schemas.WebhookDelivery.properties)).toContain('test');
    expect(Object.keys(schemas.WebhookEndpointWithSecret.properties)).toContain('secret');
  });

  it('declares the CSV import body as text/csv', () => {
    const body = doc.paths['/admin/api/v1/inventory/import'].post.requestBody;
    expect(body.required).toBe(true);
    expect(Object.keys(body.content)).toEqual(['text/csv']);
    expect(body.content['text/csv'].schema.type).toBe('string');
  });

  it('describes NDJSON bodies as strings with the schema of one line in x-ndjson-line-schema', () => {
    for (const [path, item] of Object.entries(doc.paths) as [string, Json][]) {
      if (!/\/(export|snapshot)$/.test(path)) continue;
      const media = item.get.responses['200'].content['application/x-ndjson'];
      expect(media.schema.type, path).toBe('string');
      expect(media['x-ndjson-line-schema'], path).toBeDefined();
    }
    expect(doc.paths['/api/v1/products/export'].get.responses['200'].content['application/x-ndjson']['x-ndjson-line-schema']).toEqual({
      $ref: '#/components/schemas/Product',
    });
  });

  it('names operations as a person would, uniquely, with no status range a generator trips on, at the package version', async () => {
    const ids: string[] = [];
    for (const item of Object.values(doc.paths) as Json[]) {
      for (const op of Object.values(item) as Json[]) {
        ids.push(op.operationId);
        // `4XX`-style ranges break orval's compile: every status is concrete.
        expect(
          Object.keys(op.responses).filter((status) => !/^\d{3}$/.test(status)),
          op.operationId,
        ).toEqual([]);
      }
    }
    for (const id of ids) expect(id).toMatch(/^[a-z][A-Za-z0-9]*$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(
      expect.arrayContaining([
        'listProducts',
        'getProduct',
        'exportProducts',
        'snapshotProducts',
        'listInventoryMovements',
        'createApiKey',
        'rollApiKey',
        'rotateEndpointSecret',
        'getLiveness',
      ]),
    );
    const { readFileSync } = await import('node:fs');
    expect(doc.info.version).toBe(JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
  });

  it('leaves every parameter with a default optional (generated clients need not pass limit)', () => {
    for (const [path, item] of Object.entries(doc.paths) as [string, Json][]) {
      for (const op of Object.values(item) as Json[]) {
        for (const param of (op.parameters ?? []).map(resolve)) {
          if (param.schema?.default !== undefined) expect(param.required ?? false, `${path} ${param.name}`).toBe(false);
        }
      }
    }
    expect(doc.paths['/api/v1/products'].get.parameters.find((p: Json) => p.name === 'limit').required ?? false).toBe(false);
  });

  it.each(API_OPERATIONS)('%s: parameters, security, responses, errors and headers', (path, scope, kind, query) => {
    const op = doc.paths[path].get;
    // Several scopes: any one of them (one security requirement each).
    expect(op.security).toEqual((Array.isArray(scope) ? scope : [scope]).map((s) => ({ bearerAuth: [s] })));
    const params = op.parameters.map(resolve);
    expect(
      params
        .filter((p: Json) => p.in === 'query')
        .map((p: Json) => p.name)
        .sort(),
    ).toEqual([...query].sort());
    if (kind === 'single') {
      expect(params.find((p: Json) => p.in === 'path')).toMatchObject({ name: 'id', required: true });
      expect(params.find((p: Json) => p.in === 'header')).toMatchObject({ name: 'If-None-Match' });
      expect(op.responses['304'].headers.ETag).toBeDefined();
      expect(op.responses['200'].headers.ETag).toBeDefined();
      expect(op.responses['404'].content['application/problem+json']).toBeDefined();
    }
    const limit = params.find((p: Json) => p.name === 'limit');
    if (kind === 'list') expect(limit.schema).toMatchObject({ minimum: 1, maximum: 200, default: 50 });
    if (kind === 'export') expect(limit.schema).toMatchObject({ minimum: 1, maximum: 500, default: 500 });

    const ok = op.responses['200'];
    if (kind === 'export') {
      expect(Object.keys(ok.content)).toEqual(['application/x-ndjson']);
      expect(ok.headers['X-Next-Cursor']).toBeDefined();
      expect(ok.headers['X-Has-More']).toBeDefined();
    } else if (kind === 'snapshot') {
      expect(Object.keys(ok.content)).toEqual(['application/x-ndjson']);
      expect(ok.headers['X-Snapshot-Cursor']).toBeDefined();
      expect(op.parameters.map(resolve).find((p: Json) => p.name === 'limit')).toBeUndefined();
    } else {
      const schema = ok.content['application/json'].schema;
      expect(schema.properties.data).toBeDefined();
      if (kind === 'list') expect(schema.properties.pagination).toEqual({ $ref: '#/components/schemas/Pagination' });
    }
    if (kind === 'list' || kind === 'export') expect(ok.headers.Link).toEqual({ $ref: '#/components/headers/Link' });
    for (const header of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit']) {
      expect(ok.headers[header], header).toEqual({ $ref: `#/components/headers/${header}` });
      expect(op.responses['429'].headers[header], header).toBeDefined();
    }
    expect(op.responses['429'].headers['Retry-After']).toBeDefined();
    for (const status of ['400', '401', '403', '429']) {
      expect(Object.keys(op.responses[status].content), status).toEqual(['application/problem+json']);
      expect(op.responses[status].content['application/problem+json'].schema).toEqual({ $ref: '#/components/schemas/Problem' });
    }
    expect(resolve(op.responses['500']).content['application/problem+json']).toBeDefined();
  });

  it('names the resource schemas as components, with every field of the spec', () => {
    const schemas = doc.components.schemas;
    expect(Object.keys(schemas)).toEqual(
      expect.arrayContaining(['Product', 'Variant', 'Image', 'Order', 'OrderItem', 'Customer', 'InventoryRecord', 'StockMovement', 'Pagination', 'Problem']),
    );
    expect(Object.keys(schemas.Product.properties)).toEqual(
      expect.arrayContaining([
        'id',
        'name',
        'slug',
        'product_type',
        'barcode',
        'sku',
        'price',
        'cost_price',
        'stock',
        'category_id',
        'thumbnail_url',
        'is_active',
        'variants',
        'images',
        'created_at',
        'last_modified',
      ]),
    );
    expect(schemas.Product.properties.variants.items).toEqual({ $ref: '#/components/schemas/Variant' });
    expect(Object.keys(schemas.Problem.properties)).toEqual(expect.arrayContaining(['type', 'title', 'status', 'detail', 'code', 'errors']));
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('describes every webhook event with its payload and signature headers', () => {
    // Every event type, and the batch a FIFO endpoint receives (decision 0059).
    expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_TYPES, FIFO_BATCH].sort());
    // …among them every type the spec names (docs/contract/decisions.md).
    expect(EVENT_TYPES).toEqual(
      expect.arrayContaining([
        'product.created',
        'product.updated',
        'order.created',
        'order.updated',
        'customer.created',
        'customer.updated',
        'inventory.updated',
        'stock_movement.created',
        'ping',
      ]),
    );
    for (const type of EVENT_TYPES) {
      const post = doc.webhooks[type].post;
      const body = post.requestBody.content['application/json'].schema;
      // An *.updated event carries `previous` too, what the change changed (decision 0057).
      expect(body.required).toEqual(type.endsWith('.updated') ? ['id', 'type', 'created_at', 'data', 'previous'] : ['id', 'type', 'created_at', 'data']);
      expect(body.properties.type).toEqual({ type: 'string', const: type });
      expect(post.parameters.map((p: Json) => p.name)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
      expect(post.security).toEqual([]);
      expect(post.requestBody.content['application/json'].example).toEqual(exampleEvent(type as never));
    }
    expect(doc.webhooks['order.updated'].post.requestBody.content['application/json'].schema.properties.data).toEqual({ $ref: '#/components/schemas/Order' });
    expect(doc.webhooks['stock_movement.created'].post.requestBody.content['application/json'].schema.properties.data).toEqual({
      $ref: '#/components/schemas/StockMovement',
    });
    // previous: any field of the record but version and last_modified, each optional; a child array as the record has it.
    const previous = doc.webhooks['product.updated'].post.requestBody.content['application/json'].schema.properties.previous;
    expect(previous.required ?? []).toEqual([]);
    expect(Object.keys(previous.properties)).not.toContain('version');
    expect(Object.keys(previous.properties)).not.toContain('last_modified');
    expect(previous.properties.variants).toEqual({ type: 'array', items: { $ref: '#/components/schemas/Variant' } });
  });

  it('gives every webhook event type an example payload that its schema accepts', () => {
    for (const [type, schema] of Object.entries(EVENT_PAYLOADS)) expectSchema(schema, exampleEvent(type as never));
    expect(exampleEvent('ping')).toMatchObject({ type: 'ping', data: { endpoint_id: expect.any(String) } });
  });

  it("describes a FIFO endpoint's batch: an array of the event bodies, signed like one event, its example accepted", () => {
    const post = doc.webhooks[FIFO_BATCH].post;
    const body = post.requestBody.content['application/json'].schema;
    expect(body.type).toBe('array');
    expect(body.items.anyOf).toEqual(EVENT_TYPES.map((type) => doc.webhooks[type].post.requestBody.content['application/json'].schema));
    expect(post.parameters.map((p: Json) => p.name)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
    const catalog = fifoBatchCatalogEntry();
    expect(catalog.example).toEqual(post.requestBody.content['application/json'].example);
    expectSchema(catalog.schema as never, catalog.example);
    expect(() => expectSchema(catalog.schema as never, (catalog.example as Json[])[0])).toThrow();
  });

  it('lists the events feed as the union of the webhook payloads', () => {
    const list = doc.paths['/api/v1/events'].get.responses['200'].content['application/json'].schema;
    expect(list.properties.data.items).toEqual({ $ref: '#/components/schemas/Event' });
    const union = doc.components.schemas.Event.anyOf as Json[];
    const webhookBodies = EVENT_TYPES.filter((type) => type !== 'ping').map((type) => doc.webhooks[type].post.requestBody.content['application/json'].schema);
    expect(union).toEqual(webhookBodies);
  });

  it('declares for every operation the credentials the server really accepts: a key refused ⇔ no bearerAuth, a session accepted ⇔ the cookie scheme listed', async () => {
    const db = t.database.db;
    await createAdminUser(db, { email: 'security-owner@example.com', password: 'correct horse battery', role: 'owner' });
    let address = 0;
    const signIn = async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/admin/session',
        payload: { email: 'security-owner@example.com', password: 'correct horse battery' },
        remoteAddress: `10.9.0.${++address}`,
      });
      expect(res.statusCode, res.body).toBe(200);
      return { cookie: String(res.headers['set-cookie']).split(';')[0]!, csrf: res.json().data.csrf_token as string };
    };
    const owner = await signIn();
    // The most a key may be: every scope, made by an owner (it acts as an admin, decision 0026).
    const made = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/tokens',
      headers: { cookie: owner.cookie, 'x-csrf-token': owner.csrf },
      payload: { name: 'security', scopes: SCOPES },
    });
    expect(made.statusCode, made.body).toBe(201);
    const key = { authorization: `Bearer ${made.json().data.token}` };

    const NO_RECORD = '00000000-0000-4000-8000-000000000000';
    const refused = (status: number) => status === 401 || status === 403;
    const wrong: string[] = [];
    let operations = 0;
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const [method, op] of Object.entries(item as Json) as [string, Json][]) {
        operations++;
        const name = `${method.toUpperCase()} ${path}`;
        const security = (op.security ?? doc.security ?? []) as Json[];
        const send = (headers: Record<string, string>) =>
          t.app.inject({
            method: method.toUpperCase() as 'GET',
            url: path.replace(/\{\w+\}/g, NO_RECORD),
            headers,
            ...(method === 'get' ? {} : { payload: {} }),
          });
        // Signing out ends the session it is sent with: a session of its own.
        const session = path === '/admin/session' && method === 'delete' ? await signIn() : owner;
        if (security.length === 0 || security.some((requirement) => Object.keys(requirement).length === 0)) {
          // No credential needed: nobody is refused.
          const res = await send({});
          if (refused(res.statusCode)) wrong.push(`${name}: the document needs no credential, yet nobody gets ${res.statusCode}`);
          continue;
        }
        const byKey = await send(key);
        const keyListed = security.some((requirement) => 'bearerAuth' in requirement);
        if (refused(byKey.statusCode) === keyListed)
          wrong.push(
            `${name}: a key ${refused(byKey.statusCode) ? `is refused (${byKey.statusCode})` : 'is accepted'} but the document ${keyListed ? 'lists' : 'omits'} bearerAuth`,
          );
        const cookieRequirements = security.filter((requirement) => 'dashboardSession' in requirement);
        // The session with what the document asks of it (the CSRF header where named); with it, where it names no cookie.
        const csrfNamed = cookieRequirements.length === 0 || cookieRequirements.some((requirement) => 'csrfToken' in requirement);
        const bySession = await send({ cookie: session.cookie, ...(csrfNamed ? { 'x-csrf-token': session.csrf } : {}) });
        if (refused(bySession.statusCode) === cookieRequirements.length > 0)
          wrong.push(
            `${name}: a session ${refused(bySession.statusCode) ? `is refused (${bySession.statusCode})` : 'is accepted'} but the document ${cookieRequirements.length > 0 ? 'lists' : 'omits'} the cookie scheme`,
          );
        if (cookieRequirements.length > 0 && cookieRequirements.every((requirement) => 'csrfToken' in requirement)) {
          const withoutCsrf = await send({ cookie: session.cookie });
          if (!refused(withoutCsrf.statusCode))
            wrong.push(`${name}: the document asks a session for X-CSRF-Token, yet it is accepted without (${withoutCsrf.statusCode})`);
        }
        const byNobody = await send({});
        if (!refused(byNobody.statusCode)) wrong.push(`${name}: the document needs a credential, yet nobody is accepted (${byNobody.statusCode})`);
      }
    }
    expect(operations).toBeGreaterThan(90);
    expect(wrong).toEqual([]);
  });

  it('serves the interactive reference at /docs from its own assets, without a token', async () => {
    const page = await t.app.inject({ url: '/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    // Every script and stylesheet is served by this process (works offline).
    const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThan(0);
    for (const asset of assets) {
      expect(asset, asset).not.toMatch(/^(?:https?:)?\/\//);
      const res = await t.app.inject({ url: new URL(asset, 'http://x/docs/').pathname });
      expect(res.statusCode, asset).toBe(200);
    }
    const json = await t.app.inject({ url: '/docs/json' });
    expect(json.json().openapi).toBe('3.1.0');
  });
});
