/**
 * One client cannot starve everyone. The service runs as a child process limited
 * to 1,024 file descriptors (prlimit), with its default MAX_CONNECTIONS_PER_ADDRESS. One address
 * (127.0.0.2) opens 3,000 idle keep-alive connections (one request answered, then silence) and 800
 * slow-body ones (a head announcing a large body, `Expect: 100-continue` answered, a few bytes, then
 * silence), interleaved; every one of them ends either held by the server (answered, then left
 * open) or closed at once. Then a legitimate client on 127.0.0.1 gets every answer it asks for.
 *
 * Deterministic: the body and keep-alive timeouts are an hour (heads are complete at once), so
 * nothing the flood holds is let go during the test;
 * every count is exact (held = the cap, refused = the rest, counted by the metric and logged); no
 * timing is asserted. Loopback only, 3,800 connections, a bounded number in flight at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Socket } from 'node:net';
import { request } from 'node:http';
import { loadConfig } from '../../src/config/config.ts';
import { listeningUrl, metricSum, parseMetrics, startStoreApi, type StoreApiProcess } from './process-helpers.ts';

const IDLE = 3000;
const SLOW = 800;
/** Connections being opened at once (each settles before the next of its slot starts). */
const IN_FLIGHT = 200;
const HOUR_MS = '3600000';

type Fate = 'held' | 'closed';

/** Opens one flood connection from 127.0.0.2 and resolves with its fate; `held` sockets stay open. */
function floodConnection(port: number, kind: 'idle' | 'slow', held: { socket: Socket; kind: 'idle' | 'slow' }[]): Promise<Fate> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
    let received = '';
    let settled = false;
    const settle = (fate: Fate) => {
      if (settled) return;
      settled = true;
      if (fate === 'held') held.push({ socket, kind });
      resolve(fate);
    };
    socket.on('error', () => settle('closed'));
    socket.on('close', () => settle('closed'));
    socket.on('connect', () => {
      socket.write(
        kind === 'idle'
          ? 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'
          : 'POST /admin/session HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n',
      );
    });
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      // An idle keep-alive connection: its one answer is complete (a small JSON body).
      if (kind === 'idle' && /^HTTP\/1\.1 200 /.test(received) && received.includes('\r\n\r\n')) settle('held');
      // A slow body: the server asks for it; a few bytes come, then nothing more.
      if (kind === 'slow' && received.startsWith('HTTP/1.1 100 Continue')) {
        socket.write('{"email":');
        settle('held');
      }
    });
  });
}

/** One request on a fresh connection from 127.0.0.1. */
function legitimateGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

// Linux: prlimit and the 127.0.0.0/8 loopback addresses.
describe.runIf(process.platform === 'linux')('a flood of idle and slow connections from one address, at 1,024 descriptors', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'store-api-flood-'));
  let server: StoreApiProcess;
  let port: number;
  const held: { socket: Socket; kind: 'idle' | 'slow' }[] = [];

  beforeAll(async () => {
    server = startStoreApi(
      ['all'],
      { DATA_DIR: dataDir, LOG_LEVEL: 'warn', REQUEST_TIMEOUT_MS: HOUR_MS, HEADERS_TIMEOUT_MS: '300000', KEEP_ALIVE_TIMEOUT_MS: HOUR_MS },
      { name: 'store-api all (nofile 1024)', prefix: ['prlimit', '--nofile=1024:1024'] },
    );
    port = Number(new URL(await listeningUrl(server)).port);
  }, 180_000);
  afterAll(async () => {
    for (const { socket } of held) socket.destroy();
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('the flood holds at most MAX_CONNECTIONS_PER_ADDRESS, the rest are refused, logged and counted; a legitimate client gets every answer', async () => {
    const cap = loadConfig({}).maxConnectionsPerAddress;
    const metricsBefore = parseMetrics((await legitimateGet(port, '/metrics')).body);
    // The limit is the one the test set.
    expect(metricSum(metricsBefore, 'process_max_fds')).toBe(1024);

    // 3,800 connections, slow ones spread among the idle ones, IN_FLIGHT at a time.
    const kinds: ('idle' | 'slow')[] = Array.from({ length: IDLE + SLOW }, (_, i) => (i % 19 < 4 && i < SLOW * 5 ? 'slow' : 'idle'));
    expect(kinds.filter((k) => k === 'slow')).toHaveLength(SLOW);
    const fates: Fate[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < kinds.length) {
          const kind = kinds[next++]!;
          fates.push(await floodConnection(port, kind, held));
        }
      }),
    );
    expect(fates).toHaveLength(IDLE + SLOW);

    // The legitimate client: every request answered while the flood holds its connections.
    for (let i = 0; i < 18; i++) expect((await legitimateGet(port, '/healthz')).status).toBe(200);
    const products = await legitimateGet(port, '/api/v1/products?limit=1');
    expect(products.status).toBe(401); // answered (no token): the API is reachable, not starved

    const heldCount = fates.filter((f) => f === 'held').length;
    expect(heldCount).toBe(cap);
    // Both kinds are among those held.
    expect(held.filter((h) => h.kind === 'slow').length).toBeGreaterThan(0);
    expect(held.filter((h) => h.kind === 'idle').length).toBeGreaterThan(0);

    const metrics = parseMetrics((await legitimateGet(port, '/metrics')).body);
    const refused = metricSum(metrics, 'store_api_connections_refused_total') - metricSum(metricsBefore, 'store_api_connections_refused_total');
    expect(refused).toBe(IDLE + SLOW - cap);
    // Far from the limit: the cap kept the descriptors free.
    expect(metricSum(metrics, 'process_open_fds')).toBeLessThan(1024 * 0.8);
    expect(metricSum(metrics, 'store_api_descriptors_near_limit')).toBe(0);
    // Logged, at most once a minute per address (a line or two for the whole burst), naming the address.
    const lines = server
      .output()
      .split('\n')
      .filter((l) => l.includes('MAX_CONNECTIONS_PER_ADDRESS'));
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.length).toBeLessThan(10);
    for (const line of lines) expect(line).toContain('127.0.0.2');
  }, 300_000);
});
