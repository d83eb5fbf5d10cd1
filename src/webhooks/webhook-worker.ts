/**
 * The webhook worker: the event poller and the delivery dispatcher of one process. It runs in
 * `store-api all` (npm start) and `store-api worker`; several workers may share one PostgreSQL
 * database (claims use SKIP LOCKED and leases, so no attempt is sent twice at once).
 *
 * States of the worker (each loop runs until STOPPING):
 *   POLL_WAITING     The poll loop sleeps WEBHOOK_POLL_INTERVAL_MS, or until woken (NOTIFY from the
 *                    `events` trigger on PostgreSQL).
 *   POLLING          One poller transaction: read events below the horizon, queue deliveries,
 *                    advance the position (event-poller.ts). A full batch polls again at once.
 *   DISPATCH_WAITING The dispatch loop sleeps until the next delivery falls due (capped at the poll
 *                    interval), or until woken: the poller queued deliveries, an attempt finished and
 *                    freed a slot, an admin made deliveries due (in process or by NOTIFY).
 *   CLAIMING         One claim transaction takes due deliveries for up to twice the worker's
 *                    concurrency (WEBHOOK_CONCURRENCY) and twice each endpoint's current limit
 *                    (endpoint-concurrency.ts): those that fit are sent at once, the rest wait in
 *                    the endpoint's queue here and go out the moment a request to it finishes, so
 *                    the receiver is kept busy while the next claim runs. While claims find
 *                    deliveries, every finished request wakes the loop to claim again.
 *   STOPPING         stop(): no further polls or claims; deliveries claimed but not sent are
 *                    released (no attempt recorded); attempts in flight finish and settle; the
 *                    LISTEN connection, the HTTP pool and the broker connections close. Then STOPPED.
 * Files: this one composes the worker (wake-ups, the LISTEN connection, the queue gauges) and
 * runs the poll loop (its heartbeat on /metrics after each round that did not fail); the dispatch loop, the endpoints' slots and the attempt are the dispatcher's
 * (delivery-dispatcher.ts); the settle batches are settle-batcher.ts, the LISTEN connection
 * listen-connection.ts, the sleeps that wake-ups cut short wakeable.ts (the wake-up signals
 * themselves webhook-wakeup.ts), the claim and settle statements delivery-queue.ts.
 */
import { finishedSpan } from '../shared/tracing.ts';
import { asPlatform } from '../db/store-scope.ts';
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { AppContext } from '../app-context.ts';
import { queueGaugeSource } from './queue-gauges.ts';
import { enabledEndpointSchemes } from './webhook-endpoint.repository.ts';
import { pollEvents, type PollResult } from './event-poller.ts';
import { BROKER_RECONCILE_MS, DeliveryDispatcher, type WebhookWorkerEvents } from './delivery-dispatcher.ts';
import { localWakeups } from './webhook-wakeup.ts';
import { loopBackoffMs, Wakeable } from './wakeable.ts';
import { ListenConnection } from '../db/listen-connection.ts';
import { DELIVERIES_CHANNEL, EVENTS_CHANNEL } from './webhook-wakeup.ts';
import { writeCommits } from '../db/write-clock.ts';
import { eventsQueued, releaseQueueGaugeSource, setQueueGaugeSource, workerHeartbeat, type QueueGaugeSource } from './webhook-metrics.ts';

export type { AttemptReport, WebhookWorkerEvents } from './delivery-dispatcher.ts';

/** Events one poll fans out (one transaction); a full batch polls again at once. */
const POLL_BATCH = 500;

export interface WebhookWorker {
  readonly id: string;
  readonly events: EventEmitter<WebhookWorkerEvents>;
  /** Whether the HTTP client is loaded (at start when the store has an HTTP endpoint; decision 0048). */
  readonly httpClientLoaded: boolean;
  /** Stops polling and claiming, waits for attempts in flight to settle, releases connections. */
  stop(): Promise<void>;
}

export interface WebhookWorkerOptions {
  /** Epoch ms; default Date.now. */
  clock?: () => number;
  workerId?: string;
  /** PostgreSQL URL to LISTEN on for wake-ups; default DATABASE_URL (PostgreSQL back end only). */
  listenUrl?: string;
  /** How often pooled broker connections are checked against their endpoints; default BROKER_RECONCILE_MS. */
  brokerReconcileMs?: number;
  /** Endpoints whose learned limits are kept while they hold nothing here; default IDLE_ENDPOINTS_REMEMBERED. */
  idleEndpointsRemembered?: number;
}

