/**
 * Memory of a server role over time (issues 25 and 26): the list load — the hot page of 200
 * products half-way and 400 distinct pages, alternated in phases of `phaseSeconds` — held for
 * `seconds`, with the process's RSS (/proc), V8 heap and external memory (its own /metrics) sampled
 * every `sampleSeconds`. `npm run bench` runs a short soak on its `serve`; the long one is
 * `node --import tsx bench/memory-soak.ts` (below, `--help`), which also breaks the memory down
 * with a preload (array buffers, V8's heap spaces, malloc, PGlite's WebAssembly memory).
 *
 * Flatness: the first minute (and at least one cycle of both phases; young generation, caches, pools
 * filling) is the warm-up; the reference is the median RSS of the first quarter of the rest, and the
 * soak is flat when every later sample stays within ±10 % of it (`flatness` = highest later sample ÷
 * reference).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { parseArgs } from 'node:util';
import { EMBEDDED_NODE_ARGS, SERVER_NODE_ARGS, ensureWrk, freePort, log, startServer, wrk, type ServerProcess } from './bench-tools.ts';

export interface MemorySample {
  /** Seconds since the soak began. */
  t: number;
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  /** Only with the preload (standalone runs). */
  arrayBuffersMb?: number;
  /** V8's young generation (new space), preload only. */
  newSpaceMb?: number;
  /** Other threads (the embedded database's): V8 heap and WebAssembly memory, preload only. */
  threadsHeapMb?: number;
  wasmMb?: number;
}

export interface SoakFigures {
  seconds: number;
  samples: MemorySample[];
  /** VmHWM over the soak (MiB). */
  peakMb: number;
  referenceMb: number;
  /** Highest RSS after the first quarter ÷ reference (target ≤ 1.1). */
  flatness: number;
  /** Lowest RSS after the first quarter ÷ reference (target ≥ 0.9). */
  lowest: number;
  requests: number;
  /** The process's CPU time (user + system) per request over the soak, ms: what a setting costs, less disturbed by a busy machine than throughput. */
  cpuMsPerRequest?: number;
}

/** User + system CPU time of a process so far (ms), from /proc/PID/stat (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /s, '')
    .split(' ');
  // After "pid (comm) ": state is field 3, utime 14 and stime 15 (1-based): indexes 11 and 12 here.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const mb = (bytes: number): number => Math.round((bytes / 1048576) * 10) / 10;

/** A sample from /proc and the process's own /metrics (prom-client's default metrics). */
async function sampleFromMetrics(server: ServerProcess, t: number): Promise<MemorySample> {
  const rssMb = server.memory().rssMb;
  const text = await (await fetch(`${server.origin}/metrics`)).text();
  const metric = (name: string): number => {
    const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text);
    return match ? Number(match[1]) : Number.NaN;
  };
  return {
    t,
    rssMb,
    heapUsedMb: mb(metric('nodejs_heap_size_used_bytes')),
    heapTotalMb: mb(metric('nodejs_heap_size_total_bytes')),
    externalMb: mb(metric('nodejs_external_memory_bytes')),
  };
}

/**
 * The figures of a soak from its samples. The first `warmupSeconds` (young generation, caches and
 * pools filling, one cycle of both load phases) are left out; the reference is the median RSS of
 * the first quarter of the rest, and every later sample is compared with it.
 */
function soakFigures(samples: MemorySample[], seconds: number, warmupSeconds: number, peakMb: number, requests: number): SoakFigures {
  const settled = samples.filter((s) => s.t >= warmupSeconds);
  const split = warmupSeconds + (seconds - warmupSeconds) / 4;
  const quarter = settled.filter((s) => s.t <= split);
  const rest = settled.filter((s) => s.t > split);
  const sorted = (quarter.length > 0 ? quarter : settled).map((s) => s.rssMb).sort((a, b) => a - b);
  const referenceMb = sorted[Math.floor(sorted.length / 2)] ?? samples.at(-1)?.rssMb ?? 0;
  const later = rest.length > 0 ? rest : settled;
  return {
    seconds,
    samples,
    peakMb,
    referenceMb,
    flatness: Math.max(...later.map((s) => s.rssMb)) / referenceMb,
    lowest: Math.min(...later.map((s) => s.rssMb)) / referenceMb,
    requests,
  };
}

export interface SoakOptions {
  seconds: number;
  sampleSeconds: number;
  phaseSeconds: number;
  connections: number;
  headers: Record<string, string>;
  /** The hot page's URL. */
  hotUrl: string;
  /** A file of distinct page paths for bench/wrk-paths.lua. */
  pathsFile: string;
  sample?: (t: number) => Promise<MemorySample>;
}

