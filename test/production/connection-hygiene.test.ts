/**
 * Connection hygiene, in process: a socket answered 408 or timed out is
 * destroyed, not half-closed, so a client that never reads nor closes cannot keep its descriptor;
 * the per-address connection cap refuses, counts and logs; the descriptor watch warns near the
 * limit. Each case waits for the server's socket to close or for an answer, never for a guessed
 * time: without the fix the socket never closes and the test times out.
 * (test/production/connection-flood.test.ts is the whole story under a 1,024-descriptor limit.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { connectionsRefused, descriptorCheck, descriptorsNearLimit, descriptorUsage, nearDescriptorLimit } from '../../src/ops/connection-limits.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

/** The server's side of the next connection accepted by `t`. */
function nextServerSocket(t: TestApp): Promise<Socket> {
  return new Promise((resolve) => t.app.server.once('connection', resolve));
}

/** A client that connects, writes `request`, and then neither reads (paused) nor closes. */
async function stubbornClient(port: number, request: string, localAddress = '127.0.0.1'): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port, localAddress });
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.pause();
  socket.write(request);
  return socket;
}

/** A logger whose lines are kept in `lines`. */
function capturingLogger() {
  const lines: { msg: string; [key: string]: unknown }[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  return { logger: pino({ level: 'warn' }, stream), lines };
}

describe('sockets are destroyed after a 408 or a timeout', () => {
  let t: TestApp;
  let port: number;
  const clients: Socket[] = [];
  beforeAll(async () => {
    t = await buildTestApp('pglite', { REQUEST_TIMEOUT_MS: '400', HEADERS_TIMEOUT_MS: '300', KEEP_ALIVE_TIMEOUT_MS: '300' });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    await t?.close();
  });

  it('a body that never comes: answered 408, then the socket is destroyed although the client never reads nor closes', async () => {
    const accepted = nextServerSocket(t);
    const client = await stubbornClient(
      port,
      'POST /admin/session HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"email":',
    );
    clients.push(client);
    const server = await accepted;
    await once(server, 'close');
    expect(server.destroyed).toBe(true);
    // What the client had not read yet: the 408.
    const received: Buffer[] = [];
    client.on('data', (chunk) => received.push(chunk));
    const ended = once(client, 'end');
    client.resume();
    await ended;
    expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('a head that never ends: answered 408, socket destroyed', async () => {
    const accepted = nextServerSocket(t);
    clients.push(await stubbornClient(port, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n'));
    const server = await accepted;
    await once(server, 'close');
    expect(server.destroyed).toBe(true);
  });

  it('an idle keep-alive connection: destroyed after KEEP_ALIVE_TIMEOUT_MS although the client never closes', async () => {
    const accepted = nextServerSocket(t);
    clients.push(await stubbornClient(port, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'));
    const server = await accepted;
    await once(server, 'close');
    expect(server.destroyed).toBe(true);
  });
});

describe('the connection cap per client address', () => {
  it('is 256 by default (a promise of the docs), none behind a proxy unless set, 0 turns it off', () => {
    expect(loadConfig({}).maxConnectionsPerAddress).toBe(256);
    expect(loadConfig({ TRUST_PROXY: 'true' }).maxConnectionsPerAddress).toBe(0);
    expect(loadConfig({ TRUST_PROXY: 'true', MAX_CONNECTIONS_PER_ADDRESS: '2000' }).maxConnectionsPerAddress).toBe(2000);
    expect(loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '0' }).maxConnectionsPerAddress).toBe(0);
    expect(() => loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '-1' })).toThrow(/MAX_CONNECTIONS_PER_ADDRESS/);
  });

  describe('with a cap of 3', () => {
    let t: TestApp;
    let port: number;
    const clients: Socket[] = [];
    beforeAll(async () => {
      t = await buildTestApp('pglite', { MAX_CONNECTIONS_PER_ADDRESS: '3' });
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      port = (t.app.server.address() as { port: number }).port;
    });
    afterAll(async () => {
      for (const c of clients) c.destroy();
      await t?.close();
    });

    /** Opens a keep-alive connection from `from`; resolves 'answered' (kept open) or 'closed'. */
    const open = (from: string) =>
      new Promise<'answered' | 'closed'>((resolve) => {
        const socket = connect({ host: '127.0.0.1', port, localAddress: from });
        clients.push(socket);
        socket.on('error', () => resolve('closed'));
        socket.on('close', () => resolve('closed'));
        socket.on('connect', () => socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'));
        socket.on('data', (chunk) => {
          if (chunk.toString('latin1').startsWith('HTTP/1.1 200')) resolve('answered');
        });
      });

    it('the 4th connection of one address is closed at once and counted; another address is served; a closed one frees its place', async () => {
      const refusedBefore = (await connectionsRefused.get()).values[0]?.value ?? 0;
      const accepted: Socket[] = [];
      t.app.server.on('connection', (s: Socket) => accepted.push(s));
      const held = [await open('127.0.0.3'), await open('127.0.0.3'), await open('127.0.0.3')];
      expect(held).toEqual(['answered', 'answered', 'answered']);
      expect(await open('127.0.0.3')).toBe('closed');
      expect(await open('127.0.0.4')).toBe('answered');
      expect((await connectionsRefused.get()).values[0]?.value).toBe(refusedBefore + 1);
      // One of the three goes away; once the server has seen it close, its place is free again.
      const serverSide = once(accepted[0]!, 'close');
      clients[0]!.destroy();
      await serverSide;
      expect(await open('127.0.0.3')).toBe('answered');
    });
  });
});

describe('the descriptor watch', () => {
  it('warns at 80 % of the limit, with the gauge, at most once a minute', async () => {
    expect(nearDescriptorLimit(819, 1024)).toBe(false);
    expect(nearDescriptorLimit(820, 1024)).toBe(true);
    const { logger, lines } = capturingLogger();
    let now = 0;
    let usage = { open: 100, limit: 1024 };
    const check = descriptorCheck(logger, { now: () => now, usage: () => usage });
    const gauge = async () => (await descriptorsNearLimit.get()).values[0]?.value;
    check();
    expect(lines).toHaveLength(0);
    expect(await gauge()).toBe(0);
    usage = { open: 900, limit: 1024 };
    check();
    expect(await gauge()).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.msg).toMatch(/900 of 1024 file descriptors are open/);
    expect(lines[0]).toMatchObject({ open_descriptors: 900, descriptor_limit: 1024 });
    now += 59_999;
    check();
    expect(lines).toHaveLength(1);
    now += 1;
    check();
    expect(lines).toHaveLength(2);
    usage = { open: 10, limit: 1024 };
    check();
    expect(await gauge()).toBe(0);
  });

  it("reads this process's descriptors on Linux", () => {
    const usage = descriptorUsage();
    expect(usage?.open).toBeGreaterThan(0);
    expect(usage?.limit).toBeGreaterThan(usage!.open);
  });
});
