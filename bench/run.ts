/**
 * Benchmarks of the read API (`npm run bench`): builds a store of BENCH_PRODUCTS (default 10,000)
 * products on PGlite — and on PostgreSQL when BENCH_DATABASE_URL is set (a scratch database is
 * created on that server and dropped afterwards) — serves it on 127.0.0.1 and measures with plain
 * loops over an undici pool:
 *   - list page latency (p50/p95), limit 50 and 200, walking the cursor like an integrator;
 *   - single-resource GET latency (p50/p95);
 *   - list throughput with 8 concurrent clients;
 *   - export throughput (records/s) over the whole catalogue, identity and gzip;
 *   - resident memory (peak RSS sampled every 50 ms; server and load generator share the process).
 * Results go to docs/benchmarks.md. Timing targets live there, never in tests.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import pg from 'pg';
import { Pool } from 'undici';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config/config.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { generateDemoStore } from '../src/demo/demo-store.ts';
import { createToken } from '../src/tokens/token.service.ts';

const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 10_000);
const LIST_REQUESTS = Number(process.env.BENCH_LIST_REQUESTS ?? 300);
const CONCURRENCY = 8;
const OUTPUT = new URL('../docs/benchmarks.md', import.meta.url);

interface Result {
  backend: string;
  generateSeconds: number;
  list50: Summary;
  list200: Summary;
  single: Summary;
  concurrent: { requests: number; seconds: number; perSecond: number; p50: number; p95: number };
  exportIdentity: { records: number; seconds: number; perSecond: number; bytes: number };
  exportGzip: { records: number; seconds: number; perSecond: number; bytes: number };
  peakRssMb: number;
  rssBeforeLoadMb: number;
}

interface Summary {
  count: number;
  p50: number;
  p95: number;
  max: number;
}

function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { count: sorted.length, p50: at(0.5), p95: at(0.95), max: sorted[sorted.length - 1]! };
}

const ms = (value: number) => value.toFixed(1);
const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
const mb1 = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

function log(message: string) {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

class RssSampler {
  peak = process.memoryUsage().rss;
  #timer = setInterval(() => {
    this.peak = Math.max(this.peak, process.memoryUsage().rss);
  }, 50);

  stop(): number {
    clearInterval(this.#timer);
    return Math.max(this.peak, process.memoryUsage().rss);
  }
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const start = performance.now();
  const value = await fn();
  return [value, performance.now() - start];
}

/** Generates the store into `database`; returns seconds taken. */
async function generateStore(backend: string, database: DatabaseHandle): Promise<number> {
  log(`${backend}: generating ${PRODUCTS} products…`);
  const [, generateMs] = await timed(() => generateDemoStore(database.db, {
    products: PRODUCTS,
    customers: Math.round(PRODUCTS / 10),
    orders: Math.min(500, Math.round(PRODUCTS / 20)),
    seed: 42,
  }));
  log(`${backend}: generated in ${(generateMs / 1000).toFixed(1)} s`);
  return generateMs / 1000;
}

