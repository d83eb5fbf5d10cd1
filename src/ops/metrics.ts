/**
 * The process's Prometheus metrics, all in prom-client's default registry so that metrics other
 * features register at module level (webhook deliveries, src/webhooks/) appear on the same
 * `/metrics` page. Each metric is declared once per process (shared/prometheus.ts: a module evaluated
 * twice, by test runners or two loaders, gets the registered one).
 */
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

/** Reports `database`'s pool on /metrics until the returned function is called. */
export function trackDatabasePool(database: DatabaseHandle): () => void {
  trackedDatabases.add(database);
  return () => trackedDatabases.delete(database);
}

if (!metricsRegistry.getSingleMetric('process_cpu_seconds_total')) {
  client.collectDefaultMetrics({ register: metricsRegistry });
}