/** Starts the poller and dispatcher of this process. */
export function startWebhookWorker(ctx: AppContext, options: WebhookWorkerOptions = {}): Promise<WebhookWorker> {
  // Across stores (decision 0051): its claims, polls and settles name each row's store themselves;
  // every timer and loop it starts inherits the scope.
  return asPlatform(() => startWebhookWorkerOfEveryStore(ctx, options));
}

async function startWebhookWorkerOfEveryStore(ctx: AppContext, options: WebhookWorkerOptions): Promise<WebhookWorker> {
  const { config } = ctx;
  if (config.WEBHOOK_LEASE_MS < config.WEBHOOK_TIMEOUT_MS + 1000) {
    throw new Error(
      `WEBHOOK_LEASE_MS (${config.WEBHOOK_LEASE_MS}) must exceed WEBHOOK_TIMEOUT_MS (${config.WEBHOOK_TIMEOUT_MS}) by at least 1000 ms, or a slow attempt could be sent twice at once`,
    );
  }
  const worker = new PollingWorker(ctx, options);
  await worker.start();
  return worker;
}

/** The worker of one process: the poll loop here, the dispatcher beside it, the wake-ups of both. */
class PollingWorker implements WebhookWorker {
  readonly id: string;
  readonly events = new EventEmitter<WebhookWorkerEvents>();
  readonly #ctx: AppContext;
  readonly #clock: () => number;
  readonly #listenUrl: string | undefined;
  readonly #dispatcher: DeliveryDispatcher;
  readonly #pollWake = new Wakeable();
  #stopping = false;
  #loops: Promise<void>[] = [];
  #listener: ListenConnection | undefined;
  /** Consecutive failed polls, for their backoff. */
  #pollFailures = 0;
  readonly #onLocalWake = () => this.#dispatcher.wake();
  /** An endpoint was changed or deleted in this process: its broker connection closes now. */
  readonly #onEndpointChanged = (endpointId: string) => this.#dispatcher.closeEndpoint(endpointId);
  readonly #onEndpointReady = (url: string) => void this.#dispatcher.prepareEndpoint(url);
  /** A write committed in this process to our database: its events can be fanned out now. */
  readonly #onLocalWrite = (db: unknown) => {
    if (db === this.#ctx.database.db) this.#pollWake.wake();
  };
  readonly #queueGauges: QueueGaugeSource;

