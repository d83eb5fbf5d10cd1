/**
 * Measuring tools of the benchmark: server processes, wrk runs, the read and export ceilings,
 * statistics over alternated rounds. Load always comes from another process than the one measured.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { Pool as HttpPool, Agent as UndiciAgent, fetch as undiciFetch } from 'undici';

export function log(message: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

/** A free TCP port on loopback (bound then released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  await once(server, 'close');
  return port;
}

export interface ServerProcess {
  child: ChildProcess;
  origin: string;
  /** Milliseconds from spawn to the first 200 of `readyPath`. */
  startMs: number;
  output(): string;
  /** Current and peak resident memory (MiB) from /proc. */
  memory(): { rssMb: number; peakMb: number };
  stop(): Promise<void>;
}

/** Kilobytes of a /proc/<pid>/status field. */
function statusKb(pid: number, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : 0;
}

/**
 * Starts `node <args>` with `env` and waits (bounded) until GET `path` answers a `ready` status on `port`.
 * The child is node itself (no npm or shell in between), so its pid is the server's.
 */
/** Node flags of every server role the bench starts: those of the container image and the systemd unit (decision 0023). */
export const SERVER_NODE_ARGS = ['--max-semi-space-size=8'];
/**
 * Environment of every process the bench starts with startServer, as the container image, the
 * systemd unit and `npm start` set it: at most two glibc malloc arenas (decision 0039; a variable set
 * in the environment already wins).
 */
export const SERVER_ENV: Record<string, string> = {
  MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2',
  // The benches measure the server during an import answered when it ends (decisions 0036, 0042,
  // 0049): above IMPORT_JOB_ROWS it would be a job answered 202 at once (decision 0060).
  IMPORT_JOB_ROWS: process.env.IMPORT_JOB_ROWS ?? '10000000',
};
/** Node flags of the embedded default as `npm start` runs it (package.json): an 8 MiB young generation (decision 0043), V8 favouring memory (decision 0048). */
export const EMBEDDED_NODE_ARGS = ['--max-semi-space-size=4', '--optimize-for-size'];