/** Holds the list load on `server` for `seconds`, sampling its memory; VmHWM is reset first. */
export async function soak(server: ServerProcess, options: SoakOptions): Promise<SoakFigures> {
  const sample = options.sample ?? ((t: number) => sampleFromMetrics(server, t));
  // The peak of this soak alone: clear_refs 5 resets VmHWM (Linux ≥ 4.0).
  try {
    writeFileSync(`/proc/${server.child.pid}/clear_refs`, '5');
  } catch {
    // not allowed here: the peak is then the process's since its start
  }
  const cpuBefore = cpuMs(server.child.pid!);
  const started = performance.now();
  const elapsed = () => (performance.now() - started) / 1000;
  const samples: MemorySample[] = [await sample(0)];
  let requests = 0;
  let stop = false;
  const load = (async () => {
    const distinct = { script: fileURLToPath(new URL('./wrk-paths.lua', import.meta.url)), env: { PATHS_FILE: options.pathsFile } };
    for (let phase = 0; !stop; phase++) {
      const seconds = Math.max(1, Math.min(options.phaseSeconds, Math.ceil(options.seconds - elapsed())));
      const common = { connections: options.connections, seconds, headers: options.headers };
      const result = phase % 2 === 0 ? await wrk(options.hotUrl, common) : await wrk(server.origin, { ...common, ...distinct });
      requests += Math.round(result.perSecond * seconds);
      if (elapsed() >= options.seconds) break;
    }
  })();
  while (elapsed() < options.seconds) {
    await new Promise((resolve) => setTimeout(resolve, options.sampleSeconds * 1000));
    samples.push(await sample(Math.round(elapsed())));
  }
  stop = true;
  await load;
  // A minute, and at least one cycle of both phases, but never more than half the soak.
  const warmup = Math.min(options.seconds / 2, Math.max(60, 2 * options.phaseSeconds));
  const figures = soakFigures(samples, options.seconds, warmup, server.memory().peakMb, requests);
  return { ...figures, cpuMsPerRequest: requests > 0 ? (cpuMs(server.child.pid!) - cpuBefore) / requests : undefined };
}

/** Markdown rows: a sample every `every` of them, and the figures. */
export function soakTable(f: SoakFigures, label: string, rows = 12): string[] {
  const step = Math.max(1, Math.ceil(f.samples.length / rows));
  const shown = f.samples.filter((_, i) => i % step === 0 || i === f.samples.length - 1);
  const head = shown.some((s) => s.arrayBuffersMb !== undefined);
  const extra = (s: MemorySample) => (head ? [s.arrayBuffersMb, s.newSpaceMb, s.threadsHeapMb, s.wasmMb].map((v) => ` | ${v ?? ''}`).join('') : '');
  return [
    `${label}: ${f.seconds} s of the list load (${f.requests.toLocaleString('en-US')} requests${f.cpuMsPerRequest !== undefined ? `, ${f.cpuMsPerRequest.toFixed(2)} ms of CPU each` : ''}), a sample every ${Math.round(f.seconds / Math.max(1, f.samples.length - 1))} s; peak ${f.peakMb} MiB; flatness (highest later RSS ÷ ${f.referenceMb} MiB, the median of the first quarter after the warm-up) **${f.flatness.toFixed(2)}×**, lowest ${f.lowest.toFixed(2)}× (target within ±10 %)`,
    '',
    `| s | RSS | heap used | heap total | external${head ? ' | array buffers | new space | other threads’ heap | WebAssembly' : ''} |`,
    `|---:|---:|---:|---:|---:${head ? '|---:|---:|---:|---:' : ''}|`,
    ...shown.map((s) => `| ${s.t} | ${s.rssMb} | ${s.heapUsedMb} | ${s.heapTotalMb} | ${s.externalMb}${extra(s)} |`),
  ];
}

// The preload of standalone runs: every PROBE_INTERVAL_MS, one JSON line of the thread's own memory
// breakdown appended to PROBE_FILE. Worker threads inherit the preload (execArgv), so the embedded
// database's thread reports its own V8 heap and the WebAssembly memory PGlite runs in.
const PROBE = `
import { appendFileSync } from 'node:fs';
import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
import { threadId } from 'node:worker_threads';
const mb = (b) => Math.round(b / 104857.6) / 10;
const memories = [];
const Original = WebAssembly.Memory;
WebAssembly.Memory = function (descriptor) { const m = new Original(descriptor); memories.push(m); return m; };
WebAssembly.Memory.prototype = Original.prototype;
setInterval(() => {
  const mu = process.memoryUsage();
  appendFileSync(process.env.PROBE_FILE, JSON.stringify({
    at: Date.now(), threadId, rssMb: mb(mu.rss), heapUsedMb: mb(mu.heapUsed), heapTotalMb: mb(mu.heapTotal),
    externalMb: mb(mu.external), arrayBuffersMb: mb(mu.arrayBuffers), mallocedMb: mb(getHeapStatistics().malloced_memory),
    wasmMb: mb(memories.reduce((sum, m) => sum + m.buffer.byteLength, 0)),
    spaces: Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, mb(s.space_size)])),
  }) + '\\n');
}, Number(process.env.PROBE_INTERVAL_MS)).unref();
`;

