/**
 * Webhook measurements: a `worker` process delivering to one loopback receiver (its own process),
 * from the commit of a batch of events to the last delivery's arrival (fan-out included), against
 * the delivery ceiling — a raw keep-alive POST loop (undici) with the same bodies to the
 * same receiver, WEBHOOK_CONCURRENCY requests in flight — and the change → receiver latency of
 * single writes while `worker` runs as its own process.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { pino } from 'pino';
import { Pool as HttpPool } from 'undici';
import type { DatabaseHandle } from '../src/db/database.ts';
import { runWrite } from '../src/db/write-clock.ts';
import { loadConfig } from '../src/config/config.ts';
import { productJson } from '../src/catalog/product.json-sql.ts';
import { updateProduct } from '../src/catalog/catalog.service.ts';
import { WebhookService } from '../src/webhooks/webhook.service.ts';
import { alternate, freePort, log, SERVER_NODE_ARGS, spread, startServer, type Spread } from './bench-tools.ts';

const CLI = fileURLToPath(new URL('../bin/store-api.js', import.meta.url));
const RECEIVER = fileURLToPath(new URL('./webhook-receiver.js', import.meta.url));
/** In-flight requests of the ceiling loop: the worker's default WEBHOOK_CONCURRENCY. */
const CEILING_CONCURRENCY = 16;

export interface WebhookResults {
  deliveries: number;
  worker: Spread;
  ceiling: Spread;
  ratio: Spread;
  endpointConcurrency: string;
  latencyP50: number;
  latencyP99: number;
  latencySamples: number;
  workerRssMb: number;
  /** CPU per delivery (µs) of the `worker` process, from the events' commit to the last arrival. */
  workerCpuUs: Spread;
  /** CPU per delivery (µs) of the PostgreSQL backends serving the worker's connections, same interval. */
  postgresCpuUs: Spread;
  /** CPU per request (µs) of the ceiling's POST loop (the bench process, which runs only the loop then). */
  ceilingCpuUs: Spread;
}

/** Clock ticks per second of /proc/<pid>/stat's times. */
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** User + system CPU (µs) a process has used, from /proc/<pid>/stat (0 once it is gone). */
function processCpuUs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields after the command: state is field 3, utime 14, stime 15.
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** The pids of the PostgreSQL backends serving the `worker` (its pool and its LISTEN connection, this database). */
async function workerBackends(database: DatabaseHandle): Promise<number[]> {
  const { rows } = await sql<{ pid: number }>`
    SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND application_name IN ('store-api-worker', 'store-api-webhook-listener')
  `.execute(database.db);
  return rows.map((r) => r.pid);
}