export async function startServer(
  nodeArgs: string[],
  env: Record<string, string>,
  port: number,
  { path: readyPath = '/healthz', ready = (status: number): boolean => status === 200, timeoutMs = 120_000 } = {},
): Promise<ServerProcess> {
  const start = performance.now();
  const child = spawn(process.execPath, nodeArgs, { env: { ...process.env, ...SERVER_ENV, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let exited = false;
  child.on('exit', () => (exited = true));
  const origin = `http://127.0.0.1:${port}`;
  for (;;) {
    if (exited) throw new Error(`server ${nodeArgs.join(' ')} exited before answering:\n${output}`);
    if (performance.now() - start > timeoutMs) {
      child.kill('SIGKILL');
      throw new Error(`server ${nodeArgs.join(' ')} did not answer ${readyPath} within ${timeoutMs} ms:\n${output}`);
    }
    try {
      const res = await fetch(origin + readyPath);
      await res.arrayBuffer();
      if (ready(res.status)) break;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const startMs = performance.now() - start;
  return {
    child,
    origin,
    startMs,
    output: () => output,
    memory: () => ({ rssMb: Math.round(statusKb(child.pid!, 'VmRSS') / 1024), peakMb: Math.round(statusKb(child.pid!, 'VmHWM') / 1024) }),
    stop: async () => {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await once(child, 'exit');
      clearTimeout(timer);
    },
  };
}

export interface LoadResult {
  perSecond: number;
  p50: number;
  p99: number;
}

/** wrk against one URL: requests/s and latency percentiles (ms). Any non-2xx response fails the run. */
/**
 * wrk (Debian package `wrk`) gives the load. On a fresh machine it is not there yet: installed with
 * apt-get when we are root (as .ci/run installs chromium), otherwise the run stops with one line.
 */
export function ensureWrk(): void {
  const found = () => spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
  if (found()) return;
  if (process.getuid?.() === 0 && spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).error === undefined) {
    log('bench: installing wrk (apt-get install -y wrk)');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    spawnSync('apt-get', ['install', '-y', '-qq', 'wrk'], { stdio: 'inherit', env });
    if (found()) return;
  }
  throw new Error('bench: wrk is needed for the load and is not installed: apt-get install -y wrk');
}

export async function wrk(
  url: string,
  opts: { connections: number; seconds: number; headers: Record<string, string>; script?: string; env?: Record<string, string> },
): Promise<LoadResult> {
  const child = spawnWrk(url, opts);
  const [code, out] = await child.exited;
  if (code !== 0) throw new Error(`wrk exited ${code}: ${out}`);
  return parseWrk(url, out);
}

function spawnWrk(
  url: string,
  opts: { connections: number; seconds: number; headers: Record<string, string>; script?: string; env?: Record<string, string> },
): { child: ChildProcess; exited: Promise<[number | null, string]> } {
  const args = ['-t', String(Math.min(2, opts.connections)), '-c', String(opts.connections), '-d', `${opts.seconds}s`, '--latency'];
  for (const [name, value] of Object.entries(opts.headers)) args.push('-H', `${name}: ${value}`);
  if (opts.script) args.push('-s', opts.script);
  args.push(url);
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...opts.env } });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return { child, exited: once(child, 'exit').then(([code]) => [code as number | null, out]) };
}

function parseWrk(url: string, out: string): LoadResult {
  if (/Non-2xx or 3xx responses/.test(out)) throw new Error(`wrk saw errors on ${url}:\n${out}`);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const pct = (p: string) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)`, 'm').exec(out);
    if (!m) return NaN;
    const v = Number(m[1]);
    return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
  };
  if (!rps) throw new Error(`wrk output not understood:\n${out}`);
  return { perSecond: Number(rps[1]), p50: pct('50'), p99: pct('99') };
}

/**
 * wrk for as long as it takes: runs until `stop()` (SIGINT, upon which wrk prints its figures over
 * the time it ran), at most `maxSeconds`.
 */
export function wrkUntilStopped(
  url: string,
  opts: { connections: number; maxSeconds: number; headers: Record<string, string>; script?: string; env?: Record<string, string> },
): { stop(): Promise<LoadResult> } {
  const { child, exited } = spawnWrk(url, { ...opts, seconds: opts.maxSeconds });
  return {
    stop: async () => {
      child.kill('SIGINT');
      const [code, out] = await exited;
      if (code !== 0 && code !== null) throw new Error(`wrk exited ${code}: ${out}`);
      return parseWrk(url, out);
    },
  };
}

function percentile(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** One statement run by `connections` pg clients in closed loops for `seconds`: the read ceiling. */
export async function queryLoop(
  databaseUrl: string,
  query: { sql: string; parameters: readonly unknown[] },
  opts: { connections: number; seconds: number },
): Promise<LoadResult> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: opts.connections });
  try {
    const clients = await Promise.all(Array.from({ length: opts.connections }, () => pool.connect()));
    const latencies: number[] = [];
    const end = performance.now() + opts.seconds * 1000;
    const start = performance.now();
    await Promise.all(
      clients.map(async (client) => {
        while (performance.now() < end) {
          const t = performance.now();
          await client.query(query.sql, query.parameters as unknown[]);
          latencies.push(performance.now() - t);
        }
      }),
    );
    const elapsed = (performance.now() - start) / 1000;
    for (const client of clients) client.release();
    latencies.sort((a, b) => a - b);
    return { perSecond: latencies.length / elapsed, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
  } finally {
    await pool.end();
  }
}

export interface ExportResult {
  records: number;
  bytes: number;
  seconds: number;
  perSecond: number;
}

/** `COPY (<select>) TO STDOUT` streamed and counted: the export ceiling. */
export async function copyOut(databaseUrl: string, select: string): Promise<ExportResult> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const start = performance.now();
    const stream = client.query(copyTo(`COPY (${select}) TO STDOUT`));
    let records = 0;
    let bytes = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) records++;
    }
    const seconds = (performance.now() - start) / 1000;
    return { records, bytes, seconds, perSecond: records / seconds };
  } finally {
    await client.end();
  }
}

/** The whole export (or its first `maxRecords`) walked page by page (X-Next-Cursor) by one keep-alive client. */
export async function exportWalk(origin: string, path: string, token: string, maxRecords = Number.POSITIVE_INFINITY): Promise<ExportResult> {
  const pool = new HttpPool(origin, { connections: 1 });
  try {
    let records = 0;
    let bytes = 0;
    let next: string | undefined;
    const start = performance.now();
    for (;;) {
      const res = await pool.request({
        path: `${path}${next ? `&cursor=${encodeURIComponent(next)}` : ''}`,
        method: 'GET',
        headers: { authorization: `Bearer ${token}` },
      });
      if (res.statusCode !== 200) throw new Error(`export ${res.statusCode}: ${await res.body.text()}`);
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) records++;
      }
      if (res.headers['x-has-more'] !== 'true' || records >= maxRecords) break;
      next = String(res.headers['x-next-cursor']);
    }
    const seconds = (performance.now() - start) / 1000;
    return { records, bytes, seconds, perSecond: records / seconds };
  } finally {
    await pool.close();
  }
}

/** One snapshot stream (GET …/snapshot) read to its end (or its first `maxRecords`, then dropped) by one client. */
export async function snapshotRead(origin: string, path: string, token: string, maxRecords = Number.POSITIVE_INFINITY): Promise<ExportResult> {
  const pool = new HttpPool(origin, { connections: 1 });
  try {
    let records = 0;
    let bytes = 0;
    const start = performance.now();
    const res = await pool.request({ path, method: 'GET', headers: { authorization: `Bearer ${token}` } });
    if (res.statusCode !== 200) throw new Error(`snapshot ${res.statusCode}: ${await res.body.text()}`);
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) records++;
      if (records >= maxRecords) {
        res.body.destroy();
        break;
      }
    }
    const seconds = (performance.now() - start) / 1000;
    return { records, bytes, seconds, perSecond: records / seconds };
  } finally {
    await pool.close();
  }
}

/**
 * The transport ceiling: a bare Node HTTP server answering every request with `body` (the same
 * bytes and content type as the API's page), so wrk against it measures HTTP alone on this machine.
 */
export async function bareBodyServer(body: Buffer): Promise<{ origin: string; close(): Promise<void> }> {
  const { createServer } = await import('node:http');
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
    res.end(body);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Median and range of a list of numbers. */
export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function spread(values: number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  const median = sorted.length % 2 === 1 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/**
 * Runs each named measurement once per round, alternating them inside every round so that load from
 * outside (other processes on a shared machine) falls on all of them alike.
 */
export async function alternate<T>(rounds: number, steps: Record<string, () => Promise<T>>): Promise<Record<string, T[]>> {
  const results: Record<string, T[]> = Object.fromEntries(Object.keys(steps).map((k) => [k, []]));
  for (let round = 0; round < rounds; round++) {
    const names = Object.keys(steps);
    // Alternate the order too: first in one round, last in the next.
    if (round % 2 === 1) names.reverse();
    for (const name of names) {
      log(`  round ${round + 1}/${rounds}: ${name}`);
      results[name]!.push(await steps[name]!());
    }
  }
  return results;
}

/**
 * A stock CSV of `rows` absolute levels for the store bench/generate-store.ts makes: both variants of
 * every stock-tracked product (its types physical, food and digital_card: g % 6 in 0, 1, 3).
 */
export function generatedStoreStockCsv(rows: number): string {
  const lines: string[] = [];
  for (let g = 1; lines.length < rows; g++) if ([0, 1, 3].includes(g % 6)) lines.push(`SKU-${g}-0,${g % 50}`, `SKU-${g}-1,${(g + 1) % 50}`);
  return `sku,stock\n${lines.slice(0, rows).join('\n')}\n`;
}

export interface StockImport {
  /** The import's answer, read whole, and milliseconds from sending it. */
  answered: Promise<{ status: number; body: string; ms: number }>;
  /** True once the answer's head has arrived: loads measured "during the import" stop then. */
  done(): boolean;
}

/**
 * POST /admin/api/v1/inventory/import of `csv` with an admin token, as the benches that measure the
 * server during an import send it. No headers or body timeout: on a loaded machine the answer may
 * take longer than undici's default 300 s.
 */
export function postStockImport(origin: string, adminToken: string, csv: string): StockImport {
  let done = false;
  const started = performance.now();
  const answered = undiciFetch(`${origin}/admin/api/v1/inventory/import`, {
    dispatcher: new UndiciAgent({ headersTimeout: 0, bodyTimeout: 0 }),
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'text/csv' },
    body: csv,
  }).then(async (r) => {
    done = true;
    return { status: r.status, body: await r.text(), ms: performance.now() - started };
  });
  return { answered, done: () => done };
}