  constructor(ctx: AppContext, options: WebhookWorkerOptions) {
    this.#ctx = ctx;
    this.#queueGauges = queueGaugeSource(ctx.database.db);
    this.#clock = options.clock ?? Date.now;
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#listenUrl = ctx.database.backend === 'postgres' ? (options.listenUrl ?? ctx.config.DATABASE_URL) : undefined;
    this.#dispatcher = new DeliveryDispatcher(ctx, {
      workerId: this.id,
      clock: this.#clock,
      events: this.events,
      brokerReconcileMs: options.brokerReconcileMs ?? BROKER_RECONCILE_MS,
      ...(options.idleEndpointsRemembered === undefined ? {} : { idleEndpointsRemembered: options.idleEndpointsRemembered }),
    });
  }

  get httpClientLoaded(): boolean {
    return this.#dispatcher.httpClientLoaded;
  }

  async start(): Promise<void> {
    localWakeups.on('deliveries', this.#onLocalWake);
    localWakeups.on('endpoint-changed', this.#onEndpointChanged);
    localWakeups.on('endpoint-ready', this.#onEndpointReady);
    writeCommits.on('commit', this.#onLocalWrite);
    // Transports are loaded when first needed (decision 0048): those of the endpoints that exist
    // now are loaded before their first delivery. Only a head start: a connection lost during this
    // look-up (a failover, a terminated backend) must not end the start; each transport then loads
    // at its first delivery.
    const schemes = await enabledEndpointSchemes(this.#ctx.database.db).catch((error: unknown) => {
      this.#ctx.logger.warn({ err: error }, "looking up the endpoints' kinds at the worker's start failed; their transports load at their first delivery");
      return [];
    });
    await Promise.all(schemes.map((scheme) => this.#dispatcher.prepareEndpoint(`${scheme}:`)));
    if (this.#listenUrl) {
      this.#listener = new ListenConnection({
        url: this.#listenUrl,
        channels: [EVENTS_CHANNEL, DELIVERIES_CHANNEL],
        applicationName: 'store-api-webhook-listener',
        intervalMs: this.#ctx.config.WEBHOOK_POLL_INTERVAL_MS,
        logger: this.#ctx.logger,
        lostMessage: 'webhook LISTEN connection lost; polling only until it is back',
        restoredMessage: 'webhook LISTEN connection restored',
        onNotification: (channel) => (channel === EVENTS_CHANNEL ? this.#pollWake.wake() : this.#dispatcher.wake()),
        onListening: () => {
          // Events written while nobody listened are picked up now rather than at the next interval.
          this.#pollWake.wake();
          this.#dispatcher.wake();
          this.events.emit('listening');
        },
      });
      await this.#listener.open();
    }
    setQueueGaugeSource(this.#queueGauges);
    this.#loops = [this.#pollLoop(), this.#dispatcher.run()];
  }

  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    localWakeups.off('deliveries', this.#onLocalWake);
    localWakeups.off('endpoint-changed', this.#onEndpointChanged);
    localWakeups.off('endpoint-ready', this.#onEndpointReady);
    writeCommits.off('commit', this.#onLocalWrite);
    this.#pollWake.wake();
    this.#dispatcher.stopClaiming();
    await Promise.all(this.#loops);
    await this.#dispatcher.drain();
    await this.#listener?.close();
    releaseQueueGaugeSource(this.#queueGauges);
    await this.#dispatcher.close();
  }

  async #pollLoop(): Promise<void> {
    const interval = this.#ctx.config.WEBHOOK_POLL_INTERVAL_MS;
    let more = false;
    while (!this.#stopping) {
      // After a round that answered `more` the next one goes straight to its transaction: events
      // are known to wait, so the poller's check of whether any do is skipped.
      const known = more;
      more = false;
      // The deliveries this poll queues are handed straight to this worker's dispatcher, as far as
      // its room goes (leased in the fan-out statement itself: no claim statement for them) —
      // while its last claim found the queue drained; behind a backlog the claims serve it oldest
      // first (and the fan-out hands over nothing then anyway). The room is reserved while the
      // fan-out runs, so a claim alongside cannot take it too: the worker never holds more than
      // its room. A claim that found no room meanwhile is tried again when the fan-out is done.
      const now = this.#clock();
      const verdicts = this.#dispatcher.verdicts;
      let room = 0;
      const handover = () => {
        const reserved = this.#dispatcher.reserveHandover();
        room = reserved.room;
        return reserved.handover;
      };
      try {
        let result: PollResult;
        const startedAt = new Date();
        try {
          result = await pollEvents(this.#ctx.database.db, now, POLL_BATCH, handover, known);
        } finally {
          this.#dispatcher.endHandover(room);
        }
        if (result.events > 0) eventsQueued.inc(result.events);
        // With tracing on, a round that fanned events out is a span (an idle one is not), which the
        // attempts of the deliveries it handed over link to.
        const pollSpan =
          result.deliveries > 0
            ? finishedSpan('webhook poll', startedAt, { 'store_api.poll.events': result.events, 'store_api.poll.deliveries': result.deliveries })
            : undefined;
        if (result.handedOver.length > 0) this.#dispatcher.take(result.handedOver, now, verdicts, pollSpan);
        // A claim only for what one could take: not for deliveries to an endpoint its breaker paused
        // (a busy store's fan-out to a failing endpoint woke a claim and its nextDueAt every poll).
        // The dispatcher's sleep is capped at the poll interval, so it sees their pause's end anyway.
        if (result.deliveries - result.paused > result.handedOver.length) this.#dispatcher.wake();
        more = result.more;
        this.#pollFailures = 0;
        // Wall time, whatever the injected clock: Prometheus compares it with its own (`time()`).
        workerHeartbeat.setToCurrentTime({ loop: 'poll' });
        this.events.emit('polled', result);
        await this.#dispatcher.reconcileBrokers();
      } catch (error) {
        this.#pollFailures++;
        this.#ctx.logger.error({ err: error, workerId: this.id }, 'event poll failed');
        this.events.emit('loopError', error);
      }
      if (this.#stopping) break;
      if (this.#pollFailures > 0) await this.#pollWake.wait(loopBackoffMs(this.#pollFailures, interval));
      else if (!more) await this.#pollWake.wait(interval);
    }
  }
}
