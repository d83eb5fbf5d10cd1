/**
 * Prometheus metrics of retention pruning, in prom-client's default registry (the one `/metrics`
 * exposes), declared once per process (shared/prometheus.ts).
 */
import { counter, gauge } from '../shared/prometheus.ts';

/** Rows deleted by pruning, by table (events, webhook_deliveries, webhook_dead_letters, webhook_attempts). */
export const rowsPruned = counter({
  name: 'store_api_retention_pruned_rows_total',
  help: 'Rows deleted by retention pruning, by table (dead letters counted apart from succeeded deliveries)',
  labelNames: ['table'] as const,
});

/** Pruning runs, by result (ok, error). */
export const pruningRuns = counter({
  name: 'store_api_retention_runs_total',
  help: 'Retention pruning runs of this process, by result',
  labelNames: ['result'] as const,
});

/** When the last pruning run of this process finished successfully. */
export const lastPruningRun = gauge({
  name: 'store_api_retention_last_success_timestamp_seconds',
  help: 'Unix time at which the last successful retention pruning run of this process finished',
});
