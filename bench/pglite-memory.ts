/**
 * Where the embedded default's memory goes (`node --import tsx bench/pglite-memory.ts`): what
 * `npm start` runs — `node bin/store-api.js all` on a DATA_DIR — over a store of `--products`
 * (default 100,000, the bench's size), under the list load (wrk, 8 connections, limit 200: the
 * page half-way, then the bench's DISTINCT_PAGES distinct pages in turn), then optionally (`--import`) during a CSV
 * stock import of every product (`--import-rows N` for fewer), with /healthz asked back to back
 * from this process (not the server's thread).
 *
 * The server runs with a preload that reports, on request, its own breakdown: RSS, V8 heap and
 * heap spaces of the HTTP thread, the V8 heap of each worker thread (the embedded database's first:
 * its external memory includes PGlite's WebAssembly memory, whose size never shrinks), and the
 * resident size of each kind of mapping (/proc/PID/smaps: `[heap]` is glibc's main arena, a large
 * anonymous mapping another thread's arena). Pass npm start's flags with `--node-arg` and its
 * environment (MALLOC_*) with `--env`, as decision 0043 did.
 * The generated store is kept in `--store DIR` (made when missing, then copied for each run), so
 * several configurations are compared on the same data: `--env KEY=VALUE` passes settings.
 * Prints one JSON line; never writes docs/benchmarks.md.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest, migrationNames } from '../src/schema/migrate.ts';
import { createToken } from '../src/tokens/token.service.ts';
import pg from 'pg';
import { activeCount, cursorAt, generateBenchStore } from './generate-store.ts';
import { EMBEDDED_NODE_ARGS, ensureWrk, freePort, generatedStoreStockCsv, log, postStockImport, startServer, wrk } from './bench-tools.ts';
import { DISTINCT_PAGES, apiPages, spreadPositions } from './distinct-pages.ts';
import { mappings } from './memory-soak.ts';

const { values: args } = parseArgs({
  options: {
    products: { type: 'string', default: '100000' },
    store: { type: 'string' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '2' },
    import: { type: 'boolean', default: false },
    'import-rows': { type: 'string' },
    env: { type: 'string', multiple: true, default: [] },
    role: { type: 'string', default: 'all' },
    /** Node flags of the server; default npm start's (EMBEDDED_NODE_ARGS). */
    'node-arg': { type: 'string', multiple: true },
    /** A PostgreSQL server: the same store generated into a scratch database there, `serve` on it (the ratio's other side). */
    postgres: { type: 'string' },
  },
});
const PRODUCTS = Number(args.products);
const CLI = fileURLToPath(new URL('../bin/store-api.js', import.meta.url));
const STORE = args.store ?? join(tmpdir(), `store-api-pglite-memory-${PRODUCTS}`);

// The preload: answers SIGUSR2 by writing its memory breakdown to PROBE_FILE. Worker threads are
// started with execArgv of their own (db/pglite-thread.ts), so the preload does not run in them:
// their heaps are read from here (Worker#getHeapStatistics), every Worker made being tracked.
const PROBE = `
import { writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { getHeapStatistics, getHeapSpaceStatistics } from 'node:v8';
import threads from 'node:worker_threads';
const workers = [];
const OriginalWorker = threads.Worker;
threads.Worker = class extends OriginalWorker { constructor(...args) { super(...args); workers.push(this); } };
syncBuiltinESMExports();
process.on('SIGUSR2', async () => {
  const mu = process.memoryUsage();
  const heap = getHeapStatistics();
  const threadHeaps = [];
  for (const worker of workers) {
    try {
      const h = await worker.getHeapStatistics();
      threadHeaps.push({ totalMb: h.total_heap_size / 1048576, usedMb: h.used_heap_size / 1048576, externalMb: h.external_memory / 1048576 });
    } catch {} // a worker that has ended
  }
  writeFileSync(process.env.PROBE_FILE, JSON.stringify({
    rssMb: mu.rss / 1048576, heapUsedMb: mu.heapUsed / 1048576, heapTotalMb: mu.heapTotal / 1048576,
    externalMb: mu.external / 1048576, arrayBuffersMb: mu.arrayBuffers / 1048576,
    mallocedMb: heap.malloced_memory / 1048576,
    spacesMb: Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, Math.round(s.space_size / 1048576)])),
    threadHeaps,
  }));
});
`;

