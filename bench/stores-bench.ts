/**
 * The multi-store benchmarks (issue 39), `npm run bench -- --stores`: run by bench/run.ts, which
 * writes their report to docs/benchmarks-stores.md. Two parts, each on scratch databases of the
 * bench's PostgreSQL server, dropped at the end:
 *
 * 1. Scale: a database of `stores` stores × `productsPerStore` products (bench/generate-stores.ts)
 *    against a database of one store of the same catalogue, both served by `serve` processes:
 *    - the list (limit 200) of one store of the many — its page half-way (p99) and its distinct
 *      pages in turn (pages/s, p99) — against the same store alone, same load, alternated rounds;
 *      and distinct pages across 1,000 stores (each request another store's key and page);
 *    - store creation through the platform API (POST /platform/api/v1/stores with a first key),
 *      p50 / p99 among many stores and alone;
 *    - `serve`'s RSS after requests with the keys of 10, 100, 1,000, 10,000 … distinct stores;
 *    - webhook deliveries across 1,000 endpoints of 1,000 stores (an origin each: 127.x.y.z, one
 *      receiver process) against one endpoint of one store, same number of deliveries, alternated;
 *    - `worker`'s RSS after deliveries to the endpoints of 10, 100, 1,000, 10,000 … stores.
 * 2. Fairness: store A (an import-sized catalogue, a backlog of deliveries to a failing endpoint)
 *    and store B (a catalogue like the others). B's change → receiver latency and B's list p99
 *    (wrk over its distinct pages) while A's endpoint is enabled with its backlog and A runs a CSV
 *    stock import (from the import's start until the worker's poller has passed A's last import
 *    event), against the same with A idle (its endpoint disabled, no import), alternated rounds.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { openDatabase, type DatabaseHandle } from '../src/db/database.ts';
import type { Database } from '../src/db/schema.ts';
import { migrateToLatest } from '../src/schema/migrate.ts';
import { runWrite } from '../src/db/write-clock.ts';
import { inStore } from '../src/db/store-scope.ts';
import { updateProduct } from '../src/catalog/catalog.service.ts';
import { generateSecret } from '../src/webhooks/webhook-signing.ts';
import { pollerCaughtUp } from '../src/webhooks/event-poller.ts';
import {
  alternate,
  freePort,
  log,
  postStockImport,
  SERVER_NODE_ARGS,
  spread,
  startServer,
  wrk,
  wrkUntilStopped,
  type LoadResult,
  type ServerProcess,
  type Spread,
} from './bench-tools.ts';
import { apiPages, type PagesResult } from './distinct-pages.ts';
import { dropDefaultStore, generateStores, insertKeys, productId, storeCursorAt, storeCursors, storeId } from './generate-stores.ts';

const CLI = fileURLToPath(new URL('../bin/store-api.js', import.meta.url));
const RECEIVER = fileURLToPath(new URL('./webhook-receiver.js', import.meta.url));
const WRK_PATHS_SCRIPT = fileURLToPath(new URL('./wrk-paths.lua', import.meta.url));
const WRK_STORE_PATHS_SCRIPT = fileURLToPath(new URL('./wrk-store-paths.lua', import.meta.url));

export interface StoresOptions {
  databaseUrl: string;
  stores: number;
  productsPerStore: number;
  layout: 'contiguous' | 'scattered';
  children: boolean;
  rounds: number;
  seconds: number;
  connections: number;
  limit: number;
  /** Stores created through the platform API per round, in each database. */
  creations: number;
  /** Deliveries per throughput round. */
  deliveries: number;
  /** Stores whose endpoints share the deliveries of the spread round (1,000). */
  deliveryStores: number;
  /** Longest a delivery round is timed; what is not delivered by then is dropped (the rate is of what arrived). */
  deliveryCapSeconds: number;
  /**
   * Fairness: rows of A's import, A's backlog of deliveries, the idle phase's shortest length (it
   * lasts as long as the last busy phase when that was longer), the busy phase's cap.
   */
  fairImportRows: number;
  fairBacklog: number;
  fairIdleSeconds: number;
  fairCapSeconds: number;
  /**
   * A's import answered when it ends, in one transaction in `serve` (IMPORT_JOB_ROWS above it: the
   * measurement of 2026-11-29), instead of as production runs it: a job (202) the `worker` runs in
   * committed steps (IMPORT_JOB_ROWS' default, decision 0060), polled until it ends.
   */
  fairImportSync: boolean;
  /** Rounds of the fairness part (each pair of phases lasts minutes: fewer than the other parts'). */
  fairRounds: number;
  /** Connections of B's list load during the fairness phases. */
  fairConnections: number;
  /** `ALTER DATABASE … SET jit = off` on the scratch databases (PostgreSQL's default is jit on). */
  jitOff: boolean;
  /** Which parts to run. */
  scale: boolean;
  fairness: boolean;
}

export interface ScaleResults {
  generateSeconds: number;
  indexSeconds: number;
  oneGenerateSeconds: number;
  databaseMb: number;
  activePerStore: number;
  distinctPages: number;
  hot: { oneP99: Spread; manyP99: Spread; oneRps: Spread; manyRps: Spread; p99Ratio: Spread };
  distinct: { one: Spread; many: Spread; oneP99: Spread; manyP99: Spread; oneCpuMs: Spread; manyCpuMs: Spread; slowdown: Spread; p99Ratio: Spread };
  across: { stores: number; pages: number; many: Spread; manyP99: Spread; manyCpuMs: Spread; slowdown: Spread };
  creation: { samples: number; oneP50: number; oneP99: number; manyP50: number; manyP99: number };
  serveRss: { warmMb: number; stages: { stores: number; rssMb: number; peakMb: number; seconds: number }[] };
  delivery: { deliveries: number; endpoints: number; one: Spread; spread: Spread; ratio: Spread; capped: number };
  workerRss: {
    idleMb: number;
    warmMb: number;
    warmDeliveries: number;
    /** Deliveries to one store's endpoint before each stage's figure (the same load at every stage). */
    steadyDeliveries: number;
    /** rssMb: after the steady load; stageRssMb: right after the stage's own deliveries. */
    stages: { stores: number; stageRssMb: number; rssMb: number; peakMb: number; seconds: number; delivered: boolean }[];
  };
}

interface PhaseFigures {
  seconds: number;
  listP99: number;
  listP50: number;
  listRps: number;
  changes: number;
  /** Changes not at the receiver by the end of the wait. */
  missing: number;
  changeP50: number;
  changeP99: number;
  changeMax: number;
  /**
   * B's deliveries of the phase, by stage (ms, p50 and p99): from the event's stamp to the start of
   * the poll that fanned it out (the delivery's created_at), from there to the first attempt's
   * start, and the first attempt itself.
   */
  toPollP50: number;
  toPollP99: number;
  toAttemptP50: number;
  toAttemptP99: number;
  attemptP50: number;
  attemptP99: number;
}

export interface FairnessResults {
  generateSeconds: number;
  backlog: number;
  backlogSeconds: number;
  busy: (PhaseFigures & { importSeconds: number; importStatus: number; fanoutSeconds: number | undefined; importEvents: number; failedAttempts: number })[];
  idle: PhaseFigures[];
  listRatio: Spread;
  changeRatio: Spread;
}

export interface StoresResults {
  scale?: ScaleResults;
  fairness?: FairnessResults;
  totalSeconds: number;
}

const serverEnv = (extra: Record<string, string>): Record<string, string> => ({
  LOG_LEVEL: 'warn',
  SEED_DEMO: 'false',
  RATE_LIMIT_STANDARD: '1000000',
  RATE_LIMIT_EXPORT: '1000000',
  HOST: '127.0.0.1',
  ...extra,
});

const f0 = (n: number) => Math.round(n).toLocaleString('en');
const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);
const range = (s: Spread, fmt: (n: number) => string) => `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;
const ratios = (a: number[], b: number[]) => a.map((x, i) => x / b[i]!);
const at = (sorted: number[], q: number) => (sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A scratch database on the bench's server, dropped by `drop`. */
async function scratch(serverUrl: string, label: string, jitOff = false): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const name = `bench_${label}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  // --stores-jit-off: the database's sessions never JIT-compile (what an operator's
  // `ALTER DATABASE … SET jit = off` gives every connection made after it).
  if (jitOff) await admin.query(`ALTER DATABASE ${name} SET jit = off`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: async () => {
      const dropper = new pg.Client({ connectionString: serverUrl });
      await dropper.connect();
      await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await dropper.end();
    },
  };
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs: number, everyMs = 5): Promise<boolean> {
  const end = performance.now() + timeoutMs;
  while (!(await probe())) {
    if (performance.now() > end) {
      log(`  (gave up waiting for ${what} after ${f0(timeoutMs / 1000)} s)`);
      return false;
    }
    await sleep(everyMs);
  }
  return true;
}

