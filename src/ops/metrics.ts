/**
 * The process's Prometheus metrics, all in prom-client's default registry so that metrics other
 * features register at module level (webhook deliveries, src/webhooks/) appear on the same
 * `/metrics` page. Each metric is declared once per process (shared/prometheus.ts: a module evaluated
 * twice, by test runners or two loaders, gets the registered one).
 */
import { readFileSync, statfsSync } from 'node:fs';
import client from 'prom-client';
import { counter, gauge, histogram } from '../shared/prometheus.ts';
import type { DatabaseHandle } from '../db/database.ts';

/** The registry `/metrics` exposes (prom-client's default). */
export const metricsRegistry = client.register;

/** HTTP requests by method, route template (never the raw URL) and status code. */
export const httpRequestsTotal = counter({
  name: 'http_requests_total',
  help: 'HTTP requests served, by method, route template and status code',
  labelNames: ['method', 'route', 'status_code'] as const,
});

/** Latency of HTTP requests, from arrival to the last byte of the response. */
export const httpRequestDuration = histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request latency in seconds (until the response is fully sent), by method, route template and status code',
  labelNames: ['method', 'route', 'status_code'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
});

/** Requests refused with 429, by budget. */
export const rateLimitRejections = counter({
  name: 'store_api_rate_limit_rejections_total',
  help: 'Requests refused with 429 rate_limited, by budget (standard, export)',
  labelNames: ['class'] as const,
});

/** Rate-limit checks that could not reach the store (Redis down); those requests were let through. */
export const rateLimitStoreErrors = counter({
  name: 'store_api_rate_limit_store_errors_total',
  help: 'Rate-limit checks that failed to reach the counter store; the request was served without a limit',
});

export const rateLimitUncounted = counter({
  name: 'store_api_rate_limit_uncounted_total',
  help: 'Requests served without a limit because the rate-limit store (Redis) was out (breaker open); Redis was not asked',
});

export const rateLimitStoreOut = gauge({
  name: 'store_api_rate_limit_store_out',
  help: '1 while the rate-limit store (Redis) is considered out and requests are served uncounted, else 0',
});

const trackedDatabases = new Set<DatabaseHandle>();

gauge({
  name: 'store_api_db_pool_connections',
  help: 'Database connections of this process by state: total (open), idle, in_use, waiting (requests queued for a connection)',
  labelNames: ['state'] as const,
  collect() {
    let total = 0;
    let idle = 0;
    let waiting = 0;
    for (const database of trackedDatabases) {
      const stats = database.poolStats();
      total += stats.total;
      idle += stats.idle;
      waiting += stats.waiting;
    }
    this.set({ state: 'total' }, total);
    this.set({ state: 'idle' }, idle);
    this.set({ state: 'in_use' }, total - idle);
    this.set({ state: 'waiting' }, waiting);
  },
});

// Whether the database can take writes, as /readyz says it (db/storage-health.ts): an out-of-space
// error in the last 30 s, the embedded disk below DATA_DIR_MIN_FREE_MB, or the embedded database
// failed for good. Any back end; read at scrape time.
gauge({
  name: 'store_api_database_cannot_write',
  help: "1 while this process's database cannot take writes (its disk is full: writes are answered 507 and /readyz 503), else 0",
  collect() {
    let cannot = false;
    for (const database of trackedDatabases) cannot ||= database.storage.cannotWrite() !== undefined;
    this.set(cannot ? 1 : 0);
  },
});

/** The file system holding an embedded database's data directory, or null (PostgreSQL, in memory, unreadable). */
function dataDirFilesystem(): { dir: string; avail: number; size: number } | null {
  let worst: { dir: string; avail: number; size: number } | null = null;
  for (const database of trackedDatabases) {
    if (!database.dataDir) continue;
    try {
      const stats = statfsSync(database.dataDir);
      const fs = { dir: database.dataDir, avail: stats.bavail * stats.bsize, size: stats.blocks * stats.bsize };
      if (!worst || fs.avail < worst.avail) worst = fs;
    } catch {
      // Gone or unreadable: nothing to report for it.
    }
  }
  return worst;
}

// The embedded database's disk (PostgreSQL's is its server's: watch it there), labelled with the
// data directory's path (one per process). Only processes with a data directory have the series, so
// an alert on them never takes a PostgreSQL process for an empty disk.
gauge({
  name: 'store_api_data_dir_filesystem_avail_bytes',
  help: "Bytes available to this process on the file system of the embedded database's data directory (DATA_DIR); read at scrape time",
  labelNames: ['data_dir'] as const,
  collect() {
    this.reset();
    const fs = dataDirFilesystem();
    if (fs) this.set({ data_dir: fs.dir }, fs.avail);
  },
});

gauge({
  name: 'store_api_data_dir_filesystem_size_bytes',
  help: "Size in bytes of the file system of the embedded database's data directory (DATA_DIR); read at scrape time",
  labelNames: ['data_dir'] as const,
  collect() {
    this.reset();
    const fs = dataDirFilesystem();
    if (fs) this.set({ data_dir: fs.dir }, fs.size);
  },
});

/** Reports `database`'s pool on /metrics until the returned function is called. */
export function trackDatabasePool(database: DatabaseHandle): () => void {
  trackedDatabases.add(database);
  return () => trackedDatabases.delete(database);
}

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/** Always 1; its labels say what runs: the service's version (package.json) and Node's. */
gauge({
  name: 'store_api_build_info',
  help: 'Always 1: the labels say which version of the service (package.json) runs on which Node.js',
  labelNames: ['version', 'node_version'] as const,
}).set({ version, node_version: process.version }, 1);

if (!metricsRegistry.getSingleMetric('process_cpu_seconds_total')) {
  client.collectDefaultMetrics({ register: metricsRegistry });
}