export async function startReceiver(): Promise<{
  origin: string;
  child: ChildProcess;
  count(): Promise<number>;
  arrival(key: string): Promise<number | undefined>;
}> {
  const port = await freePort();
  const child = spawn(process.execPath, [RECEIVER, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(child.stdout!, 'data');
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    child,
    count: async () => Number(await (await fetch(`${origin}/count`)).text()),
    arrival: async (key: string) => {
      const text = await (await fetch(`${origin}/arrival?key=${encodeURIComponent(key)}`)).text();
      return text === '' ? undefined : Number(text);
    },
  };
}

/** Polls `probe` every few ms until it returns true; fails after `timeoutMs`. */
async function until(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!(await probe())) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Appends `n` product.updated events (real product JSON) in one write-clock transaction. */
async function appendEvents(database: DatabaseHandle, n: number, offset: number): Promise<void> {
  await runWrite(database.db, async ({ trx, stamp }) => {
    await sql`
      INSERT INTO events (id, type, resource_type, resource_id, data, created_at)
      SELECT gen_random_uuid(), 'product.updated', 'product', p.id::text, p.doc, ${stamp}::timestamptz
      FROM products p ORDER BY p.last_modified, p.id OFFSET ${offset} LIMIT ${n}
    `.execute(trx);
  });
}

export async function benchWebhooks(
  databaseUrl: string,
  database: DatabaseHandle,
  opts: { deliveries: number; rounds: number; latencySamples: number; workerEnv?: Record<string, string> },
): Promise<WebhookResults> {
  const receiver = await startReceiver();
  const config = loadConfig({ DATABASE_URL: databaseUrl, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', LOG_LEVEL: 'silent' });
  const service = new WebhookService({ config, database, logger: pino({ level: 'silent' }) });
  await service.createEndpoint({ url: `${receiver.origin}/hook`, event_types: ['product.updated'] });
  const metricsPort = await freePort();
  const workerEnv: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: 'warn',
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    ...opts.workerEnv,
  };
  // BENCH_WORKER_NODE_ARGS: extra node flags for the worker alone, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
  const workerNodeArgs = (process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  // With the flags production gives every role (the image's NODE_OPTIONS, npm start's): SERVER_NODE_ARGS.
  const worker = await startServer([...SERVER_NODE_ARGS, ...workerNodeArgs, CLI, 'worker'], workerEnv, metricsPort);
  const endpointConcurrency = process.env.WEBHOOK_ENDPOINT_CONCURRENCY ?? 'default';
  try {
    // The ceiling's bodies: the same event bodies the worker sends.
    const { rows: bodies } = await sql<{ body: string }>`
      SELECT json_build_object('id', gen_random_uuid(), 'type', 'product.updated', 'created_at', iso_utc(now()), 'data', ${productJson})::text AS body
      FROM products p ORDER BY p.last_modified, p.id LIMIT ${opts.deliveries}
    `.execute(database.db);
    const http = new HttpPool(receiver.origin, { connections: CEILING_CONCURRENCY, pipelining: 1 });
    let offset = 0;
    const warmup = Math.min(500, opts.deliveries);
    // Each event is of its own product (the warm-up's, then each round's): with too few products a
    // round would append fewer events than it waits for, and wait out its timeout.
    const { rows: counted } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM products`.execute(database.db);
    const needed = warmup + opts.rounds * opts.deliveries;
    if (counted[0]!.n < needed) {
      throw new Error(
        `the webhook bench needs ${needed} products (${opts.rounds} rounds of ${opts.deliveries} events and a warm-up of ${warmup}), the database has ${counted[0]!.n}: raise --products`,
      );
    }
    log('webhooks: warm-up');
    const before = await receiver.count();
    await appendEvents(database, warmup, 0);
    offset += warmup;
    await until('warm-up deliveries', async () => (await receiver.count()) >= before + warmup, 120_000);

    const workerCpu: number[] = [];
    const postgresCpu: number[] = [];
    const ceilingCpu: number[] = [];
    const runs = await alternate<number>(opts.rounds, {
      'worker deliveries': async () => {
        const start = await receiver.count();
        // The clock starts when the events are committed: the worker cannot see them before, and
        // writing them (building 3,000–10,000 product documents in one transaction) is the store's
        // work, not delivery. Their fan-out to deliveries is the worker's and is counted.
        const appending = performance.now();
        await appendEvents(database, opts.deliveries, offset);
        const t = performance.now();
        const workerBefore = processCpuUs(worker.child.pid!);
        const backendsBefore = new Map((await workerBackends(database)).map((pid) => [pid, processCpuUs(pid)]));
        log(`    events appended in ${Math.round(t - appending)} ms`);
        offset += opts.deliveries;
        await until('deliveries', async () => (await receiver.count()) >= start + opts.deliveries, 600_000);
        const rate = opts.deliveries / ((performance.now() - t) / 1000);
        workerCpu.push((processCpuUs(worker.child.pid!) - workerBefore) / opts.deliveries);
        // A backend the pool opened meanwhile counts whole (it served this round only).
        const backendsAfter = await workerBackends(database);
        postgresCpu.push(backendsAfter.reduce((sum, pid) => sum + processCpuUs(pid) - (backendsBefore.get(pid) ?? 0), 0) / opts.deliveries);
        return rate;
      },
      'delivery ceiling (undici loop)': async () => {
        let next = 0;
        const cpuBefore = process.cpuUsage();
        const t = performance.now();
        await Promise.all(
          Array.from({ length: CEILING_CONCURRENCY }, async () => {
            while (next < bodies.length) {
              const body = bodies[next++]!.body;
              const res = await http.request({ path: '/hook', method: 'POST', body, headers: { 'content-type': 'application/json' } });
              await res.body.dump();
            }
          }),
        );
        const rate = bodies.length / ((performance.now() - t) / 1000);
        const cpu = process.cpuUsage(cpuBefore);
        ceilingCpu.push((cpu.user + cpu.system) / bodies.length);
        return rate;
      },
    });
    await http.close();

    // Change → receiver latency: single product updates written here (as the store would), one at
    // a time, each waited for at the receiver.
    log(`webhooks: latency of ${opts.latencySamples} changes`);
    const { rows: products } = await sql<{ id: string }>`SELECT id::text AS id FROM products ORDER BY last_modified DESC LIMIT ${opts.latencySamples}`.execute(
      database.db,
    );
    const latencies: number[] = [];
    for (const [i, { id }] of products.entries()) {
      // Taken before the write: the figure includes the write itself, so it errs long.
      const written = performance.timeOrigin + performance.now();
      await updateProduct(database.db, id, { name: `Renamed ${i}` });
      let arrived: number | undefined;
      await until(
        'a change at the receiver',
        async () => {
          arrived = await receiver.arrival(`product.updated:${id}`);
          return arrived !== undefined && arrived > written;
        },
        60_000,
      );
      latencies.push(Math.max(0, arrived! - written));
    }
    latencies.sort((a, b) => a - b);
    const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
    const workerRssMb = worker.memory().rssMb;
    const workerRuns = runs['worker deliveries']!;
    const ceilingRuns = runs['delivery ceiling (undici loop)']!;
    return {
      deliveries: opts.deliveries,
      worker: spread(workerRuns),
      ceiling: spread(ceilingRuns),
      ratio: spread(workerRuns.map((w, i) => w / ceilingRuns[i]!)),
      endpointConcurrency,
      latencyP50: at(0.5),
      latencyP99: at(0.99),
      latencySamples: latencies.length,
      workerRssMb,
      workerCpuUs: spread(workerCpu),
      postgresCpuUs: spread(postgresCpu),
      ceilingCpuUs: spread(ceilingCpu),
    };
  } finally {
    await worker.stop();
    receiver.child.kill('SIGTERM');
  }
}
