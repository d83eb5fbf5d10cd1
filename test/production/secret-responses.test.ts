/**
 * Every response that carries a secret says `Cache-Control: no-store`: a new API
 * token, a new webhook endpoint (its signing secret), the secret itself and a rotated one. Responses
 * without a secret (lists showing only token prefixes) are left to the usual caching rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { secretResponsesPlugin } from '../../src/ops/secret-responses.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

describe.each(backends)('responses carrying a secret (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };
  beforeAll(async () => {
    t = await buildTestApp(backend, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    admin = await t.auth(['admin']);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('POST /tokens, POST /webhooks/endpoints, GET …/secret and POST …/rotate-secret are no-store', async () => {
    const token = await t.app.inject({ method: 'POST', url: '/admin/api/v1/tokens', headers: admin, payload: { name: 'cache test' } });
    expect(token.statusCode).toBe(201);
    expect(token.headers['cache-control']).toBe('no-store');

    const endpoint = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/webhooks/endpoints',
      headers: admin,
      payload: { url: 'http://127.0.0.1:9/hook' },
    });
    expect(endpoint.statusCode, endpoint.body).toBe(201);
    expect(endpoint.headers['cache-control']).toBe('no-store');
    const id = endpoint.json().data.id as string;

    const secret = await t.app.inject({ url: `/admin/api/v1/webhooks/endpoints/${id}/secret`, headers: admin });
    expect(secret.statusCode).toBe(200);
    expect(secret.headers['cache-control']).toBe('no-store');

    const rotated = await t.app.inject({ method: 'POST', url: `/admin/api/v1/webhooks/endpoints/${id}/rotate-secret`, headers: admin });
    expect(rotated.statusCode).toBe(200);
    expect(rotated.headers['cache-control']).toBe('no-store');
  });

  it('a list showing token prefixes only is not marked', async () => {
    const list = await t.app.inject({ url: '/admin/api/v1/tokens', headers: admin });
    expect(list.statusCode).toBe(200);
    expect(list.body).toMatch(/sia_/);
    expect(list.headers['cache-control']).not.toBe('no-store');
  });

  it('a read API page is not scanned: only routes flagged returnsSecret are (decision 0037)', async () => {
    const list = await t.app.inject({ url: '/api/v1/products?limit=1', headers: await t.auth() });
    expect(list.statusCode).toBe(200);
    expect(list.headers['cache-control']).not.toBe('no-store');
  });
});

describe('the returnsSecret flag cannot be forgotten', () => {
  const tokenAnswer = { 200: { type: 'object', properties: { data: { type: 'object', properties: { token: { type: 'string' } } } } } };

  it('refuses a route whose answer has a secret field but lacks the flag', async () => {
    const app = Fastify();
    await app.register(secretResponsesPlugin);
    expect(() => app.post('/tokens', { schema: { response: tokenAnswer } }, async () => ({ data: { token: 'x' } }))).toThrow(/returnsSecret/);
    await app.close();
  });

  it('a flagged route answering a secret is no-store; an unflagged one is not scanned', async () => {
    const app = Fastify();
    await app.register(secretResponsesPlugin);
    const secret = `sia_${'A'.repeat(43)}`;
    app.post('/tokens', { config: { returnsSecret: true }, schema: { response: tokenAnswer } }, async () => ({ data: { token: secret } }));
    app.get('/page', async () => ({ data: [{ description: secret }] }));
    const flagged = await app.inject({ method: 'POST', url: '/tokens' });
    expect(flagged.headers['cache-control']).toBe('no-store');
    const page = await app.inject({ url: '/page' });
    expect(page.body).toContain(secret);
    expect(page.headers['cache-control']).toBeUndefined();
    await app.close();
  });
});
