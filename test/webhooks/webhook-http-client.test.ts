/**
 * The dispatcher's HTTP client against misbehaving receivers on loopback: every fault is a failed
 * attempt with a reason, within the timeout; connections are reused; private targets are refused
 * at connection time unless allowed; the pools of at most `originsKept` origins are kept, the
 * least recently used closed beyond; an origin gets a pool of several connections only once it
 * takes concurrent requests.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { OriginPools, WebhookHttpClient } from '../../src/webhooks/webhook-http-client.ts';

describe('webhook HTTP client', () => {
  let server: Server;
  let base: string;
  const sockets = new Set<Socket>();
  let requests = 0;
  let connections = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => {
        switch (req.url) {
          case '/ok':
            return res.writeHead(204).end();
          case '/trickle': {
            // Headers at once, then one byte every 100 ms: never completes within the timeout.
            res.writeHead(200, { 'content-type': 'text/plain' });
            const timer = setInterval(() => res.write('.'), 100);
            res.on('close', () => clearInterval(timer));
            return;
          }
          case '/huge':
            return res.writeHead(200).end(Buffer.alloc(1024 * 1024, 'a'));
          case '/retry-after':
            return res.writeHead(503, { 'retry-after': '120' }).end('busy');
          case '/reset':
            return req.socket.destroy();
          default:
            return res.writeHead(404).end();
        }
      });
    });
    server.on('connection', (s) => {
      connections++;
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('classifies each receiver behaviour and never waits past the timeout', async () => {
    const client = new WebhookHttpClient({ timeoutMs: 500, allowPrivate: true, connectionsPerOrigin: 2 });
    try {
      expect(await client.post(`${base}/ok`, '{}', {})).toMatchObject({ outcome: 'success', statusCode: 204 });
      const trickle = await client.post(`${base}/trickle`, '{}', {});
      expect(trickle).toMatchObject({ outcome: 'timeout', statusCode: null });
      expect(trickle.durationMs).toBeGreaterThanOrEqual(450);
      expect(trickle.durationMs).toBeLessThan(1500);
      const huge = await client.post(`${base}/huge`, '{}', {});
      expect(huge).toMatchObject({ outcome: 'response_too_large', statusCode: 200 });
      expect(huge.responseExcerpt!.length).toBe(2048);
      expect(await client.post(`${base}/retry-after`, '{}', {})).toMatchObject({
        outcome: 'http_error',
        statusCode: 503,
        retryAfterMs: 120_000,
        responseExcerpt: 'busy',
      });
      expect(await client.post(`${base}/reset`, '{}', {})).toMatchObject({ outcome: 'connection_error', statusCode: null });
      expect(await client.post('http://127.0.0.1:1/closed-port', '{}', {})).toMatchObject({ outcome: 'connection_error' });
    } finally {
      await client.close();
    }
  });

  it('keeps the pools of at most originsKept origins: the least recently used is closed, and made again when needed', async () => {
    // Three receivers, three origins; each counts its open connections.
    const receivers = await Promise.all(
      [0, 1, 2].map(async () => {
        const open = new Set<Socket>();
        const receiver = createServer((req, res) => {
          req.resume();
          req.on('end', () => res.writeHead(204).end());
        });
        receiver.on('connection', (s) => {
          open.add(s);
          s.on('close', () => open.delete(s));
        });
        await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
        return { receiver, open, url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/ok` };
      }),
    );
    const [a, b, c] = receivers as [(typeof receivers)[number], (typeof receivers)[number], (typeof receivers)[number]];
    const client = new WebhookHttpClient({ timeoutMs: 2000, allowPrivate: true, connectionsPerOrigin: 1, originsKept: 2 });
    try {
      for (const r of [a, b, c]) expect((await client.post(r.url, '{}', {})).outcome).toBe('success');
      // A's pool, the least recently used, is closed with its kept-alive connection; B's and C's stay.
      await vi.waitFor(() => expect(a.open.size).toBe(0));
      expect([b.open.size, c.open.size]).toEqual([1, 1]);
      // A again: a new pool, and now B's is the one closed.
      expect((await client.post(a.url, '{}', {})).outcome).toBe('success');
      await vi.waitFor(() => expect(b.open.size).toBe(0));
      expect([a.open.size, c.open.size]).toEqual([1, 1]);
    } finally {
      await client.close();
      for (const r of receivers) {
        for (const s of r.open) s.destroy();
        await new Promise((resolve) => r.receiver.close(resolve));
      }
    }
  });

  /**
   * A receiver that holds every request until `hold` are in flight at once (or 10 s pass): were
   * concurrent requests served one at a time, the count in flight (`most`) would never reach it.
   */
  async function holdingReceiver() {
    const state = { hold: 1, inFlight: 0, most: 0 };
    const waiting: (() => void)[] = [];
    const open = new Set<Socket>();
    const receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        state.inFlight++;
        state.most = Math.max(state.most, state.inFlight);
        let answered = false;
        const answer = () => {
          if (answered) return;
          answered = true;
          state.inFlight--;
          res.writeHead(204).end();
        };
        waiting.push(answer);
        if (state.inFlight >= state.hold) for (const w of waiting.splice(0)) w();
        else setTimeout(answer, 10_000).unref();
      });
    });
    receiver.on('connection', (s) => {
      open.add(s);
      s.on('close', () => open.delete(s));
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const close = async () => {
      for (const s of open) s.destroy();
      await new Promise((resolve) => receiver.close(resolve));
    };
    return { state, open, url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/ok`, close };
  }

  it('serves an origin with one connection until a request finds it busy, then with a pool of connectionsPerOrigin', async () => {
    const { state, open, url, close } = await holdingReceiver();
    const { Client, Pool } = await import('undici');
    const pools = new OriginPools((origin, pooled) => (pooled ? new Pool(origin, { connections: 4 }) : new Client(origin)), 10, 4);
    const post = async () => (await pools.request({ origin: new URL(url).origin, path: '/ok', method: 'POST', body: '{}' })).body.dump();
    try {
      // One at a time: a Client and its one connection, no pool.
      for (let i = 0; i < 3; i++) await post();
      expect([pools.size, pools.pooled, open.size, state.most]).toEqual([1, 0, 1, 1]);
      // Four at once: the first finds the Client idle, the second finds it busy and makes the
      // pool, which takes the other three; all four are in flight together.
      state.hold = 4;
      await Promise.all([post(), post(), post(), post()]);
      expect([pools.size, pools.pooled, state.most]).toEqual([1, 1, 4]);
      // The Client closed once its request was answered: only the pool's connections are left.
      await vi.waitFor(() => expect(open.size).toBe(3));
    } finally {
      await pools.close();
      await close();
    }
  });

  it('sends as many deliveries to one receiver at once as connectionsPerOrigin allows, and one at a time with 1', async () => {
    // The client's own wiring: connectionsPerOrigin is the pool's size (the endpoints' concurrency
    // rests on it), 1 a single connection.
    for (const connectionsPerOrigin of [4, 1]) {
      const { state, open, url, close } = await holdingReceiver();
      const client = new WebhookHttpClient({ timeoutMs: 30_000, allowPrivate: true, connectionsPerOrigin });
      try {
        state.hold = connectionsPerOrigin;
        const outcomes = await Promise.all([0, 1, 2, 3].map(async () => (await client.post(url, '{}', {})).outcome));
        expect(outcomes).toEqual(['success', 'success', 'success', 'success']);
        expect([connectionsPerOrigin, state.most]).toEqual([connectionsPerOrigin, connectionsPerOrigin]);
        expect(open.size).toBeLessThanOrEqual(connectionsPerOrigin);
      } finally {
        await client.close();
        await close();
      }
    }
  });

  it('keeps connections alive across deliveries', async () => {
    const client = new WebhookHttpClient({ timeoutMs: 2000, allowPrivate: true, connectionsPerOrigin: 1 });
    try {
      const before = connections;
      for (let i = 0; i < 5; i++) expect((await client.post(`${base}/ok`, '{}', {})).outcome).toBe('success');
      expect(connections - before).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('refuses private targets at connection time unless allowed, by IP or through a hostname', async () => {
    const client = new WebhookHttpClient({ timeoutMs: 2000, allowPrivate: false, connectionsPerOrigin: 1 });
    try {
      const count = requests;
      const port = new URL(base).port;
      expect(await client.post(`${base}/ok`, '{}', {})).toMatchObject({ outcome: 'blocked_address' });
      expect(await client.post(`http://localhost:${port}/ok`, '{}', {})).toMatchObject({ outcome: 'blocked_address' });
      // Loopback spelled inside IPv6 forms: decided on the address bytes, whatever the spelling.
      for (const host of ['[::127.0.0.1]', '[::ffff:7f00:1]', '[64:ff9b::127.0.0.1]', '[2002:7f00:1::]']) {
        expect(await client.post(`http://${host}:${port}/ok`, '{}', {}), host).toMatchObject({ outcome: 'blocked_address' });
      }
      expect(requests).toBe(count);
    } finally {
      await client.close();
    }
  });
});
