/**
 * A large stock CSV import with many webhook endpoints subscribed (issue 14): `rows` stock levels
 * set in one POST /admin/api/v1/inventory/import to a `serve` process, `endpoints` endpoints
 * subscribed to inventory.updated on one loopback receiver, a `worker` process fanning the events
 * out (rows × endpoints deliveries) and delivering them. Measured: the import's own time; the
 * fan-out (from the import's answer until the poller's position passes its last event, bounded);
 * deliveries/s at the receiver over a bounded window; the worker's RSS sampled every second (flat or
 * growing); and the list API's p99 under wrk before the import and while it, the fan-out and the
 * deliveries run. The backlog left at the end is not waited for (the scratch database is dropped).
 */
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { pino } from 'pino';
import type { DatabaseHandle } from '../src/db/database.ts';
import { loadConfig } from '../src/config/config.ts';
import { createToken } from '../src/tokens/token.service.ts';
import { WebhookService } from '../src/webhooks/webhook.service.ts';
import { pollerCaughtUp } from '../src/webhooks/event-poller.ts';
import { SERVER_NODE_ARGS, freePort, log, startServer, wrk } from './bench-tools.ts';
import { startReceiver } from './webhook-bench.ts';

const CLI = fileURLToPath(new URL('../bin/store-api.js', import.meta.url));

export interface FanoutFigures {
  rows: number;
  endpoints: number;
  importSeconds: number;
  events: number;
  /** Deliveries queued by the fan-out (counted at the end). */
  deliveriesQueued: number;
  /** Seconds from the import's answer to the poller passing its last event; undefined when not done in time. */
  fanoutSeconds?: number;
  fanoutLimitSeconds: number;
  windowSeconds: number;
  deliveriesPerSecond: number;
  /** Worker RSS (MiB), one sample a second from the import's start to the window's end. */
  rss: number[];
  /** Index in `rss` of the first sample after the import answered (deliveries under way). */
  rssDelivering: number;
  listP99Before: number;
  /** While the import runs (its first `seconds`). */
  listP99Import: number;
  /** Right after the import answered: fan-out and deliveries under way. */
  listP99Delivering: number;
  listBefore: number;
  listImport: number;
  listDelivering: number;
}

