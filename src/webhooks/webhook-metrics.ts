/**
 * Prometheus metrics of webhook delivery, in prom-client's default registry (the one `/metrics`
 * exposes), declared once per process (shared/prometheus.ts).
 */
import { counter, gauge, histogram } from '../shared/prometheus.ts';
import { destinationKind } from './webhook-destination.ts';

/**
 * The `destination_kind` label of an attempt: `http` (http:// and https:// receivers), `amqp`,
 * `mqtt` or `nats` (webhook-destination.ts). Four values, so it multiplies the series by at most four.
 */
export function destinationKindLabel(url: string): 'http' | 'amqp' | 'mqtt' | 'nats' {
  const kind = destinationKind(url);
  return kind === 'https' ? 'http' : kind;
}

/** Attempts made, by outcome (success, http_error, timeout, connection_error, …) and destination kind. */
export const deliveriesAttempted = counter({
  name: 'store_api_webhook_deliveries_attempted_total',
  help: 'Webhook delivery attempts made, by outcome and destination kind (http, amqp, mqtt, nats)',
  labelNames: ['outcome', 'destination_kind'] as const,
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

/** Duration of one attempt (an HTTP request, or a publish to a broker). */
export const attemptDuration = histogram({
  name: 'store_api_webhook_attempt_duration_seconds',
  help: 'Duration of one webhook delivery attempt (request sent or message published until the answer was read or failed), by outcome and destination kind',
  labelNames: ['outcome', 'destination_kind'] as const,
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

/**
 * When each loop of this process's webhook worker last finished a round without error (Unix
 * seconds): `poll` (the event poller) and `dispatch` (the claim loop). Both go round at least every
 * WEBHOOK_POLL_INTERVAL_MS while healthy, so a value far behind the clock means the loop is stuck or
 * its database statements fail. Only processes running a worker have the series.
 */
export const workerHeartbeat = gauge({
  name: 'store_api_webhook_worker_heartbeat_timestamp_seconds',
  help: 'Unix time at which a loop of this webhook worker (poll, dispatch) last finished a round without error',
  labelNames: ['loop'] as const,
});

/** What the queue gauges read at scrape time: this process's database. */
export interface QueueGaugeSource {
  /** Deliveries waiting (pending, or failed with a retry scheduled). */
  depth(): Promise<number>;
  /** Seconds the most overdue claimable delivery has been due; 0 when none is due. */
  ageSeconds(): Promise<number>;
}

let queueSource: QueueGaugeSource | undefined;

/** Sets where the queue gauges read from (this process's database); undefined clears it. */
export function setQueueGaugeSource(source: QueueGaugeSource | undefined): void {
  queueSource = source;
}

/** Clears the queue gauges' source only if it is still `source` (another part of the process may have set its own). */
export function releaseQueueGaugeSource(source: QueueGaugeSource): void {
  if (queueSource === source) queueSource = undefined;
}

gauge({
  name: 'store_api_webhook_queue_depth',
  help: 'Webhook deliveries waiting (pending, or failed with a retry scheduled); read from the database at scrape time',
  async collect() {
    if (!queueSource) return;
    try {
      this.set(await queueSource.depth());
    } catch {
      // A scrape during shutdown or a database outage keeps the last value.
    }
  },
});

gauge({
  name: 'store_api_webhook_queue_age_seconds',
  help: 'Seconds the most overdue waiting delivery has been due without being delivered (pending or failed with its retry time passed, of an enabled endpoint not paused by its breaker, of an active store; an attempt in flight included); 0 when none is due. Read from the database at scrape time',
  async collect() {
    if (!queueSource) return;
    try {
      this.set(await queueSource.ageSeconds());
    } catch {
      // As for the depth: the last value stays.
    }
  },
});