type StoreMeta = { token: string; adminToken: string; cursor: string; cursors?: string[] };

async function ensureStore(): Promise<StoreMeta> {
  const meta = join(STORE, 'bench.json');
  if (existsSync(meta)) {
    const known = JSON.parse(readFileSync(meta, 'utf8')) as StoreMeta;
    if (known.cursors?.length === DISTINCT_PAGES) return known;
    // A store made before the distinct pages were measured (or with another count): their cursors are read once.
    const database = await openDatabase({ dataDir: STORE });
    known.cursors = (await spreadPositions(database.db, DISTINCT_PAGES, 200)).cursors;
    await database.close();
    writeFileSync(meta, JSON.stringify(known));
    return known;
  }
  log(`generating ${PRODUCTS} products into ${STORE}`);
  const database = await openDatabase({ dataDir: STORE, knownMigrations: migrationNames() });
  await migrateToLatest(database.db);
  await generateBenchStore(database.db, {
    products: PRODUCTS,
    customers: Math.round(PRODUCTS / 10),
    orders: Math.round(PRODUCTS / 5),
    movements: Math.round(PRODUCTS / 2),
  });
  const { token } = await createToken(database.db, { name: 'bench' });
  const { token: adminToken } = await createToken(database.db, { name: 'bench-admin', scopes: ['admin'] });
  const cursor = await cursorAt(database, Math.floor((await activeCount(database)) / 2));
  const { cursors } = await spreadPositions(database.db, DISTINCT_PAGES, 200);
  await database.close();
  writeFileSync(meta, JSON.stringify({ token, adminToken, cursor, cursors }));
  return { token, adminToken, cursor, cursors };
}

if (args.postgres) {
  await postgresList(args.postgres);
  process.exit(0);
}

/**
 * The list load on `serve` over PostgreSQL with the same generated store (the half-way page, then
 * the distinct pages as `npm run bench` walks them: issue 25's ratio); prints one JSON line.
 */
