/**
 * Slow clients cannot hold connections (point 2; point 6 for HEAD): the whole request —
 * head and body — must arrive within REQUEST_TIMEOUT_MS, the head within HEADERS_TIMEOUT_MS, and an
 * idle keep-alive connection closes after KEEP_ALIVE_TIMEOUT_MS. The deadlines are configured small
 * here; each case waits for the server to answer and close, never for a guessed time (without the
 * timeouts the connection stays open and the test times out).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Socket } from 'node:net';
import { loadConfig } from '../../src/config/config.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

interface Exchange {
  raw: string;
  status: number;
  headers: string;
  body: string;
}

/** Opens a connection, lets `drive` write to it, and resolves with all it received once the server closes it. */
function exchange(port: number, drive: (socket: Socket) => void): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('latin1');
      const at = raw.indexOf('\r\n\r\n');
      resolve({
        raw,
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0),
        headers: at === -1 ? raw : raw.slice(0, at),
        body: at === -1 ? '' : raw.slice(at + 4),
      });
    });
    socket.on('connect', () => drive(socket));
  });
}

describe('timeouts of slow clients: defaults', () => {
  it('REQUEST_TIMEOUT_MS 30 s, HEADERS_TIMEOUT_MS 10 s, KEEP_ALIVE_TIMEOUT_MS 72 s; the head may not outlast the request', () => {
    const config = loadConfig({});
    expect(config.REQUEST_TIMEOUT_MS).toBe(30_000);
    expect(config.HEADERS_TIMEOUT_MS).toBe(10_000);
    expect(config.KEEP_ALIVE_TIMEOUT_MS).toBe(72_000);
    expect(() => loadConfig({ REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '2000' })).toThrow(
      /HEADERS_TIMEOUT_MS="2000": must not exceed REQUEST_TIMEOUT_MS/,
    );
  });

  it("builds a server with a head deadline beyond Node's own 300 s request default (both the config allows)", async () => {
    // Node refuses headersTimeout > requestTimeout at createServer: the request deadline must reach
    // it with the head's, not after the server exists.
    const t = await buildTestApp('pglite', { REQUEST_TIMEOUT_MS: '900000', HEADERS_TIMEOUT_MS: '600000' });
    try {
      expect(t.app.server.requestTimeout).toBe(900_000);
      expect(t.app.server.headersTimeout).toBe(600_000);
    } finally {
      await t.close();
    }
  });

  it('the server is built with them', async () => {
    const t = await buildTestApp('pglite');
    try {
      expect(t.app.server.requestTimeout).toBe(30_000);
      expect(t.app.server.headersTimeout).toBe(10_000);
      expect(t.app.server.keepAliveTimeout).toBe(72_000);
    } finally {
      await t.close();
    }
  });
});

describe('slow clients are cut', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await buildTestApp('pglite', { REQUEST_TIMEOUT_MS: '400', HEADERS_TIMEOUT_MS: '300', KEEP_ALIVE_TIMEOUT_MS: '300' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  const slowHead = 'POST /admin/session HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n';

  it('a body that never comes: 408 problem+json, connection closed', async () => {
    const answer = await exchange(port, (socket) => socket.write(`${slowHead}{"email":`));
    expect(answer.status).toBe(408);
    expect(answer.headers).toMatch(/content-type: application\/problem\+json/i);
    expect(JSON.parse(answer.body)).toMatchObject({ status: 408, code: 'request_timeout', detail: expect.stringMatching(/did not arrive in time/) });
  });

  it('a body trickling a byte at a time: 408 once the request deadline passes', async () => {
    let timer: NodeJS.Timeout | undefined;
    const answer = await exchange(port, (socket) => {
      socket.write(slowHead);
      timer = setInterval(() => {
        if (socket.writable) socket.write('x');
      }, 20);
      socket.on('close', () => clearInterval(timer));
    });
    expect(answer.status).toBe(408);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'request_timeout' });
  });

  it('a head that never ends: 408', async () => {
    const answer = await exchange(port, (socket) => socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n'));
    expect(answer.status).toBe(408);
  });

  it('an idle keep-alive connection is closed after KEEP_ALIVE_TIMEOUT_MS', async () => {
    const answer = await exchange(port, (socket) => socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'));
    expect(answer.status).toBe(200);
    expect(answer.headers).toMatch(/keep-alive: timeout=0/i);
  });
});

describe('the timeouts measure the client, not the server', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await buildTestApp('pglite', { REQUEST_TIMEOUT_MS: '200', HEADERS_TIMEOUT_MS: '150' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a body that arrived in full while this thread was busy is answered, not 408', async () => {
    const body = JSON.stringify({ email: 'nobody@example.com', password: 'x'.repeat(4000) });
    const head = `POST /admin/session HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    // The server has begun reading this request's body (so its deadline runs) …
    const reading = new Promise<void>((resolve) => t.app.server.once('request', (request) => request.once('data', () => resolve())));
    const answer = exchange(port, (socket) => {
      socket.write(head + body.slice(0, 10));
      void reading.then(() =>
        // … then the rest is handed to the kernel, and this thread (the server's too) is kept busy past
        // REQUEST_TIMEOUT_MS before it can read it: the body is there, the server was late.
        socket.write(body.slice(10), () => {
          const until = performance.now() + 400;
          while (performance.now() < until);
        }),
      );
    });
    const { status } = await answer;
    expect(status).not.toBe(408);
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(500);
  });
});

describe('requests the HTTP parser refuses', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await buildTestApp('pglite');
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });
  const bigHeaders = (method: string) => `${method} /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`;

  it('headers too large: 431 problem+json with a grammatical detail', async () => {
    const answer = await exchange(port, (socket) => socket.write(bigHeaders('GET')));
    expect(answer.status).toBe(431);
    expect(JSON.parse(answer.body)).toMatchObject({
      code: 'header_fields_too_large',
      detail: 'The request headers are larger than the server accepts (16 KiB in all).',
    });
  });

  it('a HEAD refused by the parser gets the status and headers but no body', async () => {
    const answer = await exchange(port, (socket) => socket.write(bigHeaders('HEAD')));
    expect(answer.status).toBe(431);
    expect(answer.headers).toMatch(/content-type: application\/problem\+json/i);
    expect(answer.body).toBe('');
  });
});
