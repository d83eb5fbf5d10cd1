/**
 * Prometheus metrics of retention pruning, in prom-client's default registry (the one `/metrics`
 * exposes); `metricOf` returns the already registered metric when this module is evaluated twice.
 */
import client from 'prom-client';

function metricOf<T extends client.Metric<string>>(name: string, create: () => T): T {
  return (client.register.getSingleMetric(name) as T | undefined) ?? create();
}

/** Rows deleted by pruning, by table (events, webhook_deliveries, webhook_dead_letters, webhook_attempts). */
export const rowsPruned = metricOf(
  'store_api_retention_pruned_rows_total',
  () =>
    new client.Counter({
      name: 'store_api_retention_pruned_rows_total',
      help: 'Rows deleted by retention pruning, by table (dead letters counted apart from succeeded deliveries)',
      labelNames: ['table'] as const,
    }),
);

/** Pruning runs, by result (ok, error). */
export const pruningRuns = metricOf(
  'store_api_retention_runs_total',
  () =>
    new client.Counter({
      name: 'store_api_retention_runs_total',
      help: 'Retention pruning runs of this process, by result',
      labelNames: ['result'] as const,
    }),
);

/** When the last pruning run of this process finished successfully. */
export const lastPruningRun = metricOf(
  'store_api_retention_last_success_timestamp_seconds',
  () =>
    new client.Gauge({
      name: 'store_api_retention_last_success_timestamp_seconds',
      help: 'Unix time at which the last successful retention pruning run of this process finished',
    }),
);