async function postgresList(base: string): Promise<void> {
  const name = `store_api_plm_${Date.now()}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const database = await openDatabase({ databaseUrl: url.toString() });
    await migrateToLatest(database.db);
    await generateBenchStore(database.db, {
      products: PRODUCTS,
      customers: Math.round(PRODUCTS / 10),
      orders: Math.round(PRODUCTS / 5),
      movements: Math.round(PRODUCTS / 2),
    });
    const { token } = await createToken(database.db, { name: 'bench' });
    const cursor = await cursorAt(database, Math.floor((await activeCount(database)) / 2));
    const { cursors } = await spreadPositions(database.db, DISTINCT_PAGES, 200);
    await database.close();
    ensureWrk();
    const port = await freePort();
    server = await startServer(
      [CLI, 'serve'],
      { DATABASE_URL: url.toString(), PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', RATE_LIMIT_STANDARD: '1000000' },
      port,
    );
    const page = `${server.origin}/api/v1/products?limit=200&cursor=${encodeURIComponent(cursor)}`;
    const load = { connections: 8, seconds: Number(args.seconds), headers: { Authorization: `Bearer ${token}` } };
    await wrk(page, { ...load, seconds: 2 });
    const runs = [];
    for (let i = 0; i < Number(args.rounds); i++) runs.push(await wrk(page, load));
    const distinctPages = apiPages(server.origin, server.child.pid!, cursors, 200, load);
    const distinctRuns = [];
    for (let i = 0; i < Number(args.rounds); i++) distinctRuns.push(await distinctPages());
    console.log(
      JSON.stringify({
        products: PRODUCTS,
        postgres: true,
        listPerSecond: runs.map((r) => Math.round(r.perSecond)),
        listP50Ms: runs.map((r) => r.p50),
        distinctPerSecond: distinctRuns.map((r) => Math.round(r.perSecond)),
        distinctCpuMsPerPage: distinctRuns.map((r) => Number(r.cpuMsPerPage!.toFixed(2))),
        memory: server.memory(),
      }),
    );
  } finally {
    await server?.stop();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

const { token, adminToken, cursor, cursors } = await ensureStore();
ensureWrk();
const work = mkdtempSync(join(tmpdir(), 'store-api-pglite-memory-run-'));
const dataDir = join(work, 'data');
cpSync(STORE, dataDir, { recursive: true });
rmSync(join(dataDir, 'bench.json'));
const probeModule = join(work, 'probe.mjs');
writeFileSync(probeModule, PROBE);
const probeFile = join(work, 'probe.json');
const extraEnv = Object.fromEntries(args.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));

const port = await freePort();
const server = await startServer(
  [...(args['node-arg'] ?? EMBEDDED_NODE_ARGS), '--import', probeModule, CLI, args.role],
  {
    DATA_DIR: dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    SEED_DEMO: 'false',
    RATE_LIMIT_STANDARD: '1000000',
    RATE_LIMIT_EXPORT: '1000000',
    PROBE_FILE: probeFile,
    ...extraEnv,
  },
  port,
);
async function probe(): Promise<Record<string, unknown>> {
  rmSync(probeFile, { force: true });
  server.child.kill('SIGUSR2');
  for (let i = 0; i < 200 && !existsSync(probeFile); i++) await new Promise((r) => setTimeout(r, 25));
  const inside = JSON.parse(readFileSync(probeFile, 'utf8')) as Record<string, unknown>;
  const round = (v: unknown): unknown =>
    typeof v === 'number'
      ? Math.round(v)
      : Array.isArray(v)
        ? v.map(round)
        : v && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, round(x)]))
          : v;
  return { ...(round(inside) as Record<string, unknown>), peakMb: server.memory().peakMb, mappingsMb: mappings(server.child.pid!) };
}
/** Resets the process's peak (VmHWM) so the next phase's is its own (Linux ≥ 4.0; otherwise the peak since start). */
function resetPeak(): void {
  try {
    writeFileSync(`/proc/${server.child.pid}/clear_refs`, '5');
  } catch {
    // not allowed here
  }
}

const result: Record<string, unknown> = { products: PRODUCTS, role: args.role, env: extraEnv, nodeArgs: args['node-arg'] ?? EMBEDDED_NODE_ARGS };
try {
  result.idle = await probe();
  resetPeak();
  const url = `${server.origin}/api/v1/products?limit=200&cursor=${encodeURIComponent(cursor)}`;
  const load = { connections: 8, seconds: Number(args.seconds), headers: { Authorization: `Bearer ${token}` } };
  await wrk(url, { ...load, seconds: 2 });
  const runs = [];
  for (let i = 0; i < Number(args.rounds); i++) runs.push(await wrk(url, load));
  result.listPerSecond = runs.map((r) => Math.round(r.perSecond));
  result.listP50Ms = runs.map((r) => r.p50);
  result.afterList = await probe();
  const distinctPages = apiPages(server.origin, server.child.pid!, cursors!, 200, load);
  resetPeak();
  const distinctRuns = [];
  for (let i = 0; i < Number(args.rounds); i++) distinctRuns.push(await distinctPages());
  result.distinctPerSecond = distinctRuns.map((r) => Math.round(r.perSecond));
  result.distinctCpuMsPerPage = distinctRuns.map((r) => Number(r.cpuMsPerPage!.toFixed(2)));
  result.afterDistinct = await probe();
  log(JSON.stringify(result));

  if (args.import) {
    resetPeak();
    const IMPORT_ROWS = Number(args['import-rows'] ?? PRODUCTS);
    const importing = postStockImport(server.origin, adminToken, generatedStoreStockCsv(IMPORT_ROWS));
    const latencies: number[] = [];
    while (!importing.done()) {
      const t = performance.now();
      await fetch(`${server.origin}/healthz`).then((r) => r.arrayBuffer());
      latencies.push(performance.now() - t);
    }
    const imported = await importing.answered;
    latencies.sort((a, b) => a - b);
    const pct = (p: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0);
    result.import = {
      status: imported.status,
      ms: Math.round(imported.ms),
      body: imported.body.slice(0, 120),
      healthz: latencies.length,
      p50: pct(0.5),
      p95: pct(0.95),
      p99: pct(0.99),
      max: Math.round(latencies.at(-1) ?? 0),
    };
    result.afterImport = await probe();
  }
} finally {
  await server.stop();
  rmSync(work, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