/** A webhook receiver process (bench/webhook-receiver.js). */
async function receiver(
  host: string,
  status = 204,
): Promise<{ port: number; origin: string; child: ChildProcess; count(): Promise<number>; arrivals(): Promise<Record<string, number[]>> }> {
  const port = await freePort();
  const child = spawn(process.execPath, [RECEIVER, String(port), host, String(status)], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(child.stdout!, 'data');
  const origin = `http://127.0.0.1:${port}`;
  return {
    port,
    origin,
    child,
    count: async () => Number(await (await fetch(`${origin}/count`)).text()),
    arrivals: async () => (await (await fetch(`${origin}/arrivals`)).json()) as Record<string, number[]>,
  };
}

/** Store n's endpoint host: a loopback address of its own (127.c.b.a), so every store is another origin to the worker. */
function loopbackHost(n: number): string {
  return `127.${1 + (Math.floor(n / (254 * 256)) % 254)}.${Math.floor(n / 254) % 256}.${(n % 254) + 1}`;
}

/** One endpoint per store (as the owner, in one write-clock transaction: stamped like the service's), disabled unless `enabled`. */
async function insertEndpoints(db: Kysely<Database>, entries: { store: number; url: string; eventTypes: string[] }[], enabled: boolean): Promise<void> {
  for (let i = 0; i < entries.length; i += 5000) {
    const slice = entries.slice(i, i + 5000);
    await runWrite(db, async ({ trx, stamp }) => {
      await sql`
        INSERT INTO webhook_endpoints (store_id, id, url, description, event_types, enabled, secret, created_at, updated_at)
        SELECT md5('bench-store-' || e.n)::uuid, e.id, e.url, NULL, string_to_array(e.types, ',')::text[], ${enabled}, e.secret, ${stamp}::timestamptz, ${stamp}::timestamptz
        FROM unnest(${slice.map((e) => e.store)}::int[], ${slice.map(() => randomUUID())}::uuid[], ${slice.map((e) => e.url)}::text[],
                    ${slice.map((e) => e.eventTypes.join(','))}::text[], ${slice.map(() => generateSecret())}::text[]) AS e(n, id, url, types, secret)
      `.execute(trx);
    });
  }
}

/**
 * Enables the endpoints of exactly these stores (the others disabled), their breakers closed. Only
 * the rows that change are written, then vacuumed and analysed: a bench that rewrote all 10,000
 * endpoints at every step would leave the planner estimates no deployment has.
 */
async function enableEndpointsOf(db: Kysely<Database>, stores: number[]): Promise<void> {
  const ids = stores.map(storeId);
  await sql`UPDATE webhook_endpoints SET enabled = (store_id = ANY(${ids}::uuid[])), consecutive_failures = 0, paused_until = NULL
    WHERE enabled IS DISTINCT FROM (store_id = ANY(${ids}::uuid[])) OR consecutive_failures > 0 OR paused_until IS NOT NULL`.execute(db);
  await sql`VACUUM ANALYZE webhook_endpoints`.execute(db);
}

/**
 * `count` product.updated events for each store listed (its products' stored documents in turn),
 * in ONE write-clock transaction, as webhook-bench.ts's appendEvents for many stores.
 */
async function appendStoreEvents(db: Kysely<Database>, entries: { store: number; count: number }[], productsPerStore: number): Promise<void> {
  await runWrite(db, async ({ trx, stamp }) => {
    await sql`
      INSERT INTO events (store_id, id, type, resource_type, resource_id, data, created_at)
      SELECT p.store_id, gen_random_uuid(), 'product.updated', 'product', p.id::text, p.doc, ${stamp}::timestamptz
      FROM unnest(${entries.map((e) => e.store)}::int[], ${entries.map((e) => e.count)}::int[]) AS x(s, c)
      CROSS JOIN LATERAL generate_series(1, x.c) i
      -- One primary-key probe per event (a join was planned as a scan of every store's products).
      CROSS JOIN LATERAL (SELECT store_id, id, doc FROM products WHERE id = md5('p' || x.s || '-' || (1 + (i - 1) % ${productsPerStore}::int))::uuid LIMIT 1) p
    `.execute(trx);
  });
}

/** Whether the worker's poller has fanned out every event written so far. */
async function pollerAtTailOf(db: Kysely<Database>): Promise<boolean> {
  return pollerCaughtUp(db);
}

async function databaseMb(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ mb: string }>`SELECT pg_database_size(current_database()) / 1048576 AS mb`.execute(db);
  return Number(rows[0]!.mb);
}

function pathsFile(lines: string[]): string {
  const file = join(mkdtempSync(join(tmpdir(), 'store-api-bench-stores-')), 'paths.txt');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** GETs `paths` (each with its own key) through `connections` keep-alive connections; fails on a non-200. */
async function requestAll(origin: string, requests: { token: string; path: string }[], connections: number): Promise<void> {
  const pool = new HttpPool(origin, { connections });
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        for (let r = requests[next++]; r; r = requests[next++]) {
          const res = await pool.request({ path: r.path, method: 'GET', headers: { authorization: `Bearer ${r.token}` } });
          const body = await res.body.text();
          if (res.statusCode !== 200) throw new Error(`GET ${r.path} answered ${res.statusCode}: ${body.slice(0, 300)}`);
        }
      }),
    );
  } finally {
    await pool.close();
  }
}

/** Stages of "distinct stores touched": 10, 100, 1,000, … up to `stores` (which is the last). */
function stagesUpTo(stores: number): number[] {
  const stages: number[] = [];
  for (let k = 10; k < stores; k *= 10) stages.push(k);
  stages.push(stores);
  return stages;
}

// ---------------------------------------------------------------------------------------------
// 1. Scale
// ---------------------------------------------------------------------------------------------

