/**
 * Prometheus metrics of webhook delivery, registered once per process in prom-client's default
 * registry (the one `/metrics` exposes). `metricOf` returns the already registered metric when this
 * module is evaluated twice (test runners, two loaders).
 */
import client from 'prom-client';

function metricOf<T extends client.Metric<string>>(name: string, create: () => T): T {
  return (client.register.getSingleMetric(name) as T | undefined) ?? create();
}

/** Attempts made, by outcome (success, http_error, timeout, connection_error, …). */
export const deliveriesAttempted = metricOf(
  'store_api_webhook_deliveries_attempted_total',
  () =>
    new client.Counter({
      name: 'store_api_webhook_deliveries_attempted_total',
      help: 'Webhook delivery attempts made, by outcome',
      labelNames: ['outcome'] as const,
    }),
);

export const deliveriesSucceeded = metricOf(
  'store_api_webhook_deliveries_succeeded_total',
  () =>
    new client.Counter({
      name: 'store_api_webhook_deliveries_succeeded_total',
      help: 'Webhook deliveries that received a 2xx answer',
    }),
);

export const deliveriesFailed = metricOf(
  'store_api_webhook_deliveries_failed_total',
  () =>
    new client.Counter({
      name: 'store_api_webhook_deliveries_failed_total',
      help: 'Failed webhook delivery attempts (each failed attempt counts once, dead-lettering ones included)',
    }),
);

export const deliveriesDeadLettered = metricOf(
  'store_api_webhook_deliveries_dead_lettered_total',
  () =>
    new client.Counter({
      name: 'store_api_webhook_deliveries_dead_lettered_total',
      help: 'Webhook deliveries moved to the dead letter queue after their last retry failed',
    }),
);

/** Duration of one HTTP attempt. */
export const attemptDuration = metricOf(
  'store_api_webhook_attempt_duration_seconds',
  () =>
    new client.Histogram({
      name: 'store_api_webhook_attempt_duration_seconds',
      help: 'Duration of one webhook delivery attempt (request sent until the response was read or failed), by outcome',
      labelNames: ['outcome'] as const,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    }),
);

/** From the event's creation to its successful delivery (includes queueing and retries). */
export const deliveryLatency = metricOf(
  'store_api_webhook_delivery_latency_seconds',
  () =>
    new client.Histogram({
      name: 'store_api_webhook_delivery_latency_seconds',
      help: 'Time from an event being written to its successful delivery, retries included',
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 43200, 86400],
    }),
);

/** Events fanned out by the poller. */
export const eventsQueued = metricOf(
  'store_api_webhook_events_polled_total',
  () =>
    new client.Counter({
      name: 'store_api_webhook_events_polled_total',
      help: 'Events read from the event log by the webhook poller',
    }),
);

let queueDepthSource: (() => Promise<number>) | undefined;

/** Sets where the queue-depth gauge reads from (this process's database); undefined clears it. */
export function setQueueDepthSource(source: (() => Promise<number>) | undefined): void {
  queueDepthSource = source;
}

/** Clears the queue-depth source only if it is still `source` (another part of the process may have set its own). */
export function releaseQueueDepthSource(source: () => Promise<number>): void {
  if (queueDepthSource === source) queueDepthSource = undefined;
}

metricOf(
  'store_api_webhook_queue_depth',
  () =>
    new client.Gauge({
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
    }),
);