export async function benchImportFanout(
  databaseUrl: string,
  database: DatabaseHandle,
  serveOrigin: string,
  /** A `serve` without the list page cache: the list's p99 before, during and after is of pages read from the database alike. */
  listOrigin: string,
  listToken: string,
  opts: { rows: number; endpoints: number; windowSeconds: number; fanoutLimitSeconds: number; connections: number; seconds: number },
): Promise<FanoutFigures> {
  const receiver = await startReceiver();
  const config = loadConfig({ DATABASE_URL: databaseUrl, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', LOG_LEVEL: 'silent' });
  const service = new WebhookService({ config, database, logger: pino({ level: 'silent' }) });
  for (let i = 0; i < opts.endpoints; i++) await service.createEndpoint({ url: `${receiver.origin}/hook/${i}`, event_types: ['inventory.updated'] });
  const { token: adminToken } = await createToken(database.db, { name: 'bench import', scopes: ['admin'] });
  const metricsPort = await freePort();
  const worker = await startServer(
    [...SERVER_NODE_ARGS, CLI, 'worker'],
    { DATABASE_URL: databaseUrl, METRICS_PORT: String(metricsPort), LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
    metricsPort,
  );
  const listUrl = `${listOrigin}/api/v1/products?limit=200`;
  const load = { connections: opts.connections, seconds: opts.seconds, headers: { Authorization: `Bearer ${listToken}` } };
  const rss: number[] = [];
  let sampler: NodeJS.Timeout | undefined;
  try {
    // Every row changes a stock-tracked product's stock, so every row is an inventory.updated event.
    const { rows: skus } = await sql<{ sku: string; stock: number }>`
      SELECT sku, stock FROM products WHERE product_type IN ('physical','food','digital_card') AND sku IS NOT NULL
      ORDER BY last_modified, id LIMIT ${opts.rows}`.execute(database.db);
    const csv = `sku,stock\n${skus.map((r) => `${r.sku},${r.stock + 1 + (r.stock % 7)}`).join('\n')}\n`;
    log(`import fan-out: list p99 before (${opts.seconds} s)`);
    await wrk(listUrl, { ...load, seconds: 2 });
    const before = await wrk(listUrl, load);

    log(`import fan-out: ${skus.length} rows, ${opts.endpoints} endpoints`);
    const {
      rows: [{ n: eventsBefore, seq: seqBefore }],
    } = (await sql<{ n: string; seq: string }>`SELECT count(*)::text AS n, coalesce(max(seq), 0)::text AS seq FROM events`.execute(database.db)) as {
      rows: [{ n: string; seq: string }];
    };
    rss.push(worker.memory().rssMb);
    sampler = setInterval(() => rss.push(worker.memory().rssMb), 1000);
    const started = performance.now();
    const duringImport = wrk(listUrl, load);
    const res = await fetch(`${serveOrigin}/admin/api/v1/inventory/import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'text/csv' },
      body: csv,
    });
    const answer = await res.text();
    if (res.status !== 201) throw new Error(`import answered ${res.status}: ${answer.slice(0, 500)}`);
    const imported = performance.now();
    const rssDelivering = rss.length;
    const importSeconds = (imported - started) / 1000;
    const importLoad = await duringImport;
    const duringDeliveries = wrk(listUrl, load);
    log(`import fan-out: import took ${importSeconds.toFixed(1)} s; fan-out and deliveries`);
    const startCount = await receiver.count();
    let fanoutSeconds: number | undefined;
    let windowCount: number | undefined;
    for (;;) {
      const elapsed = (performance.now() - imported) / 1000;
      if (windowCount === undefined && elapsed >= opts.windowSeconds) windowCount = (await receiver.count()) - startCount;
      if (fanoutSeconds === undefined) {
        // Done when no event is left after the poller's position (nothing else writes meanwhile). It
        // compared the position with the import's last event read as `created_at::text, seq::text
        // … ORDER BY created_at DESC, seq DESC`: ORDER BY took the text output columns, so "the last
        // event" was the greatest seq as text ('99999' of 1..300000, the 100,000th: the last stock
        // movement event), and the 1M run stopped waiting, counting no delivery, as the poller reached
        // the first inventory.updated event.
        const done = await pollerCaughtUp(database.db);
        if (done) fanoutSeconds = (performance.now() - imported) / 1000;
      }
      if (windowCount !== undefined && (fanoutSeconds !== undefined || elapsed >= opts.fanoutLimitSeconds)) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const windowSeconds = Math.min((performance.now() - imported) / 1000, opts.windowSeconds);
    const deliveringLoad = await duringDeliveries;
    clearInterval(sampler);
    sampler = undefined;
    const {
      rows: [counts],
    } = await sql<{ events: string; deliveries: string; subscribed: string }>`
      SELECT (SELECT count(*) FROM events)::text AS events, (SELECT count(*) FROM webhook_deliveries)::text AS deliveries,
        (SELECT count(*) FROM events WHERE type = 'inventory.updated' AND seq > ${seqBefore}::bigint)::text AS subscribed`.execute(database.db);
    // Once the poller has passed every event, each inventory.updated event of the import is queued
    // once per endpoint: anything else is a lost (or doubled) delivery, never a figure to print.
    const expected = Number(counts!.subscribed) * opts.endpoints;
    if (fanoutSeconds !== undefined && Number(counts!.deliveries) !== expected) {
      throw new Error(
        `the fan-out queued ${counts!.deliveries} deliveries for ${counts!.subscribed} inventory.updated events × ${opts.endpoints} endpoints (${expected})`,
      );
    }
    return {
      rows: skus.length,
      endpoints: opts.endpoints,
      importSeconds,
      events: Number(counts!.events) - Number(eventsBefore),
      deliveriesQueued: Number(counts!.deliveries),
      fanoutSeconds,
      fanoutLimitSeconds: opts.fanoutLimitSeconds,
      windowSeconds,
      deliveriesPerSecond: windowCount! / opts.windowSeconds,
      rss,
      rssDelivering,
      listP99Before: before.p99,
      listP99Import: importLoad.p99,
      listP99Delivering: deliveringLoad.p99,
      listBefore: before.perSecond,
      listImport: importLoad.perSecond,
      listDelivering: deliveringLoad.perSecond,
    };
  } finally {
    if (sampler) clearInterval(sampler);
    await worker.stop();
    receiver.child.kill('SIGTERM');
  }
}

/**
 * RSS growth while delivering: of the samples taken after the import answered, the last quarter's
 * mean over the second quarter's (the first quarter holds the worker warming up to the backlog).
 * Flat means the backlog of a million deliveries is not held in memory.
 */
export function rssGrowth(f: Pick<FanoutFigures, 'rss' | 'rssDelivering'>): number {
  const samples = f.rss.slice(f.rssDelivering);
  const quarter = Math.max(1, Math.floor(samples.length / 4));
  const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  return mean(samples.slice(-quarter)) / mean(samples.slice(quarter, 2 * quarter));
}