/** Resident MiB by mapping name from /proc/PID/smaps ([heap], anonymous, the node binary, …): where native memory sits. */
export function mappings(pid: number): Record<string, number> {
  const totals: Record<string, number> = {};
  let name = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) name = head[1]!.split('/').at(-1) || '[anon]';
    // PGlite's WebAssembly memory: one anonymous mapping of its size (128 MiB at least); no other
    // anonymous mapping of the process is that large (V8's pages and malloc's arenas are ≤ 64 MiB).
    const size = /^Size:\s+(\d+) kB/.exec(line);
    if (size && name === '[anon]' && Number(size[1]) >= 128 * 1024) name = '[anon ≥ 128 MiB: WebAssembly memories]';
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) totals[name] = (totals[name] ?? 0) + Number(rss[1]) / 1024;
  }
  return Object.fromEntries(
    Object.entries(totals)
      .filter(([, v]) => v >= 1)
      .map(([k, v]): [string, number] => [k, Math.round(v)])
      .sort((a, b) => b[1] - a[1]),
  );
}

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      role: { type: 'string', default: 'serve' },
      'database-url': { type: 'string', default: 'postgres://root@127.0.0.1:5432/postgres' },
      products: { type: 'string', default: '100000' },
      seconds: { type: 'string', default: '300' },
      sample: { type: 'string', default: '10' },
      phase: { type: 'string', default: '30' },
      env: { type: 'string', multiple: true, default: [] },
      'node-arg': { type: 'string', multiple: true },
      help: { type: 'boolean', default: false },
    },
  });
  if (args.help) {
    console.log(
      'node --import tsx bench/memory-soak.ts [--role serve|all] [--seconds 300] [--sample 10] [--phase 30] [--products 100000]\n' +
        '  [--database-url postgres://…/postgres] [--env KEY=VALUE …] [--node-arg FLAG …]\n' +
        'serve: the store is generated once into the database store_api_memory_<products> (kept); all: into a data directory\n' +
        'in the temporary directory (kept, copied for each run). Prints a Markdown table and one JSON line.',
    );
    return;
  }
  const PRODUCTS = Number(args.products);
  const { openDatabase } = await import('../src/db/database.ts');
  const { migrateToLatest, migrationNames } = await import('../src/schema/migrate.ts');
  const { createToken } = await import('../src/tokens/token.service.ts');
  const { activeCount, cursorAt, generateBenchStore } = await import('./generate-store.ts');
  const { spreadPositions } = await import('./distinct-pages.ts');
  const size = { products: PRODUCTS, customers: Math.round(PRODUCTS / 10), orders: Math.round(PRODUCTS / 5), movements: Math.round(PRODUCTS / 2) };
  type Meta = { token: string; hot: string; cursors: string[] };
  const prepare = async (target: { dataDir?: string; databaseUrl?: string }): Promise<Meta> => {
    const database = await openDatabase({ ...target, knownMigrations: migrationNames() });
    try {
      await migrateToLatest(database.db);
      log(`generating ${PRODUCTS} products`);
      await generateBenchStore(database.db, size);
      const { token } = await createToken(database.db, { name: 'soak' });
      const hot = await cursorAt(database, Math.floor((await activeCount(database)) / 2));
      return { token, hot, cursors: (await spreadPositions(database.db, 400, 200)).cursors };
    } finally {
      await database.close();
    }
  };

  ensureWrk();
  const work = mkdtempSync(join(tmpdir(), 'store-api-soak-'));
  const extraEnv = Object.fromEntries(args.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  const env: Record<string, string> = {
    LOG_LEVEL: 'warn',
    SEED_DEMO: 'false',
    RATE_LIMIT_STANDARD: '1000000',
    RATE_LIMIT_EXPORT: '1000000',
    HOST: '127.0.0.1',
    PROBE_FILE: join(work, 'probe.ndjson'),
    PROBE_INTERVAL_MS: String(Number(args.sample) * 1000),
  };
  let meta: Meta;
  if (args.role === 'serve') {
    const url = new URL(args['database-url']);
    const name = `store_api_memory_${PRODUCTS}`;
    const admin = new pg.Client({ connectionString: args['database-url'] });
    await admin.connect();
    const exists = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
    url.pathname = `/${name}`;
    const metaFile = join(tmpdir(), `${name}.json`);
    if (exists && existsSync(metaFile)) meta = JSON.parse(readFileSync(metaFile, 'utf8'));
    else {
      await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      await admin.query(`CREATE DATABASE ${name}`);
      meta = await prepare({ databaseUrl: url.toString() });
      writeFileSync(metaFile, JSON.stringify(meta));
    }
    await admin.end();
    env.DATABASE_URL = url.toString();
  } else {
    const store = join(tmpdir(), `store-api-memory-pglite-${PRODUCTS}`);
    const metaFile = join(store, 'soak.json');
    if (existsSync(metaFile)) meta = JSON.parse(readFileSync(metaFile, 'utf8'));
    else {
      meta = await prepare({ dataDir: store });
      writeFileSync(metaFile, JSON.stringify(meta));
    }
    cpSync(store, join(work, 'data'), { recursive: true });
    env.DATA_DIR = join(work, 'data');
  }
  const pathsFile = join(work, 'paths.txt');
  writeFileSync(pathsFile, meta.cursors.map((c) => `/api/v1/products?limit=200&cursor=${encodeURIComponent(c)}\n`).join(''));
  writeFileSync(join(work, 'probe.mjs'), PROBE);
  const port = await freePort();
  const cli = fileURLToPath(new URL('../bin/store-api.js', import.meta.url));
  const server = await startServer(
    // `all` with npm start's flag, other roles as the image and the unit run them.
    [...(args['node-arg'] ?? (args.role === 'all' ? EMBEDDED_NODE_ARGS : SERVER_NODE_ARGS)), '--import', join(work, 'probe.mjs'), cli, args.role],
    { ...env, ...extraEnv, PORT: String(port) },
    port,
  );
  const began = Date.now();
  try {
    const idleMb = server.memory().rssMb;
    const headers = { Authorization: `Bearer ${meta.token}` };
    const hotUrl = `${server.origin}/api/v1/products?limit=200&cursor=${encodeURIComponent(meta.hot)}`;
    const probed = (t: number): Promise<MemorySample> => {
      const lines = existsSync(env.PROBE_FILE!) ? readFileSync(env.PROBE_FILE!, 'utf8').trim().split('\n') : [];
      const latest = new Map<number, Record<string, number> & { spaces: Record<string, number> }>();
      for (const line of lines) {
        const entry = JSON.parse(line);
        latest.set(entry.threadId, entry);
      }
      const main = latest.get(0);
      const others = [...latest.entries()].filter(([id]) => id !== 0).map(([, e]) => e);
      const sum = (key: string) => Math.round(others.reduce((n, e) => n + (e[key] ?? 0), 0) * 10) / 10;
      return sampleFromMetrics(server, t).then((s) =>
        main
          ? {
              ...s,
              arrayBuffersMb: main.arrayBuffersMb,
              newSpaceMb: main.spaces.new_space,
              threadsHeapMb: sum('heapTotalMb'),
              wasmMb: Math.round((sum('wasmMb') + main.wasmMb!) * 10) / 10,
            }
          : s,
      );
    };
    const figures = await soak(server, {
      seconds: Number(args.seconds),
      sampleSeconds: Number(args.sample),
      phaseSeconds: Number(args.phase),
      connections: 8,
      headers,
      hotUrl,
      pathsFile,
      sample: probed,
    });
    console.log(soakTable(figures, `\`${args.role}\` (idle ${idleMb} MiB)`, 30).join('\n'));
    const probe = readFileSync(env.PROBE_FILE!, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    console.log(JSON.stringify({ mappingsMb: mappings(server.child.pid!) }));
    console.log(
      JSON.stringify({
        role: args.role,
        env: extraEnv,
        idleMb,
        peakMb: figures.peakMb,
        requests: figures.requests,
        cpuMsPerRequest: figures.cpuMsPerRequest,
        flatness: figures.flatness,
        lowest: figures.lowest,
        referenceMb: figures.referenceMb,
      }),
    );
    writeFileSync(join(tmpdir(), `store-api-soak-${args.role}-${began}.ndjson`), probe.map((p) => JSON.stringify(p)).join('\n'));
    log(`probe lines kept in ${join(tmpdir(), `store-api-soak-${args.role}-${began}.ndjson`)}`);
  } finally {
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