/** Serves `database` (an already generated store) and measures it. */
async function benchBackend(backend: string, database: DatabaseHandle, generateSeconds: number): Promise<Result> {
  const { token } = await createToken(database.db, { name: 'bench' });
  const config = loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', RATE_LIMIT_STANDARD: '1000000', RATE_LIMIT_EXPORT: '1000000' });
  const app = await buildApp({ config, database, logger: pino({ level: 'silent' }) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const pool = new Pool(origin, { connections: CONCURRENCY });
  const headers = { authorization: `Bearer ${token}` };
  const rssBeforeLoad = process.memoryUsage().rss;
  const rss = new RssSampler();

  const get = async (path: string, extra: Record<string, string> = {}) => {
    const res = await pool.request({ path, method: 'GET', headers: { ...headers, ...extra } });
    const body = Buffer.from(await res.body.arrayBuffer());
    if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${body.toString().slice(0, 200)}`);
    return { res, body };
  };

  try {
    // Warm-up: JIT, prepared plans, page cache.
    for (let i = 0; i < 20; i++) await get('/api/v1/products?limit=50');

    /** Walks the list with its cursor (restarting at the end), timing each page. */
    const walk = async (limit: number, count: number) => {
      const samples: number[] = [];
      let cursor: string | undefined;
      for (let i = 0; i < count; i++) {
        const path = `/api/v1/products?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const [{ body }, elapsed] = await timed(() => get(path));
        samples.push(elapsed);
        const page = JSON.parse(body.toString()) as { pagination: { next_cursor: string | null; has_more: boolean } };
        cursor = page.pagination.has_more ? page.pagination.next_cursor ?? undefined : undefined;
      }
      return summarize(samples);
    };
    log(`${backend}: list pages`);
    const list50 = await walk(50, LIST_REQUESTS);
    const list200 = await walk(200, Math.round(LIST_REQUESTS / 2));

    log(`${backend}: single GETs`);
    const ids: string[] = [];
    let cursor: string | undefined;
    while (ids.length < 1000) {
      const { body } = await get(`/api/v1/products?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      const page = JSON.parse(body.toString()) as { data: Array<{ id: string }>; pagination: { next_cursor: string; has_more: boolean } };
      ids.push(...page.data.map((p) => p.id));
      if (!page.pagination.has_more) break;
      cursor = page.pagination.next_cursor;
    }
    const singleSamples: number[] = [];
    for (let i = 0; i < LIST_REQUESTS; i++) {
      const [, elapsed] = await timed(() => get(`/api/v1/products/${ids[(i * 7919) % ids.length]}`));
      singleSamples.push(elapsed);
    }
    const single = summarize(singleSamples);

    log(`${backend}: ${CONCURRENCY} concurrent clients`);
    const concurrentSamples: number[] = [];
    const total = LIST_REQUESTS * 2;
    let issued = 0;
    const [, concurrentMs] = await timed(() => Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (issued < total) {
        const n = issued++;
        const [, elapsed] = await timed(() => get(`/api/v1/products?limit=50&cursor=${encodeURIComponent(new Date(Date.UTC(2020, 0, 1) + n).toISOString())}`));
        concurrentSamples.push(elapsed);
      }
    })));
    const concurrentSummary = summarize(concurrentSamples);

    /** Exports the whole catalogue page by page (limit 500), following X-Next-Cursor. */
    const exportAll = async (encoding?: string) => {
      let records = 0;
      let bytes = 0;
      let next: string | undefined;
      const [, elapsed] = await timed(async () => {
        for (;;) {
          const path = `/api/v1/products/export?limit=500&include_inactive=true${next ? `&cursor=${encodeURIComponent(next)}` : ''}`;
          const { res, body } = await get(path, encoding ? { 'accept-encoding': encoding } : {});
          bytes += body.length;
          const text = encoding === 'gzip' ? (await import('node:zlib')).gunzipSync(body).toString() : body.toString();
          records += text.length === 0 ? 0 : text.trimEnd().split('\n').length;
          if (res.headers['x-has-more'] !== 'true') break;
          next = String(res.headers['x-next-cursor']);
        }
      });
      return { records, seconds: elapsed / 1000, perSecond: Math.round(records / (elapsed / 1000)), bytes };
    };
    log(`${backend}: exports`);
    const exportIdentity = await exportAll();
    const exportGzip = await exportAll('gzip');

    const peak = rss.stop();
    return {
      backend,
      generateSeconds,
      list50,
      list200,
      single,
      concurrent: { requests: total, seconds: concurrentMs / 1000, perSecond: Math.round(total / (concurrentMs / 1000)), p50: concurrentSummary.p50, p95: concurrentSummary.p95 },
      exportIdentity,
      exportGzip,
      peakRssMb: mb(peak),
      rssBeforeLoadMb: mb(rssBeforeLoad),
    };
  } finally {
    rss.stop();
    await pool.close();
    await app.close();
  }
}

async function createScratchPostgres(baseUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `store_api_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const dropper = new pg.Client({ connectionString: baseUrl });
      await dropper.connect();
      await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await dropper.end();
    },
  };
}

/** The targets below, checked against the PostgreSQL column (the fleet back end) when there is one. */
function targetCheck(results: Result[]): string[] {
  const r = results.find((x) => x.backend === 'PostgreSQL');
  if (!r) return ['Targets not checked: run with BENCH_DATABASE_URL to measure PostgreSQL.'];
  const check = (ok: boolean, text: string) => `- ${ok ? 'met' : '**missed**'}: ${text}`;
  return [
    `This run (PostgreSQL, ${PRODUCTS.toLocaleString('en')} products):`,
    '',
    check(r.list50.p95 < 50, `list p95 ${ms(r.list50.p95)} ms`),
    check(r.single.p95 < 20, `single GET p95 ${ms(r.single.p95)} ms`),
    check(r.exportIdentity.perSecond >= 5000, `export ${r.exportIdentity.perSecond.toLocaleString('en')} records/s`),
    check(r.peakRssMb < 300, `peak RSS ${r.peakRssMb} MiB`),
  ];
}

function report(results: Result[]): string {
  const cpu = cpus();
  const lines = [
    '# Benchmarks',
    '',
    `Generated by \`npm run bench\` (bench/run.ts) on ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC:`,
    `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${mb(totalmem())} MiB RAM, Node ${process.version}.`,
    `Store: ${PRODUCTS.toLocaleString('en')} products (with variants and images), ${Math.round(PRODUCTS / 10).toLocaleString('en')} customers,`,
    `${Math.min(500, Math.round(PRODUCTS / 20))} orders, generated by one process; a fresh process then serves it on 127.0.0.1`,
    'and drives the load itself (undici pool, sharing the event loop, so figures are conservative);',
    'latencies are client-observed, milliseconds. Rate limits raised out of the way.',
    '',
    '| Measure | ' + results.map((r) => r.backend).join(' | ') + ' |',
    '|---|' + results.map(() => '---:|').join(''),
  ];
  const row = (label: string, value: (r: Result) => string) => lines.push(`| ${label} | ${results.map(value).join(' | ')} |`);
  row('Generate the store (s)', (r) => r.generateSeconds.toFixed(1));
  row(`List page, limit 50: p50 / p95 (ms, ${results[0]!.list50.count} pages walked by cursor)`, (r) => `${ms(r.list50.p50)} / ${ms(r.list50.p95)}`);
  row(`List page, limit 200: p50 / p95 (ms, ${results[0]!.list200.count} pages)`, (r) => `${ms(r.list200.p50)} / ${ms(r.list200.p95)}`);
  row(`Single product GET: p50 / p95 (ms, ${results[0]!.single.count} requests)`, (r) => `${ms(r.single.p50)} / ${ms(r.single.p95)}`);
  row(`List, limit 50, ${CONCURRENCY} concurrent clients: requests/s`, (r) => String(r.concurrent.perSecond));
  row(`… p50 / p95 under that load (ms)`, (r) => `${ms(r.concurrent.p50)} / ${ms(r.concurrent.p95)}`);
  row('Export, whole catalogue, limit 500: records/s (identity)', (r) => `${r.exportIdentity.perSecond.toLocaleString('en')} (${r.exportIdentity.records.toLocaleString('en')} in ${r.exportIdentity.seconds.toFixed(2)} s, ${mb1(r.exportIdentity.bytes)} MiB)`);
  row('Export, gzip: records/s', (r) => `${r.exportGzip.perSecond.toLocaleString('en')} (${mb1(r.exportGzip.bytes)} MiB on the wire)`);
  row('RSS of the serving process before load (MiB)', (r) => String(r.rssBeforeLoadMb));
  row('Peak RSS during the measurements (MiB)', (r) => String(r.peakRssMb));
  lines.push(
    '',
    '## Targets',
    '',
    'What we hold the service to (checked by reading this file after `npm run bench`, never asserted in tests,',
    'where timing depends on the machine and on what else runs):',
    '',
    '- list page (limit 50) p95 under 50 ms, single GET p95 under 20 ms on PostgreSQL with 10,000 products;',
    '- export at least 5,000 records/s per client (a 10,000-product catalogue in under 2 s);',
    '- RSS of a PostgreSQL-backed serving process under 300 MiB (the figure includes the load generator).',
    "  PGlite's process holds the database's WebAssembly heap as well, about 250 MiB more.",
    '',
    ...targetCheck(results),
    '',
    'PGlite runs the database inside the Node process on one thread, so its figures include the database',
    'work and do not scale with concurrent clients; it is the embedded default for one store, not the fleet',
    'back end. Figures move by a third between runs on a shared two-core machine; compare runs on one machine.',
    'Set `BENCH_DATABASE_URL=postgres://…` to include PostgreSQL (a scratch database is created and',
    'dropped), `BENCH_PRODUCTS` to change the store size.',
    '',
  );
  return lines.join('\n');
}

/**
 * Each step in its own process: the store is generated in one (its memory high-water mark, large
 * for PGlite's WebAssembly heap, must not count) and served and measured in a fresh one, so the RSS
 * figures are those of a server process on an existing store.
 */
async function runChild(args: string[]): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), ...args], {
    env: process.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`bench step ${args.join(' ')} exited ${code}`);
  return stdout.trim().split('\n').pop()!;
}

