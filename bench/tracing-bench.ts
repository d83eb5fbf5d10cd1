/**
 * `npm run bench -- --only tracing` (decision 0052): what tracing costs at the default sampler
 * (every request, statement and attempt a span), measured against tracing off in the same run on
 * the same store. The list: two `serve` processes, one exporting OTLP/HTTP protobuf to a loopback
 * sink that accepts and drops, alternated under wrk over the same distinct pages. The deliveries:
 * the webhook bench (webhook-bench.ts) run twice, its `worker` without and with an OTLP endpoint,
 * each against its own delivery ceiling measured in the same round.
 */
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import type { DatabaseHandle } from '../src/db/database.ts';
import { SERVER_NODE_ARGS, alternate, freePort, log, spread, startServer, type Spread } from './bench-tools.ts';
import { apiPages, DISTINCT_PAGES, spreadPositions, type PagesResult } from './distinct-pages.ts';
import { benchWebhooks, type WebhookResults } from './webhook-bench.ts';

export interface TracingResults {
  listOff: Spread;
  listOn: Spread;
  /** Pages/s with tracing on ÷ off, per round. */
  listRatio: Spread;
  cpuMsOff: Spread;
  cpuMsOn: Spread;
  deliveriesOff: WebhookResults;
  deliveriesOn: WebhookResults;
  /** Spans the sink received (protobuf requests, bytes). */
  sinkRequests: number;
  sinkBytes: number;
}

const CLI = fileURLToPath(new URL('../bin/store-api.js', import.meta.url));

/** An OTLP/HTTP receiver that counts and drops. */
async function startSink(): Promise<{ url: string; requests: () => number; bytes: () => number; close(): Promise<void> }> {
  let requests = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    bytes: () => bytes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export async function benchTracing(
  databaseUrl: string,
  database: DatabaseHandle,
  token: string,
  opts: {
    rounds: number;
    seconds: number;
    connections: number;
    limit: number;
    deliveries: number;
    latencySamples: number;
    /** The environment the other benchmarks give `serve` (rate limits out of the way), with `extra`. */
    serverEnv: (extra: Record<string, string>) => Record<string, string>;
  },
): Promise<TracingResults> {
  const sink = await startSink();
  const tracingEnv = { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url };
  const distinct = await spreadPositions(database.db, DISTINCT_PAGES, opts.limit);
  const [offPort, onPort] = [await freePort(), await freePort()];
  const serve = (port: number, env: Record<string, string>) =>
    startServer([...SERVER_NODE_ARGS, CLI, 'serve'], opts.serverEnv({ DATABASE_URL: databaseUrl, PORT: String(port), ...env }), port);
  const off = await serve(offPort, {});
  const on = await serve(onPort, tracingEnv);
  try {
    const load = { connections: opts.connections, seconds: opts.seconds, headers: { Authorization: `Bearer ${token}` } };
    log('tracing: list, distinct pages, off and on (warm-up)');
    await apiPages(off.origin, off.child.pid!, distinct.cursors, opts.limit, { ...load, seconds: 2 })();
    await apiPages(on.origin, on.child.pid!, distinct.cursors, opts.limit, { ...load, seconds: 2 })();
    const runs = await alternate<PagesResult>(opts.rounds, {
      'list, tracing off': apiPages(off.origin, off.child.pid!, distinct.cursors, opts.limit, load),
      'list, tracing on': apiPages(on.origin, on.child.pid!, distinct.cursors, opts.limit, load),
    });
    const offRuns = runs['list, tracing off']!;
    const onRuns = runs['list, tracing on']!;
    await off.stop();
    await on.stop();
    log('tracing: deliveries, tracing off');
    const deliveriesOff = await benchWebhooks(databaseUrl, database, opts);
    log('tracing: deliveries, tracing on');
    const deliveriesOn = await benchWebhooks(databaseUrl, database, { ...opts, workerEnv: tracingEnv });
    return {
      listOff: spread(offRuns.map((r) => r.perSecond)),
      listOn: spread(onRuns.map((r) => r.perSecond)),
      listRatio: spread(onRuns.map((r, i) => r.perSecond / offRuns[i]!.perSecond)),
      cpuMsOff: spread(offRuns.map((r) => r.cpuMsPerPage ?? Number.NaN)),
      cpuMsOn: spread(onRuns.map((r) => r.cpuMsPerPage ?? Number.NaN)),
      deliveriesOff,
      deliveriesOn,
      sinkRequests: sink.requests(),
      sinkBytes: sink.bytes(),
    };
  } finally {
    await off.stop();
    await on.stop();
    await sink.close();
  }
}
