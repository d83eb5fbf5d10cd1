/**
 * Prometheus metrics of webhook delivery, in prom-client's default registry (the one `/metrics`
 * exposes), declared once per process (shared/prometheus.ts).
 */
import { counter, gauge, histogram } from '../shared/prometheus.ts';

/** Attempts made, by outcome (success, http_error, timeout, connection_error, …). */
export const deliveriesAttempted = counter({
  name: 'store_api_webhook_deliveries_attempted_total',
  help: 'Webhook delivery attempts made, by outcome',
  labelNames: ['outcome'] as const,
});

export const deliveriesSucceeded = counter({
  name: 'store_api_webhook_deliveries_succeeded_total',
  help: 'Webhook deliveries that received a 2xx answer',
});

export const deliveriesFailed = counter({
  name: 'store_api_webhook_deliveries_failed_total',
  help: 'Failed webhook delivery attempts (each failed attempt counts once, dead-lettering ones included)',
});

export const deliveriesDeadLettered = counter({
  name: 'store_api_webhook_deliveries_dead_lettered_total',
  help: 'Webhook deliveries moved to the dead letter queue after their last retry failed',
});

/** Duration of one HTTP attempt. */
export const attemptDuration = histogram({
  name: 'store_api_webhook_attempt_duration_seconds',
  help: 'Duration of one webhook delivery attempt (request sent until the response was read or failed), by outcome',
  labelNames: ['outcome'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
});

/** From the event's creation to its successful delivery (includes queueing and retries). */
export const deliveryLatency = histogram({
  name: 'store_api_webhook_delivery_latency_seconds',
  help: 'Time from an event being written to its successful delivery, retries included',
  buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 43200, 86400],
});

/** Events fanned out by the poller. */
export const eventsQueued = counter({
  name: 'store_api_webhook_events_polled_total',
  help: 'Events read from the event log by the webhook poller',
});

let queueDepthSource: (() => Promise<number>) | undefined;

/** Sets where the queue-depth gauge reads from (this process's database); undefined clears it. */
export function setQueueDepthSource(source: (() => Promise<number>) | undefined): void {
  queueDepthSource = source;
}

/** Clears the queue-depth source only if it is still `source` (another part of the process may have set its own). */
export function releaseQueueDepthSource(source: () => Promise<number>): void {
  if (queueDepthSource === source) queueDepthSource = undefined;
}

gauge({
  name: 'store_api_webhook_queue_depth',
  help: 'Webhook deliveries waiting (pending, or failed with a retry scheduled); read from the database at scrape time',
  async collect() {
    if (!queueDepthSource) return;
    try {
      this.set(await queueDepthSource());
    } catch {
      // A scrape during shutdown or a database outage keeps the last value.
    }
  },
});