async function benchScale(opts: StoresOptions): Promise<ScaleResults> {
  const many = await scratch(opts.databaseUrl, 'stores', opts.jitOff);
  const one = await scratch(opts.databaseUrl, 'store1', opts.jitOff);
  log(`stores: scratch databases ${many.name} (${f0(opts.stores)} stores) and ${one.name} (one store)`);
  const manyDb = await openDatabase({ databaseUrl: many.url, poolSize: 8, applicationName: 'store-api-bench' });
  const oneDb = await openDatabase({ databaseUrl: one.url, poolSize: 4, applicationName: 'store-api-bench' });
  const servers: ServerProcess[] = [];
  const children: ChildProcess[] = [];
  const stop = async (s: ServerProcess) => {
    await s.stop();
    servers.splice(servers.indexOf(s), 1);
  };
  try {
    const size = { productsPerStore: opts.productsPerStore, children: opts.children, layout: opts.layout };
    await migrateToLatest(oneDb.db);
    await dropDefaultStore(oneDb.db);
    log(`stores: generating one store of ${f0(opts.productsPerStore)} products`);
    const oneGen = await generateStores(oneDb.db, { ...size, stores: 1 }, { streams: 1 });
    await migrateToLatest(manyDb.db);
    await dropDefaultStore(manyDb.db);
    log(`stores: generating ${f0(opts.stores)} stores × ${f0(opts.productsPerStore)} products (${f0(opts.stores * opts.productsPerStore)}, ${opts.layout})`);
    const manyGen = await generateStores(manyDb.db, { ...size, stores: opts.stores }, { streams: 3 });
    log(`stores: generated in ${f1(manyGen.seconds)} s (indexes ${f1(manyGen.indexSeconds)} s)`);
    const sizeMb = await databaseMb(manyDb.db);
    const manyKeys = await insertKeys(manyDb.db, 1, opts.stores);
    const [oneKey] = await insertKeys(oneDb.db, 1, 1);

    // The measured store: half-way through the stores.
    const measured = Math.ceil(opts.stores / 2);
    const manyKey = manyKeys[measured - 1]!;
    const platformToken = randomBytes(24).toString('hex');
    const start = async (url: string, extra: Record<string, string> = {}) => {
      const port = await freePort();
      const server = await startServer(
        [...SERVER_NODE_ARGS, CLI, 'serve'],
        serverEnv({ DATABASE_URL: url, PORT: String(port), PLATFORM_API_TOKEN: platformToken, ...extra }),
        port,
      );
      servers.push(server);
      return server;
    };
    const serveMany = await start(many.url);
    const serveOne = await start(one.url);

    // --- The list: one store among many against the same store alone.
    const {
      rows: [activeRow],
    } = await sql<{ n: string }>`SELECT count(*) AS n FROM products WHERE store_id = ${storeId(1)}::uuid AND is_active`.execute(oneDb.db);
    const active = Number(activeRow!.n);
    const hotPath = async (db: Kysely<Database>, store: string) =>
      `/api/v1/products?limit=${opts.limit}&cursor=${encodeURIComponent(await storeCursorAt(db, store, Math.floor(active / 2)))}`;
    const hotOne = `${serveOne.origin}${await hotPath(oneDb.db, storeId(1))}`;
    const hotMany = `${serveMany.origin}${await hotPath(manyDb.db, manyKey.storeId)}`;
    const cursorsOne = await storeCursors(oneDb.db, storeId(1), 2000, opts.limit);
    const cursorsMany = await storeCursors(manyDb.db, manyKey.storeId, 2000, opts.limit);
    const load = (token: string) => ({ connections: opts.connections, seconds: opts.seconds, headers: { Authorization: `Bearer ${token}` } });
    const distinctOne = apiPages(serveOne.origin, serveOne.child.pid!, cursorsOne, opts.limit, load(oneKey!.token));
    const distinctMany = apiPages(serveMany.origin, serveMany.child.pid!, cursorsMany, opts.limit, load(manyKey.token));
    // Across stores: up to 1,000 stores spread over the database, each request another store's
    // page with that store's key; as many pages in all as the one store's distinct pages (at least
    // one per store), so the page cache holds as little of them.
    const acrossCount = Math.min(1000, opts.stores);
    const pagesPerStore = Math.max(1, Math.ceil(cursorsMany.length / acrossCount));
    const across: { store: number; g: number }[] = [];
    for (let j = 0; j < pagesPerStore; j++)
      for (let i = 0; i < acrossCount; i++) {
        let g = 1 + ((i * 7919 + j * 104_729) % Math.max(1, opts.productsPerStore - 250));
        if (g % 10 === 0) g++;
        across.push({ store: 1 + Math.floor((i * opts.stores) / acrossCount), g });
      }
    const { rows: acrossRows } = await sql<{ n: number; iso: string; id: string }>`
      SELECT x.n, iso_utc(p.last_modified) AS iso, p.id::text AS id
      FROM unnest(${across.map((a) => a.store)}::int[], ${across.map((a) => a.g)}::int[]) WITH ORDINALITY AS x(n, g, o)
      CROSS JOIN LATERAL (SELECT last_modified, id FROM products WHERE id = md5('p' || x.n || '-' || x.g)::uuid LIMIT 1) p
      ORDER BY x.o`.execute(manyDb.db);
    const { formatCursor } = await import('../src/shared/cursor.ts');
    const acrossFile = pathsFile(
      acrossRows.map((r) => `${manyKeys[r.n - 1]!.token} /api/v1/products?limit=${opts.limit}&cursor=${encodeURIComponent(formatCursor(r.iso, r.id))}`),
    );
    const acrossPages = async (): Promise<PagesResult> => {
      const { processCpuMs } = await import('./distinct-pages.ts');
      const before = processCpuMs(serveMany.child.pid!);
      const t = performance.now();
      const result = await wrk(serveMany.origin, {
        connections: opts.connections,
        seconds: opts.seconds,
        headers: {},
        script: WRK_STORE_PATHS_SCRIPT,
        env: { PATHS_FILE: acrossFile },
      });
      const seconds = (performance.now() - t) / 1000;
      return { ...result, cpuMsPerPage: (processCpuMs(serveMany.child.pid!) - before) / (result.perSecond * seconds) };
    };
    log('stores: list warm-up');
    for (const [url, key] of [
      [hotOne, oneKey!.token],
      [hotMany, manyKey.token],
    ] as const)
      await wrk(url, { ...load(key), seconds: 2 });
    await distinctOne();
    await distinctMany();
    await acrossPages();
    const reads = await alternate<PagesResult>(opts.rounds, {
      'one store alone: page half-way (wrk)': () => wrk(hotOne, load(oneKey!.token)),
      [`one of ${f0(opts.stores)} stores: page half-way (wrk)`]: () => wrk(hotMany, load(manyKey.token)),
      'one store alone: distinct pages (wrk)': distinctOne,
      [`one of ${f0(opts.stores)} stores: distinct pages (wrk)`]: distinctMany,
      [`${f0(acrossCount)} stores' pages in turn (wrk)`]: acrossPages,
    });
    const [hotOneR, hotManyR, distOneR, distManyR, acrossR] = Object.values(reads) as PagesResult[][];

    // --- Store creation through the platform API, alternated between the two databases.
    const creationLatencies = { one: [] as number[], many: [] as number[] };
    const createStores = async (origin: string, into: number[], tag: string) => {
      const pool = new HttpPool(origin, { connections: 1 });
      try {
        for (let i = 0; i < opts.creations; i++) {
          const t = performance.now();
          const res = await pool.request({
            path: '/platform/api/v1/stores',
            method: 'POST',
            headers: { authorization: `Bearer ${platformToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name: `Created ${tag} ${randomUUID()}`, key: { name: 'first', scopes: ['products:read'] } }),
          });
          const body = await res.body.text();
          into.push(performance.now() - t);
          if (res.statusCode !== 201) throw new Error(`POST /platform/api/v1/stores answered ${res.statusCode}: ${body.slice(0, 300)}`);
        }
      } finally {
        await pool.close();
      }
      return { perSecond: 0, p50: 0, p99: 0 };
    };
    log(`stores: ${opts.creations} store creations per round through the platform API`);
    await alternate<LoadResult>(opts.rounds, {
      'create stores, one-store database': () => createStores(serveOne.origin, creationLatencies.one, 'one'),
      [`create stores, ${f0(opts.stores)}-store database`]: () => createStores(serveMany.origin, creationLatencies.many, 'many'),
    });
    for (const l of Object.values(creationLatencies)) l.sort((a, b) => a - b);
    await stop(serveMany);
    await stop(serveOne);

    // --- serve's RSS as requests use the keys of more and more stores.
    log("stores: `serve`'s RSS as the keys of more and more stores are used");
    const fresh = await start(many.url);
    // Warm-up on one store's distinct pages: the page cache full, the code compiled.
    const warmPages = apiPages(fresh.origin, fresh.child.pid!, cursorsMany, opts.limit, { ...load(manyKey.token), seconds: 5 });
    await warmPages();
    const warmMb = fresh.memory().rssMb;
    const serveStages: ScaleResults['serveRss']['stages'] = [];
    let touched = 0;
    for (const k of stagesUpTo(opts.stores)) {
      const t = performance.now();
      const requests = manyKeys.slice(touched, k).map((key) => ({ token: key.token, path: `/api/v1/products?limit=${opts.limit}` }));
      await requestAll(fresh.origin, requests, 2 * opts.connections);
      touched = k;
      await sleep(1000);
      const m = fresh.memory();
      serveStages.push({ stores: k, rssMb: m.rssMb, peakMb: m.peakMb, seconds: (performance.now() - t) / 1000 });
      log(`  ${f0(k)} stores' keys used: RSS ${m.rssMb} MiB (peak ${m.peakMb})`);
    }
    await stop(fresh);

    // --- Deliveries: 1,000 endpoints of 1,000 stores against one endpoint, then the worker's RSS by stores.
    const receiving = await receiver('0.0.0.0');
    children.push(receiving.child);
    await insertEndpoints(
      manyDb.db,
      manyKeys.map((k) => ({ store: k.store, url: `http://${loopbackHost(k.store)}:${receiving.port}/hook/${k.store}`, eventTypes: ['product.updated'] })),
      false,
    );
    const startWorker = async () => {
      const metricsPort = await freePort();
      const worker = await startServer(
        [...SERVER_NODE_ARGS, CLI, 'worker'],
        { DATABASE_URL: many.url, METRICS_PORT: String(metricsPort), LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
        metricsPort,
      );
      servers.push(worker);
      return worker;
    };
    let worker = await startWorker();
    const spreadStores = Array.from({ length: Math.min(opts.deliveryStores, opts.stores - 1) }, (_, i) => 2 + i);
    /**
     * Appends the events (not timed), then times their deliveries from the commit to the last
     * arrival, at most `capMs`: the rate is what arrived ÷ that time. What is left undelivered at the
     * cap is removed from the queue (pending, unclaimed), so the next measurement starts empty.
     */
    const deliver = async (
      entries: { store: number; count: number }[],
      capMs: number,
    ): Promise<{ perSecond: number; seconds: number; delivered: boolean; received: number }> => {
      const total = entries.reduce((n, e) => n + e.count, 0);
      const before = await receiving.count();
      await appendStoreEvents(manyDb.db, entries, opts.productsPerStore);
      const t = performance.now();
      const delivered = await until('deliveries', async () => (await receiving.count()) >= before + total, capMs, 10);
      const seconds = (performance.now() - t) / 1000;
      const received = (await receiving.count()) - before;
      if (!delivered) {
        await until('the poller at the tail', () => pollerAtTailOf(manyDb.db), 300_000, 200);
        await sql`DELETE FROM webhook_deliveries WHERE status IN ('pending', 'failed') AND locked_by IS NULL`.execute(manyDb.db);
        await sleep(2000);
      }
      return { perSecond: received / seconds, seconds, delivered, received };
    };
    log('stores: delivery warm-up');
    await enableEndpointsOf(manyDb.db, [1]);
    await deliver([{ store: 1, count: 500 }], 60_000);
    await enableEndpointsOf(manyDb.db, spreadStores);
    await deliver(
      spreadStores.map((s) => ({ store: s, count: 1 })),
      60_000,
    );
    const perStore = Math.max(1, Math.round(opts.deliveries / spreadStores.length));
    const spreadTotal = perStore * spreadStores.length;
    const capped: boolean[] = [];
    const deliveries = await alternate<LoadResult>(opts.rounds, {
      'deliveries: one endpoint of one store': async () => {
        await enableEndpointsOf(manyDb.db, [1]);
        const r = await deliver([{ store: 1, count: spreadTotal }], opts.deliveryCapSeconds * 1000);
        capped.push(!r.delivered);
        return { perSecond: r.perSecond, p50: 0, p99: 0 };
      },
      [`deliveries: ${f0(spreadStores.length)} endpoints of ${f0(spreadStores.length)} stores`]: async () => {
        await enableEndpointsOf(manyDb.db, spreadStores);
        const r = await deliver(
          spreadStores.map((s) => ({ store: s, count: perStore })),
          opts.deliveryCapSeconds * 1000,
        );
        capped.push(!r.delivered);
        log(`    ${f0(r.received)} of ${f0(spreadTotal)} in ${f1(r.seconds)} s: ${f0(r.perSecond)}/s`);
        return { perSecond: r.perSecond, p50: 0, p99: 0 };
      },
    });
    const [deliverOne, deliverSpread] = Object.values(deliveries).map((rs) => rs.map((r) => r.perSecond));
    await stop(worker);

    // The worker's memory as it delivers to the endpoints of more and more stores, at most
    // deliveryStores of them enabled at a time (a claim walks every enabled endpoint: with all
    // 10,000 enabled each claim would take seconds on this machine).
    log("stores: `worker`'s RSS as deliveries reach the endpoints of more and more stores");
    await enableEndpointsOf(manyDb.db, []);
    worker = await startWorker();
    await sleep(2000);
    const idleMb = worker.memory().rssMb;
    // Warm-up, as `serve`'s above: deliveries to one store's endpoint grow the young generation and
    // compile the code, which the first stage would otherwise count as the memory of its stores.
    const warmDeliveries = 5000;
    await enableEndpointsOf(manyDb.db, [1]);
    await deliver([{ store: 1, count: warmDeliveries }], 120_000);
    await sleep(1000);
    const warmWorkerMb = worker.memory().rssMb;
    // Each stage's figure is read after the same load, deliveries to one store's endpoint: V8 sizes
    // the young generation by the recent allocation rate (4–16 MiB here at --max-semi-space-size=8),
    // so a figure read right after a stage's own deliveries, 10 of them or 9,000, differed by the
    // load of the stage rather than by the stores delivered to (both figures are reported).
    const steadyDeliveries = 1000;
    const steady = async () => {
      await enableEndpointsOf(manyDb.db, [1]);
      await deliver([{ store: 1, count: steadyDeliveries }], 120_000);
      await sleep(1000);
      return worker.memory();
    };
    const workerStages: ScaleResults['workerRss']['stages'] = [];
    let reached = 0;
    for (const k of stagesUpTo(opts.stores)) {
      let seconds = 0;
      let delivered = true;
      for (let from = reached; from < k; from += opts.deliveryStores) {
        const stores = Array.from({ length: Math.min(opts.deliveryStores, k - from) }, (_, i) => from + 1 + i);
        await enableEndpointsOf(manyDb.db, stores);
        const r = await deliver(
          stores.map((s) => ({ store: s, count: 1 })),
          120_000,
        );
        seconds += r.seconds;
        delivered &&= r.delivered;
      }
      const r = { seconds, delivered };
      reached = k;
      await sleep(1000);
      const stageRssMb = worker.memory().rssMb;
      const m = await steady();
      workerStages.push({ stores: k, stageRssMb, rssMb: m.rssMb, peakMb: m.peakMb, seconds: r.seconds, delivered: r.delivered });
      log(
        `  ${f0(k)} stores' endpoints delivered to: RSS ${stageRssMb} MiB, after ${f0(steadyDeliveries)} to one store's ${m.rssMb} (peak ${m.peakMb}), ${f1(r.seconds)} s`,
      );
    }
    await stop(worker);

    return {
      generateSeconds: manyGen.seconds,
      indexSeconds: manyGen.indexSeconds,
      oneGenerateSeconds: oneGen.seconds,
      databaseMb: sizeMb,
      activePerStore: active,
      distinctPages: cursorsMany.length,
      hot: {
        oneP99: spread(hotOneR!.map((r) => r.p99)),
        manyP99: spread(hotManyR!.map((r) => r.p99)),
        oneRps: spread(hotOneR!.map((r) => r.perSecond)),
        manyRps: spread(hotManyR!.map((r) => r.perSecond)),
        p99Ratio: spread(
          ratios(
            hotManyR!.map((r) => r.p99),
            hotOneR!.map((r) => r.p99),
          ),
        ),
      },
      distinct: {
        one: spread(distOneR!.map((r) => r.perSecond)),
        many: spread(distManyR!.map((r) => r.perSecond)),
        oneP99: spread(distOneR!.map((r) => r.p99)),
        manyP99: spread(distManyR!.map((r) => r.p99)),
        oneCpuMs: spread(distOneR!.map((r) => r.cpuMsPerPage!)),
        manyCpuMs: spread(distManyR!.map((r) => r.cpuMsPerPage!)),
        slowdown: spread(
          ratios(
            distOneR!.map((r) => r.perSecond),
            distManyR!.map((r) => r.perSecond),
          ),
        ),
        p99Ratio: spread(
          ratios(
            distManyR!.map((r) => r.p99),
            distOneR!.map((r) => r.p99),
          ),
        ),
      },
      across: {
        stores: acrossCount,
        pages: acrossRows.length,
        many: spread(acrossR!.map((r) => r.perSecond)),
        manyP99: spread(acrossR!.map((r) => r.p99)),
        manyCpuMs: spread(acrossR!.map((r) => r.cpuMsPerPage!)),
        slowdown: spread(
          ratios(
            distOneR!.map((r) => r.perSecond),
            acrossR!.map((r) => r.perSecond),
          ),
        ),
      },
      creation: {
        samples: creationLatencies.one.length,
        oneP50: at(creationLatencies.one, 0.5),
        oneP99: at(creationLatencies.one, 0.99),
        manyP50: at(creationLatencies.many, 0.5),
        manyP99: at(creationLatencies.many, 0.99),
      },
      serveRss: { warmMb, stages: serveStages },
      delivery: {
        deliveries: spreadTotal,
        endpoints: spreadStores.length,
        one: spread(deliverOne!),
        spread: spread(deliverSpread!),
        ratio: spread(ratios(deliverSpread!, deliverOne!)),
        capped: capped.filter(Boolean).length,
      },
      workerRss: { idleMb, warmMb: warmWorkerMb, warmDeliveries, steadyDeliveries, stages: workerStages },
    };
  } finally {
    for (const s of [...servers]) await s.stop().catch(() => {});
    for (const c of children) c.kill('SIGKILL');
    await manyDb.close();
    await oneDb.close();
    await many.drop();
    await one.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Fairness
// ---------------------------------------------------------------------------------------------

const A = 1;
const B = 2;

/** B's single changes, one every `everyMs`, each timed from before its write to its arrival at B's receiver. */
function changeSampler(db: Kysely<Database>, productsPerStore: number, everyMs: number, offset: number) {
  const writes: { key: string; at: number }[] = [];
  let stopped = false;
  let n = offset;
  const running = (async () => {
    while (!stopped) {
      const next = performance.now() + everyMs;
      let g = 1 + (n++ % productsPerStore);
      if (g % 10 === 0) g = (g % productsPerStore) + 1;
      const id = productId(B, g);
      const written = performance.timeOrigin + performance.now();
      await inStore(storeId(B), () => updateProduct(db, id, { name: `B change ${n}` }));
      writes.push({ key: `product.updated:${id}`, at: written });
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
    }
  })();
  return {
    next: () => n,
    /** Stops writing. */
    stop: async () => {
      stopped = true;
      await running;
    },
    /**
     * Waits (at most `waitMs`) until every change arrived; returns the latencies, sorted, those not
     * arrived counted as their wait so far (a lower bound), and how many did not arrive.
     */
    collect: async (arrivals: () => Promise<Record<string, number[]>>, waitMs: number) => {
      const latencies = (seen: Record<string, number[]>) =>
        writes.map((w) => {
          const arrived = (seen[w.key] ?? []).find((t) => t > w.at);
          return arrived === undefined ? undefined : arrived - w.at;
        });
      let result = latencies(await arrivals());
      const end = performance.now() + waitMs;
      while (result.some((l) => l === undefined) && performance.now() < end) {
        await sleep(100);
        result = latencies(await arrivals());
      }
      const now = performance.timeOrigin + performance.now();
      const missing = result.filter((l) => l === undefined).length;
      const all = result.map((l, i) => l ?? now - writes[i]!.at).sort((a, b) => a - b);
      return { latencies: all, missing };
    },
  };
}

/** Where B's deliveries created since `since` spent their time (PhaseFigures' stages), sorted per stage. */
async function stagesOf(db: Kysely<Database>, store: string, since: string) {
  const { rows } = await sql<{ to_poll: number; to_attempt: number; attempt: number }>`
    SELECT (extract(epoch FROM d.created_at - ev.created_at) * 1000)::float8 AS to_poll,
      (extract(epoch FROM a.started_at - d.created_at) * 1000)::float8 AS to_attempt, a.duration_ms::float8 AS attempt
    FROM webhook_deliveries d
    JOIN events ev ON ev.store_id = d.store_id AND ev.id = d.event_id
    JOIN webhook_attempts a ON a.store_id = d.store_id AND a.delivery_id = d.id AND a.attempt_number = 1
    WHERE d.store_id = ${store}::uuid AND d.created_at >= ${since}::timestamptz`.execute(db);
  const sorted = (key: 'to_poll' | 'to_attempt' | 'attempt') => rows.map((r) => Number(r[key])).sort((a, b) => a - b);
  const [toPoll, toAttempt, attempt] = [sorted('to_poll'), sorted('to_attempt'), sorted('attempt')];
  return {
    toPollP50: at(toPoll, 0.5),
    toPollP99: at(toPoll, 0.99),
    toAttemptP50: at(toAttempt, 0.5),
    toAttemptP99: at(toAttempt, 0.99),
    attemptP50: at(attempt, 0.5),
    attemptP99: at(attempt, 0.99),
  };
}

/** IMPORT_JOB_ROWS' default (src/config/config.ts): a larger stock import is a job. */
const IMPORT_JOB_ROWS_DEFAULT = 10_000;

/** Polls an import job (GET /admin/api/v1/inventory/import-jobs/:id) every second until it is no longer queued or running. */
async function importJobEnded(origin: string, token: string, id: string, capMs: number): Promise<{ status: string }> {
  const end = performance.now() + capMs;
  for (;;) {
    const res = await fetch(`${origin}/admin/api/v1/inventory/import-jobs/${id}`, { headers: { authorization: `Bearer ${token}` } });
    const job = ((await res.json()) as { data: { status: string } }).data;
    if (job.status !== 'queued' && job.status !== 'running') return job;
    if (performance.now() > end) return { status: `still ${job.status} after ${capMs / 1000} s` };
    await sleep(1000);
  }
}

async function benchFairness(opts: StoresOptions): Promise<FairnessResults> {
  const fair = await scratch(opts.databaseUrl, 'fair', opts.jitOff);
  log(`fairness: scratch database ${fair.name}`);
  const database: DatabaseHandle = await openDatabase({ databaseUrl: fair.url, poolSize: 6, applicationName: 'store-api-bench' });
  const db = database.db;
  const servers: ServerProcess[] = [];
  const children: ChildProcess[] = [];
  try {
    await migrateToLatest(db);
    await dropDefaultStore(db);
    const started = performance.now();
    log(`fairness: store A (${f0(opts.fairImportRows)} stock-tracked products) and store B (${f0(opts.productsPerStore)} products)`);
    await generateStores(db, { stores: 1, first: A, productsPerStore: opts.fairImportRows, stockTracked: true }, { streams: 3, label: 'store A' });
    await generateStores(db, { stores: 1, first: B, productsPerStore: opts.productsPerStore, children: opts.children }, { streams: 1, label: 'store B' });
    const generateSeconds = (performance.now() - started) / 1000;
    const [adminA] = await insertKeys(db, A, 1, ['admin'], 'bench import');
    const [readB] = await insertKeys(db, B, 1);
    const good = await receiver('127.0.0.1');
    const failing = await receiver('127.0.0.1', 500);
    children.push(good.child, failing.child);
    // A mirrors every change to an endpoint that fails; B's endpoint wants its product changes.
    await insertEndpoints(db, [{ store: A, url: `${failing.origin}/hook/a`, eventTypes: [] }], true);
    await insertEndpoints(db, [{ store: B, url: `${good.origin}/hook/b`, eventTypes: ['product.updated'] }], true);
    const endpointOfA = sql`store_id = ${storeId(A)}::uuid`;

    // A's backlog: A's product.updated events and a pending delivery of each to A's endpoint, as the
    // poller's fan-out writes them (set-based here: the worker's fan-out of the same took minutes),
    // the poller's position put after them.
    log(`fairness: A's backlog of ${f0(opts.fairBacklog)} deliveries to its failing endpoint`);
    const backlogStart = performance.now();
    for (let done = 0; done < opts.fairBacklog; done += 50_000)
      await appendStoreEvents(db, [{ store: A, count: Math.min(50_000, opts.fairBacklog - done) }], opts.fairImportRows);
    await sql`
      INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at)
      SELECT gen_random_uuid(), ev.store_id, ev.id, ev.type, e.id, 'pending', now(), now(), now()
      FROM events ev JOIN webhook_endpoints e ON e.store_id = ev.store_id
      WHERE ev.store_id = ${storeId(A)}::uuid`.execute(db);
    await sql`
      UPDATE webhook_poller_state SET position_created_at = t.created_at, position_seq = t.seq, updated_at = now()
      FROM (SELECT created_at, seq FROM events ORDER BY created_at DESC, seq DESC LIMIT 1) t WHERE id = 1`.execute(db);
    await sql`ANALYZE webhook_deliveries, events`.execute(db);
    const backlogSeconds = (performance.now() - backlogStart) / 1000;
    const backlog = Number(
      (await sql<{ n: string }>`SELECT count(*) AS n FROM webhook_deliveries WHERE store_id = ${storeId(A)}::uuid`.execute(db)).rows[0]!.n,
    );
    const metricsPort = await freePort();
    // Production's IMPORT_JOB_ROWS (unset: its default) unless the import is to be answered at its end.
    const importJobs: Record<string, string> = opts.fairImportSync ? {} : { IMPORT_JOB_ROWS: String(IMPORT_JOB_ROWS_DEFAULT) };
    const worker = await startServer(
      [...SERVER_NODE_ARGS, CLI, 'worker'],
      { DATABASE_URL: fair.url, METRICS_PORT: String(metricsPort), LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE_URLS: 'true', ...importJobs },
      metricsPort,
    );
    servers.push(worker);

    const port = await freePort();
    const serve = await startServer([...SERVER_NODE_ARGS, CLI, 'serve'], serverEnv({ DATABASE_URL: fair.url, PORT: String(port), ...importJobs }), port);
    servers.push(serve);
    const cursors = await storeCursors(db, storeId(B), 2000, opts.limit);
    const pagesOfB = pathsFile(cursors.map((c) => `/api/v1/products?limit=${opts.limit}&cursor=${encodeURIComponent(c)}`));
    const listLoad = {
      connections: opts.fairConnections,
      maxSeconds: 3600,
      headers: { Authorization: `Bearer ${readB!.token}` },
      script: WRK_PATHS_SCRIPT,
      env: { PATHS_FILE: pagesOfB },
    };
    const pollerAtTail = () => pollerAtTailOf(db);
    log('fairness: warm-up');
    await wrk(serve.origin, { ...listLoad, seconds: 3 });
    let changeOffset = 0;
    {
      const warm = changeSampler(db, opts.productsPerStore, 250, changeOffset);
      await sleep(3000);
      await warm.stop();
      await warm.collect(good.arrivals, 30_000);
      changeOffset = warm.next();
    }

    /** B's load from now until `during` ends; then `after`, then B's changes waited for. */
    const phase = async (during: () => Promise<void>, after: () => Promise<void>): Promise<PhaseFigures> => {
      const t = performance.now();
      const phaseSince = new Date().toISOString();
      const list = wrkUntilStopped(serve.origin, listLoad);
      const sampler = changeSampler(db, opts.productsPerStore, 250, changeOffset);
      await during();
      const seconds = (performance.now() - t) / 1000;
      const listed = await list.stop();
      await sampler.stop();
      changeOffset = sampler.next();
      await after();
      const changed = await sampler.collect(good.arrivals, 120_000);
      return {
        seconds,
        listP99: listed.p99,
        listP50: listed.p50,
        listRps: listed.perSecond,
        changes: changed.latencies.length,
        missing: changed.missing,
        changeP50: at(changed.latencies, 0.5),
        changeP99: at(changed.latencies, 0.99),
        changeMax: changed.latencies.at(-1) ?? Number.NaN,
        ...(await stagesOf(db, storeId(B), phaseSince)),
      };
    };

    let round = 0;
    // The idle phase lasts as long as the last busy one (at least fairIdleSeconds): each phase's p99
    // is then read off about as many of B's changes. A 30-s idle phase gave about 120, whose p99 is
    // their second largest: B's change p99 with A idle went from 106 to 372 ms across rounds of the
    // same code, which moved the ratio more than anything A did.
    let lastBusySeconds = 0;
    const phases = await alternate<PhaseFigures>(opts.fairRounds, {
      'A busy: its failing endpoint with its backlog, and an import': async () => {
        round++;
        const since = new Date().toISOString();
        // The breaker closed and the endpoint enabled: the worker goes at A's backlog again.
        await sql`UPDATE webhook_endpoints SET enabled = true, consecutive_failures = 0, paused_until = NULL WHERE ${endpointOfA}`.execute(db);
        const failedBefore = await failing.count();
        const csv = `sku,stock\n${Array.from({ length: opts.fairImportRows }, (_, i) => `SKU-${i + 1},${100 * round + ((i + 1) % 50)}`).join('\n')}\n`;
        let importSeconds = 0;
        let importStatus = 0;
        let fanoutSeconds: number | undefined;
        let importEvents = 0;
        const figures = await phase(
          async () => {
            const importStarted = performance.now();
            const importing = postStockImport(serve.origin, adminA!.token, csv);
            const answer = await importing.answered;
            importStatus = answer.status;
            if (answer.status === 202) {
              // A job: polled (once a second, as the dashboard does) until the worker has run it.
              const job = (JSON.parse(answer.body) as { data: { id: string } }).data;
              const ended = await importJobEnded(serve.origin, adminA!.token, job.id, 600_000);
              if (ended.status !== 'succeeded') log(`  the import job ended ${ended.status}: ${JSON.stringify(ended).slice(0, 300)}`);
            } else if (answer.status !== 201) log(`  the import answered ${answer.status}: ${answer.body.slice(0, 300)}`);
            importSeconds = (performance.now() - importStarted) / 1000;
            importEvents = Number(
              (
                await sql<{ n: string }>`SELECT count(*) AS n FROM events WHERE store_id = ${storeId(A)}::uuid AND created_at >= ${since}::timestamptz`.execute(
                  db,
                )
              ).rows[0]!.n,
            );
            // Until the poller has passed A's import (its fan-out done), at most fairCapSeconds more.
            const t = performance.now();
            if (await until("the poller past A's import", pollerAtTail, opts.fairCapSeconds * 1000, 200)) fanoutSeconds = (performance.now() - t) / 1000;
          },
          async () => {
            // A's endpoint off: the poller crosses what is left of A's events without fanning them
            // out, so B's last changes arrive and the next phase starts from a poller at the tail.
            await sql`UPDATE webhook_endpoints SET enabled = false WHERE ${endpointOfA}`.execute(db);
            await until('the poller at the tail', pollerAtTail, 600_000, 200);
          },
        );
        const failedAttempts = (await failing.count()) - failedBefore;
        // Back to A's backlog alone: the round's deliveries (the import's fan-out) removed.
        await sql`DELETE FROM webhook_attempts WHERE store_id = ${storeId(A)}::uuid AND started_at >= ${since}::timestamptz`.execute(db);
        await sql`DELETE FROM webhook_deliveries WHERE store_id = ${storeId(A)}::uuid AND created_at >= ${since}::timestamptz`.execute(db);
        // The import's aftermath vacuumed now, not by autovacuum during the next phase.
        await sql`VACUUM ANALYZE webhook_deliveries, webhook_attempts, events, products, stock_movements`.execute(db);
        log(
          `    import ${importStatus} in ${f1(importSeconds)} s, ${f0(importEvents)} events, fan-out ${fanoutSeconds === undefined ? `not done in ${opts.fairCapSeconds} s` : `${f1(fanoutSeconds)} s`}; B list p99 ${f1(figures.listP99)} ms, change p99 ${f1(figures.changeP99)} ms (${figures.missing} not arrived)`,
        );
        lastBusySeconds = figures.seconds;
        return Object.assign(figures, { importSeconds, importStatus, fanoutSeconds, importEvents, failedAttempts });
      },
      'A idle: its endpoint disabled, no import': async () => {
        await sql`UPDATE webhook_endpoints SET enabled = false WHERE ${endpointOfA}`.execute(db);
        const figures = await phase(
          () => sleep(Math.max(opts.fairIdleSeconds, lastBusySeconds) * 1000),
          async () => {},
        );
        log(`    B list p99 ${f1(figures.listP99)} ms, change p99 ${f1(figures.changeP99)} ms`);
        return figures;
      },
    });
    const [busy, idle] = Object.values(phases) as [FairnessResults['busy'], PhaseFigures[]];
    return {
      generateSeconds,
      backlog,
      backlogSeconds,
      busy,
      idle,
      listRatio: spread(
        ratios(
          busy.map((b) => b.listP99),
          idle.map((i) => i.listP99),
        ),
      ),
      changeRatio: spread(
        ratios(
          busy.map((b) => b.changeP99),
          idle.map((i) => i.changeP99),
        ),
      ),
    };
  } finally {
    for (const s of servers) await s.stop().catch(() => {});
    for (const c of children) c.kill('SIGKILL');
    await database.close();
    await fair.drop();
  }
}

/** Runs the parts asked for; `partial` is handed the scale part's results before the fairness part starts (a long run's figures are not lost with it). */
export async function benchStores(opts: StoresOptions, partial?: (results: StoresResults) => void): Promise<StoresResults> {
  const t = performance.now();
  const scale = opts.scale ? await benchScale(opts) : undefined;
  if (scale && opts.fairness) partial?.({ scale, totalSeconds: (performance.now() - t) / 1000 });
  const fairness = opts.fairness ? await benchFairness(opts) : undefined;
  return { scale, fairness, totalSeconds: (performance.now() - t) / 1000 };
}

// ---------------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------------

/** The flags of the run that differ from the defaults, for the document's first line. */
function commandFlags(opts: StoresOptions): string {
  const flags: string[] = [];
  if (opts.stores !== 10_000) flags.push(`--stores-count ${opts.stores}`);
  if (opts.productsPerStore !== 1000) flags.push(`--products-per-store ${opts.productsPerStore}`);
  if (opts.layout !== 'contiguous') flags.push(`--stores-layout ${opts.layout}`);
  if (opts.children) flags.push('--stores-children');
  if (opts.jitOff) flags.push('--stores-jit-off');
  if (opts.fairImportRows !== 100_000) flags.push(`--fair-import-rows ${opts.fairImportRows}`);
  if (opts.fairImportSync) flags.push('--fair-import-sync');
  if (!opts.scale) flags.push('--stores-only fairness');
  if (!opts.fairness) flags.push('--stores-only scale');
  return flags.map((f) => ` ${f}`).join('');
}

/** "≥ " when some change of these phases had not arrived (its latency a lower bound). */
function lower(phases: PhaseFigures[]): string {
  return phases.some((p) => p.missing > 0) ? '≥ ' : '';
}

function check(ok: boolean, text: string): string {
  return `| ${ok ? 'met' : '**missed**'} | ${text} |`;
}

export function storesReport(r: StoresResults, opts: StoresOptions, notes: string[]): string {
  const cpu = cpus();
  const lines = [
    '# Benchmarks: many stores',
    '',
    'The one-store runs are in [benchmarks.md](benchmarks.md) (`npm run bench`) and [benchmarks-large.md](benchmarks-large.md) (`npm run bench -- --large`).',
    '',
    `Generated by \`npm run bench -- --stores${commandFlags(opts)}\` (bench/run.ts, bench/stores-bench.ts) on ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC,`,
    `${f1(r.totalSeconds / 60)} min in all: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${f0(totalmem() / 1024 / 1024)} MiB RAM, Node ${process.version}, one local PostgreSQL server`,
    `(its settings as installed${opts.jitOff ? '; `jit = off` set on the scratch databases, `--stores-jit-off`' : ', JIT compilation on as PostgreSQL ships it'}).`,
    `Every process runs compiled (dist/), started as production starts it (\`node bin/store-api.js serve|worker\`).`,
    `Load: wrk in its own process on loopback, ${opts.connections} connections, ${opts.seconds} s per run, after a warm-up; ${opts.rounds} rounds with the`,
    'measurements alternated inside each round; figures are the median and (min–max) over the rounds, and every',
    'headline figure is a ratio to a baseline measured in the same rounds, so the load of other processes on a',
    'shared machine falls on both sides of it.',
    '',
  ];
  const s = r.scale;
  if (s) {
    lines.push(
      '## Scale',
      '',
      `**Method.** Database *many*: ${f0(opts.stores)} stores × ${f0(opts.productsPerStore)} products = ${f0(opts.stores * opts.productsPerStore)} products` +
        ` (${opts.children ? '2 variants and 2 images each' : 'no variants or images'}, a tenth inactive, six product types, each with its stored documents as the list serves them;` +
        ` ${opts.layout === 'contiguous' ? "a store's catalogue loaded in one piece, so its rows sit together in the heap" : "product g of every store loaded before product g + 1 of any: a store's rows spread over the whole heap"}),` +
        ` ${f0(s.databaseMb)} MiB on disk, and one API key per store. Database *one*: a single store with the same ${f0(opts.productsPerStore)} products and a key.` +
        ` The list is read through each database's own \`serve\` (list page cache on, as deployed) with a store's key: in *many*, store ${f0(Math.ceil(opts.stores / 2))}.` +
        ` "Distinct pages": wrk cycles the ${f0(s.distinctPages)} pages of ${opts.limit} that start at the store's active products (more than the page cache holds).` +
        ` "Across stores": ${f0(s.across.pages)} pages of ${f0(s.across.stores)} stores spread over *many*, in turn, each request with its own store's key (bench/wrk-store-paths.lua).`,
      '',
      '| Measure | Result |',
      '|---|---:|',
      `| Generate *many* (bench/generate-stores.ts: set-based, triggers off, documents written by the load, 3 writers) | ${f1(s.generateSeconds)} s (${f1(s.generateSeconds / 60)} min; indexes ${f1(s.indexSeconds)} s) |`,
      `| List, limit ${opts.limit}, the store's page half-way: p99 (ms), alone / among ${f0(opts.stores)} | ${range(s.hot.oneP99, f1)} / ${range(s.hot.manyP99, f1)} |`,
      `| … requests/s, alone / among ${f0(opts.stores)} | ${range(s.hot.oneRps, f0)} / ${range(s.hot.manyRps, f0)} |`,
      `| **… p99 among ${f0(opts.stores)} ÷ alone** | **${range(s.hot.p99Ratio, f2)}** |`,
      `| List over the store's ${f0(s.distinctPages)} distinct pages: pages/s, alone / among ${f0(opts.stores)} | ${range(s.distinct.one, f0)} / ${range(s.distinct.many, f0)} |`,
      `| … p99 (ms), alone / among ${f0(opts.stores)}; \`serve\` CPU ms per page | ${range(s.distinct.oneP99, f1)} / ${range(s.distinct.manyP99, f1)}; ${f2(s.distinct.oneCpuMs.median)} / ${f2(s.distinct.manyCpuMs.median)} |`,
      `| **… pages/s alone ÷ among ${f0(opts.stores)} (slowdown); p99 among ÷ alone** | **${range(s.distinct.slowdown, f2)}; ${range(s.distinct.p99Ratio, f2)}** |`,
      `| List across ${f0(s.across.stores)} stores of *many*, every request another store's key and page: pages/s; p99 (ms); \`serve\` CPU ms per page | ${range(s.across.many, f0)}; ${range(s.across.manyP99, f1)}; ${f2(s.across.manyCpuMs.median)} |`,
      `| **… slowdown against one store's distinct pages alone (pages/s alone ÷ across)** | **${range(s.across.slowdown, f2)}** |`,
      `| Store creation through the platform API (POST /platform/api/v1/stores with a first key; ${f0(s.creation.samples)} per database, one at a time): p50 / p99 (ms), one-store database | ${f1(s.creation.oneP50)} / ${f1(s.creation.oneP99)} |`,
      `| … the same in the ${f0(opts.stores)}-store database | ${f1(s.creation.manyP50)} / ${f1(s.creation.manyP99)} |`,
      `| \`serve\` on *many*, after a 5-s warm-up on one store's distinct pages: RSS (MiB) | ${s.serveRss.warmMb} |`,
      ...s.serveRss.stages.map(
        (st) =>
          `| … after requests with the keys of ${f0(st.stores)} distinct stores (the first list page of each, limit ${opts.limit}, ${2 * opts.connections} connections): RSS / peak (MiB); the stage took | ${st.rssMb} / ${st.peakMb}; ${f0(st.seconds)} s |`,
      ),
      `| Webhooks, \`worker\` process to one receiver process, from the events' commit to the last arrival (at most ${f0(opts.deliveryCapSeconds)} s, then what arrived ÷ the time${s.delivery.capped > 0 ? `: ${s.delivery.capped} of ${2 * opts.rounds} rounds capped` : ''}): ${f0(s.delivery.deliveries)} deliveries per round to one endpoint of one store: deliveries/s | ${range(s.delivery.one, f0)} |`,
      `| … the same number spread over ${f0(s.delivery.endpoints)} endpoints of ${f0(s.delivery.endpoints)} stores (an origin each, 127.x.y.z; only these endpoints enabled): deliveries/s | ${range(s.delivery.spread, f0)} |`,
      `| **… spread ÷ one endpoint** | **${range(s.delivery.ratio, f2)}** |`,
      `| A fresh \`worker\` on *many*, idle: RSS (MiB) | ${s.workerRss.idleMb} |`,
      `| … after a warm-up of ${f0(s.workerRss.warmDeliveries)} deliveries to one store's endpoint: RSS (MiB) | ${s.workerRss.warmMb} |`,
      ...s.workerRss.stages.map(
        (st) =>
          `| … after delivering one event to the endpoint of each of ${f0(st.stores)} stores (enabled ${f0(opts.deliveryStores)} at a time): RSS then / after ${f0(s.workerRss.steadyDeliveries)} more to one store's endpoint / peak (MiB); time for the stage's new deliveries | ${st.stageRssMb} / **${st.rssMb}** / ${st.peakMb}; ${st.delivered ? `${f1(st.seconds)} s` : `**not all delivered** (${f0(st.seconds)} s)`} |`,
      ),
      '',
    );
  }
  const fr = r.fairness;
  if (fr) {
    const busy = (k: keyof PhaseFigures) => spread(fr.busy.map((b) => b[k] as number));
    const idle = (k: keyof PhaseFigures) => spread(fr.idle.map((b) => b[k] as number));
    const stagesCell = (of: typeof idle) =>
      (['toPoll', 'toAttempt', 'attempt'] as const).map((k) => `${f1(of(`${k}P50`).median)}, ${f1(of(`${k}P99`).median)}`).join(' / ');
    const imports = fr.busy;
    lines.push(
      '## Fairness',
      '',
      `**Method.** One database, two stores, ${opts.fairRounds} rounds of the two phases alternated. A: ${f0(opts.fairImportRows)} stock-tracked products, an endpoint subscribed to every event type on a receiver that answers 500 to everything,` +
        ` and a backlog of ${f0(fr.backlog)} pending deliveries to it (A's product.updated events and their deliveries written set-based as the poller's fan-out writes them, ${f1(fr.backlogSeconds)} s). B: ${f0(opts.productsPerStore)} products, an endpoint for its product changes on a receiver answering 204.` +
        ' One `serve` (list page cache on) and one `worker`, production defaults (breaker: 10 consecutive failures pause an endpoint for 30 minutes).' +
        ` B's load in both phases: wrk (${f0(opts.fairConnections)} connections, B's key) cycling B's distinct pages, and a change to one of B's products every 250 ms through the service (\`updateProduct\` in B's scope),` +
        " each timed from before its write to its arrival at B's receiver." +
        ` *A busy*: A's endpoint enabled with its breaker closed (the worker goes at the backlog again), and a ${f0(opts.fairImportRows)}-row stock CSV import by A's admin key to \`serve\`` +
        (opts.fairImportSync
          ? ', answered when it ends (one transaction in `serve`: IMPORT_JOB_ROWS set above it, `--fair-import-sync`);'
          : `, as production runs it: answered 202 with a job (IMPORT_JOB_ROWS' default, ${f0(IMPORT_JOB_ROWS_DEFAULT)} rows) that the \`worker\` runs in committed steps, polled once a second until it ends;`) +
        ` the phase lasts from the import's start until the worker's poller has passed A's import events (their fan-out to A's endpoint done), at most ${f0(opts.fairCapSeconds)} s after the import's end.` +
        " Then A's endpoint is disabled (the poller crosses the rest of A's events without fanning them out), B's changes of the phase are waited for (at most 120 s: one not arrived counts as its wait so far, a lower bound, marked ≥)," +
        " and the round's new deliveries of A are removed, so every round starts from the same backlog." +
        ` *A idle*: A's endpoint disabled, no import, for as long as the last busy phase (at least ${f0(opts.fairIdleSeconds)} s), so both phases' p99s are read off about as many changes.`,
      '',
      '| Measure | A idle | A busy |',
      '|---|---:|---:|',
      `| Phase length (s) | ${range(idle('seconds'), f0)} | ${range(busy('seconds'), f0)} |`,
      `| A's import: ${opts.fairImportSync ? 'answered' : 'its job ended'} in (s); events written; the poller past them after that (s) | – | ${imports.map((b) => f1(b.importSeconds)).join(', ')}; ${f0(imports[0]!.importEvents)}; ${imports.map((b) => (b.fanoutSeconds === undefined ? `not within ${opts.fairCapSeconds}` : f1(b.fanoutSeconds))).join(', ')} |`,
      `| Attempts at A's failing endpoint during the phase | 0 | ${imports.map((b) => f0(b.failedAttempts)).join(', ')} |`,
      `| B's list over its distinct pages: requests/s | ${range(idle('listRps'), f0)} | ${range(busy('listRps'), f0)} |`,
      `| … p50 / p99 (ms) | ${f1(idle('listP50').median)} / ${range(idle('listP99'), f1)} | ${f1(busy('listP50').median)} / ${range(busy('listP99'), f1)} |`,
      `| B's change → receiver: changes per phase, each round (of which not arrived after the 120-s wait) | ${fr.idle.map((p) => `${p.changes} (${p.missing})`).join(', ')} | ${fr.busy.map((p) => `${p.changes} (${p.missing})`).join(', ')} |`,
      `| … p50 / p99 / max (ms) | ${lower(fr.idle)}${f1(idle('changeP50').median)} / ${range(idle('changeP99'), f1)} / ${f0(idle('changeMax').median)} | ${lower(fr.busy)}${f1(busy('changeP50').median)} / ${range(busy('changeP99'), f1)} / ${f0(busy('changeMax').median)} |`,
      `| … of which, B's deliveries by stage: the event to the start of the poll that fanned it out / that poll's start to the first attempt / the first attempt: p50, p99 (ms) | ${stagesCell(idle)} | ${stagesCell(busy)} |`,
      `| **B's list p99, A busy ÷ A idle** | | **${range(fr.listRatio, f2)}** |`,
      `| **B's change → receiver p99, A busy ÷ A idle** | | **${lower(fr.busy)}${range(fr.changeRatio, f2)}** |`,
      '',
    );
  }
  lines.push('## Targets', '', '| | Target |', '|---|---|');
  if (s) {
    lines.push(
      check(
        s.hot.p99Ratio.median <= 1.2,
        `List p99 of a store among ${f0(opts.stores)} ≤ 1.2× the same store alone (page half-way): ${f2(s.hot.p99Ratio.median)}×`,
      ),
      check(
        s.distinct.slowdown.median <= 1.2 && s.distinct.p99Ratio.median <= 1.2,
        `Distinct pages of a store among ${f0(opts.stores)} ≤ 1.2× slower than alone: pages/s ${f2(s.distinct.slowdown.median)}×, p99 ${f2(s.distinct.p99Ratio.median)}×`,
      ),
      check(
        s.delivery.ratio.median >= 0.8,
        `Deliveries across ${f0(s.delivery.endpoints)} endpoints of as many stores ≥ 0.8× one endpoint: ${f2(s.delivery.ratio.median)}×`,
      ),
    );
    const serveFirst = s.serveRss.stages[0]!;
    const serveLast = s.serveRss.stages.at(-1)!;
    lines.push(
      check(
        serveLast.rssMb <= 1.1 * serveFirst.rssMb,
        `\`serve\` RSS flat (≤ 1.1×) from ${f0(serveFirst.stores)} to ${f0(serveLast.stores)} stores' keys used: ${f2(serveLast.rssMb / serveFirst.rssMb)}× (${serveFirst.rssMb} → ${serveLast.rssMb} MiB)`,
      ),
    );
    const workerFirst = s.workerRss.stages[0]!;
    const workerLast = s.workerRss.stages.at(-1)!;
    lines.push(
      check(
        workerLast.rssMb <= 1.1 * workerFirst.rssMb,
        `\`worker\` RSS flat (≤ 1.1×) from ${f0(workerFirst.stores)} to ${f0(workerLast.stores)} stores' endpoints delivered to, each read after the same load: ${f2(workerLast.rssMb / workerFirst.rssMb)}× (${workerFirst.rssMb} → ${workerLast.rssMb} MiB)`,
      ),
    );
  }
  if (fr) {
    lines.push(
      check(fr.listRatio.median <= 2, `B's list p99 while A is busy ≤ 2× with A idle: ${f2(fr.listRatio.median)}×`),
      check(fr.changeRatio.median <= 2, `B's change → receiver p99 while A is busy ≤ 2× with A idle: ${lower(fr.busy)}${f2(fr.changeRatio.median)}×`),
    );
  }
  if (notes.length > 0) lines.push('', ...notes);
  return `${lines.join('\n')}\n`;
}
