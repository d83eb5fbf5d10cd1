/**
 * Requests a client crafts at the protocol level, over a real socket (inject cannot send them): the
 * `Link` header never reflects a client-chosen host (Host header or an absolute-form request target),
 * and requests the HTTP parser refuses, or that lack Host, are answered problem+json.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type AddressInfo } from 'node:net';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends `text` as is on a new connection and parses the one response that comes back. */
function rawRequest(port: number, text: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = raw.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
  });
}

describe.each(backends)('hostile requests over the wire (%s)', (backend) => {
  const apps: TestApp[] = [];
  const start = async (env: Record<string, string> = {}) => {
    const t = await buildTestApp(backend, { ...UNLIMITED, ...env });
    apps.push(t);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    return { t, port: (t.app.server.address() as AddressInfo).port };
  };
  let plain: { t: TestApp; port: number };
  let authorization: string;
  beforeAll(async () => {
    plain = await start();
    for (let i = 0; i < 2; i++) await aProduct(plain.t.ctx.database.db);
    authorization = (await plain.t.auth()).authorization;
  });
  afterAll(async () => {
    for (const t of apps) await t.close();
  });

  const get = (port: number, target: string, host = 'evil.example') =>
    rawRequest(port, `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${authorization}\r\nConnection: close\r\n\r\n`);

  it('builds Link from the path only, whatever Host or request target the client sends', async () => {
    for (const target of ['/api/v1/products?limit=1', 'http://evil.example/api/v1/products?limit=1', 'https://evil.example:8443/api/v1/products?limit=1']) {
      const res = await get(plain.port, target);
      expect(res.status, target).toBe(200);
      expect(res.headers.link, target).toMatch(/^<\/api\/v1\/products\?limit=1&cursor=[^>]+>; rel="next"$/);
      expect(res.headers.link).not.toContain('evil');
    }
  });

  it('builds an absolute Link on PUBLIC_URL only', async () => {
    const configured = await start({ PUBLIC_URL: 'https://api.shop.example' });
    const { authorization: own } = await configured.t.auth();
    for (let i = 0; i < 2; i++) await aProduct(configured.t.ctx.database.db);
    const res = await rawRequest(
      configured.port,
      `GET http://evil.example/api/v1/products?limit=1 HTTP/1.1\r\nHost: evil.example\r\nX-Forwarded-Host: evil.example\r\nAuthorization: ${own}\r\nConnection: close\r\n\r\n`,
    );
    expect(res.status).toBe(200);
    expect(res.headers.link).toMatch(/^<https:\/\/api\.shop\.example\/api\/v1\/products\?limit=1&cursor=[^>]+>; rel="next"$/);
  });

  const expectProblem = (res: RawResponse, status: number, param: string) => {
    expect(res.status, res.body).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    const body = JSON.parse(res.body);
    expect(body.status).toBe(status);
    expect(body.errors.map((e: { param: string }) => e.param)).toContain(param);
  };

  it('answers a malformed request line, oversized headers and a missing Host with problem+json', async () => {
    expectProblem(await rawRequest(plain.port, 'GARBAGE\r\n\r\n'), 400, 'request');
    expectProblem(await rawRequest(plain.port, 'GET /api/v1/products HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'), 400, 'request');
    expectProblem(await rawRequest(plain.port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`), 431, 'headers');
    expectProblem(await rawRequest(plain.port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n'), 400, 'host');
    // HTTP/1.0 has no Host requirement, and the server still answers normally afterwards.
    expect((await rawRequest(plain.port, 'GET /healthz HTTP/1.0\r\n\r\n')).status).toBe(200);
    expect((await get(plain.port, '/healthz', 'localhost')).status).toBe(200);
  });
});