const openTarget = (kind: string, target: string) =>
  kind === 'pglite' ? openDatabase({ dataDir: target }) : openDatabase({ databaseUrl: target, poolSize: 10, applicationName: 'store-api-bench' });
const label = (kind: string) => (kind === 'pglite' ? 'PGlite (embedded, DATA_DIR)' : 'PostgreSQL');

const [step, kind, target, seconds] = process.argv.slice(2);
if (step === 'generate') {
  const database = await openTarget(kind!, target!);
  await migrateToLatest(database.db);
  const generated = await generateStore(label(kind!), database);
  await database.close();
  process.stdout.write(`${generated}\n`);
  process.exit(0);
} else if (step === 'measure') {
  const database = await openTarget(kind!, target!);
  const result = await benchBackend(label(kind!), database, Number(seconds));
  await database.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
} else {
  const results: Result[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'store-api-bench-'));
  try {
    const generated = await runChild(['generate', 'pglite', dataDir]);
    results.push(JSON.parse(await runChild(['measure', 'pglite', dataDir, generated])) as Result);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  if (process.env.BENCH_DATABASE_URL) {
    const scratch = await createScratchPostgres(process.env.BENCH_DATABASE_URL);
    try {
      const generated = await runChild(['generate', 'postgres', scratch.url]);
      results.push(JSON.parse(await runChild(['measure', 'postgres', scratch.url, generated])) as Result);
    } finally {
      await scratch.drop();
    }
  } else {
    log('BENCH_DATABASE_URL not set: PostgreSQL skipped');
  }
  const markdown = report(results);
  writeFileSync(OUTPUT, markdown);
  process.stdout.write(`${markdown}\nWritten to docs/benchmarks.md\n`);
}
