/**
 * Structured JSON logs: every line logged for a request carries its request id (the caller's
 * X-Request-Id when acceptable, echoed back), and no token or secret ever reaches the output —
 * the test captures everything at trace level and greps for the live secrets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/main/runtime.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';

describe.each(backends)('logs (%s)', (backend) => {
  let database: TestDatabase;
  let app: App;
  const lines: string[] = [];
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    const config = loadConfig({ LOG_LEVEL: 'trace', SEED_DEMO: 'false' });
    const sink = new Writable({
      write(chunk, _encoding, callback) {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        callback();
      },
    });
    app = await buildApp({ config, database, logger: createLogger(config, sink) });
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  const parsed = () => lines.map((line) => JSON.parse(line) as Record<string, any>);

  it('writes JSON lines carrying the request id, and echoes the id in X-Request-Id', async () => {
    const { token } = await createToken(database.db, { name: 'logging' });
    const mine = await app.inject({ url: '/api/v1/products', headers: { authorization: `Bearer ${token}`, 'x-request-id': 'erp-sync-42' } });
    expect(mine.headers['x-request-id']).toBe('erp-sync-42');
    const generated = await app.inject({ url: '/api/v1/products', headers: { authorization: `Bearer ${token}` } });
    expect(generated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    // An id that could forge log content is replaced, not logged.
    const hostile = await app.inject({ url: '/healthz', headers: { 'x-request-id': 'x"\nfake line' } });
    expect(hostile.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);

    const requestLines = parsed().filter((l) => l.req || l.res);
    expect(requestLines.length).toBeGreaterThanOrEqual(6);
    for (const line of requestLines) expect(line.request_id, JSON.stringify(line)).toEqual(expect.any(String));
    const ofMine = parsed()
      .filter((l) => l.request_id === 'erp-sync-42')
      .map((l) => l.msg);
    expect(ofMine).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
    expect(parsed().some((l) => l.request_id === generated.headers['x-request-id'])).toBe(true);
    for (const line of parsed()) expect(typeof line.time === 'string' && typeof line.level === 'number').toBe(true);
  });

  it('never logs a token, a cookie or a secret', async () => {
    const { token: admin } = await createToken(database.db, { name: 'admin', scopes: ['admin'] });
    const { token: reader } = await createToken(database.db, { name: 'reader' });
    const revokedProbe = `sia_${'A'.repeat(43)}`;
    await app.inject({ url: '/api/v1/products', headers: { authorization: `Bearer ${reader}`, cookie: 'store_admin_session=cookie-secret-value' } });
    await app.inject({ url: '/api/v1/products', headers: { authorization: `Bearer ${revokedProbe}` } });
    await app.inject({ url: '/api/v1/products', headers: { authorization: `Bearer ${reader}x` } });
    await app.inject({ url: '/api/v1/products?cursor=bad', headers: { authorization: `Bearer ${reader}` } });
    const created = await app.inject({
      method: 'POST',
      url: '/admin/api/v1/tokens',
      headers: { authorization: `Bearer ${admin}` },
      payload: { name: 'from admin' },
    });
    expect(created.statusCode).toBe(201);
    const createdSecret = JSON.stringify(created.json()).match(/sia_[A-Za-z0-9_-]{43}/)?.[0];
    expect(createdSecret).toBeDefined();
    // Code that logs an object holding credentials by hand gets them redacted.
    app.log.info(
      { token: reader, endpoint: { url: 'https://erp.example', secret: 'whsec_c2VjcmV0LXZhbHVl' }, headers: { authorization: `Bearer ${reader}` } },
      'hand-written log line',
    );

    // Tokens where they do not belong: in the query under the usual names, in the path, as a request id.
    for (const name of ['token', 'access_token', 'api_key', 'apiKey']) {
      await app.inject({ url: `/api/v1/products?${name}=${encodeURIComponent(reader)}&limit=1` });
    }
    await app.inject({ url: `/api/v1/products/${reader}`, headers: { authorization: `Bearer ${reader}` } });
    await app.inject({ url: `/api/v1/${admin}/orders` });
    const echoed = await app.inject({ url: '/healthz', headers: { 'x-request-id': admin } });
    expect(echoed.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const randomLooking = 'Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpL';
    await app.inject({ url: `/healthz?opaque=${randomLooking}`, headers: { 'x-request-id': randomLooking } });

    const output = lines.join('\n');
    expect(output).toContain('hand-written log line');
    expect(output).not.toContain(randomLooking);
    // What is redacted is still visibly there, the rest of the URL intact.
    expect(parsed().some((l) => l.req?.url === '/api/v1/products?access_token=[redacted]&limit=1')).toBe(true);
    expect(parsed().some((l) => l.req?.url === '/api/v1/[redacted]/orders')).toBe(true);
    for (const secret of [admin, reader, revokedProbe, createdSecret!, 'cookie-secret-value', 'whsec_c2VjcmV0LXZhbHVl']) {
      expect(output.includes(secret), `log output contains ${secret.slice(0, 8)}…`).toBe(false);
    }
    expect(output).not.toMatch(/sia_[A-Za-z0-9_-]{20,}/);
    expect(output).not.toMatch(/Bearer /);
  });

  it('redacts a token by its shape wherever it appears: bare query names, percent-encoded names, the Host header', async () => {
    const { token } = await createToken(database.db, { name: 'shapes' });
    const body = token.slice('sia_'.length);
    const encodedName = `%73ia_${body}`;
    const requests = [
      `/healthz?${body}=1`, //                    a bare name without its prefix
      `/healthz?${body}`, //                      a bare name without a value
      `/healthz?${encodedName}=1`, //             a percent-encoded prefix
      `/healthz?x=${encodeURIComponent(token).replace('s', '%73')}`, // a percent-encoded value
      `/api/v1/products/%73ia_${body}`, //        a percent-encoded path segment
    ];
    const from = lines.length;
    for (const url of requests) await app.inject({ url });
    await app.inject({ url: '/healthz', headers: { host: token } });
    await app.inject({ url: '/healthz', headers: { host: body } });
    const output = lines.slice(from).join('\n');
    expect(output).toContain('incoming request');
    for (const secret of [token, body, encodedName, body.slice(0, 24)]) {
      expect(output.includes(secret), `log output contains ${secret.slice(0, 8)}…`).toBe(false);
    }
    expect(parsed().some((l) => l.req?.url === '/healthz?[redacted]=1')).toBe(true);
  });
});
