/**
 * The delivery dispatcher of a webhook worker (webhook-worker.ts composes it with the event poller):
 * the dispatch loop, the endpoints' slots and queues here, and the attempt.
 *
 *   DISPATCH_WAITING The loop sleeps until the next delivery falls due (capped at the poll
 *                    interval), or until woken: the poller queued deliveries, an attempt finished and
 *                    freed a slot, an admin made deliveries due (in process or by NOTIFY).
 *   CLAIMING         One claim transaction takes due deliveries for up to twice the worker's
 *                    concurrency (WEBHOOK_CONCURRENCY) and twice each endpoint's current limit
 *                    (endpoint-concurrency.ts): those that fit are sent at once, the rest wait in
 *                    the endpoint's queue here and go out the moment a request to it finishes, so
 *                    the receiver is kept busy while the next claim runs. While claims find
 *                    deliveries, every finished request wakes the loop to claim again.
 *   A poll's fan-out may hand deliveries straight over (`reserveHandover` … `take`): room reserved
 *   for it is not claimed alongside.
 *
 * An attempt: sign → deliver by the URL's transport (delivery-transport.ts: a POST, or a publish
 * to a broker) → settle (delivery-queue.ts, in batches: settle-batcher.ts), never inside a database
 * transaction. Its endpoint slot is free again when the answer is in; the settle follows in a batch
 * (the delivery stays leased until then, so at-least-once holds). A claimed delivery is sent only
 * while its lease still covers a whole attempt; otherwise it is released unsent.
 *
 * FIFO endpoints (decision 0059) are served apart, a line at a time: each claim also takes the head
 * batch of the FIFO lines no worker holds (claimFifoBatches), and each batch is sent, settled as a
 * whole, and its line woken to claim the next (#sendLine). Their sends count toward
 * WEBHOOK_CONCURRENCY like any.
 */
import type { EventEmitter } from 'node:events';
import type { AppContext } from '../app-context.ts';
import type { BreakerPolicy } from './circuit-breaker.ts';
import type { RetryPolicy } from './retry-policy.ts';
import {
  claimDueDeliveries,
  claimFifoBatches,
  decideSettlement,
  fifoEndpointsExist,
  nextDueAt,
  releaseDeliveries,
  settleDeliveries,
  settleDelivery,
  type ClaimedBatch,
  type ClaimedDelivery,
  type Finished,
  type SettleResult,
  type Settlement,
} from './delivery-queue.ts';
import { batchBody, batchId } from './fifo-line.ts';
import { CLAIM_AHEAD_ROUNDS, answeredFast, claimAhead, nextConcurrencyLimit, type ConcurrencyPolicy } from './endpoint-concurrency.ts';
import type { Handover, PollResult } from './event-poller.ts';
import { WebhookHttpClient, type HttpAttemptResult } from './webhook-http-client.ts';
import { DeliveryTransport } from './delivery-transport.ts';
import { credentialKeys } from './endpoint-credentials.ts';
import { destinationKind } from './webhook-destination.ts';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, type Attributes, type SpanContext } from '@opentelemetry/api';
import { activeTracing, inSpan, injectTraceHeaders, storedTraceContext } from '../shared/tracing.ts';
import { enabledEndpointUrls } from './webhook-endpoint.repository.ts';
import { signatureHeaders } from './webhook-signing.ts';
import { loopBackoffMs, Wakeable } from './wakeable.ts';
import { SettleBatcher } from './settle-batcher.ts';
import {
  attemptDuration,
  deliveriesAttempted,
  deliveriesDeadLettered,
  deliveriesFailed,
  deliveriesSucceeded,
  deliveryLatency,
  destinationKindLabel,
  workerHeartbeat,
} from './webhook-metrics.ts';

/** Most attempts settled in one statement (bounds how long it holds endpoint rows). */
const SETTLE_BATCH_MAX = 500;
/**
 * On PGlite every statement runs on the thread that also serves HTTP (decision 0005): smaller
 * settle batches there, and claims of at most this many rows.
 */
const PGLITE_SETTLE_BATCH_MAX = 100;
const PGLITE_CLAIM_MAX = 64;
/**
 * Lease a claimed delivery must still have, beyond WEBHOOK_TIMEOUT_MS, to be sent; one with less
 * is released unsent (half of the 1 s by which the lease must exceed the timeout).
 */
const LEASE_MARGIN_MS = 500;
/**
 * How often pooled broker connections are checked against their endpoints (changed, disabled or
 * deleted by another process; in this process the admin service says so at once).
 */
export const BROKER_RECONCILE_MS = 10_000;
/**
 * Endpoints this worker remembers while they hold nothing here (their learned limit, whether they
 * answer fast): the most recently sent to are kept, older ones start again as new endpoints. What
 * the worker keeps, and what each claim sends to the database, follows the endpoints it is busy
 * with, not every endpoint of every store it has ever delivered to.
 */
export const IDLE_ENDPOINTS_REMEMBERED = 1000;

/** What this worker holds for one endpoint. */
interface EndpointSlots {
  /** The endpoint's store (from its first delivery here): a claim's rounds across stores count what each holds. */
  storeId: string;
  /** Deliveries in flight now may not exceed this (endpoint-concurrency.ts). */
  limit: number;
  /** HTTP requests in flight. */
  sending: number;
  /** Claimed, not sent yet, oldest first, each with its lease's end (worker clock). */
  readonly waiting: Array<{ delivery: ClaimedDelivery; leaseUntil: number }>;
  /** Failed attempts not settled yet: nothing more is sent until their breaker verdict is known. */
  failuresSettling: number;
  /** The last answer was a success faster than WEBHOOK_SLOW_ANSWER_MS (claims reach further ahead). */
  fast: boolean;
  /**
   * The number (#breakerVerdicts) of the verdict that last opened this endpoint's breaker here, 0 if
   * none: a claim or hand-over that started before it may have read the endpoint as it was before
   * the failure that opened it, and what it brings for the endpoint goes back unsent.
   */
  openedAt: number;
  /** When (worker clock) the breaker last opened here: a claim older than a lease cannot bring stale rows any more. */
  openedClock: number;
}

/** What one finished attempt did, as the worker reports it. */
export interface AttemptReport {
  readonly deliveryId: string;
  readonly endpointId: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly attemptNumber: number;
  /** When the attempt started (epoch ms, the worker's clock). */
  readonly startedAt: number;
  readonly result: HttpAttemptResult;
  /** The delivery's new state; absent when the lease had been lost (nothing recorded). */
  readonly settlement?: Settlement;
  readonly endpointDisabled: boolean;
}

/** Typed events a worker emits (tests wait on them instead of sleeping). */
export interface WebhookWorkerEvents {
  polled: [PollResult];
  claimed: [readonly ClaimedDelivery[]];
  attempt: [AttemptReport];
  /** A loop step failed (logged too); the loop carries on after a backoff (loopBackoffMs). */
  loopError: [unknown];
  /** The LISTEN connection (PostgreSQL) is open, at start or after a reconnect. */
  listening: [];
  /** The HTTP client was loaded and its pool made ahead of a delivery (an HTTP endpoint exists). */
  httpReady: [];
}

export interface DispatcherOptions {
  /** The worker's id: the claims' and leases' holder. */
  readonly workerId: string;
  readonly clock: () => number;
  /** The worker's events: `claimed`, `attempt` and `loopError` are emitted here. */
  readonly events: EventEmitter<WebhookWorkerEvents>;
  readonly brokerReconcileMs: number;
  /** Idle endpoints remembered; default IDLE_ENDPOINTS_REMEMBERED. */
  readonly idleEndpointsRemembered?: number;
}

export class DeliveryDispatcher {
  readonly #id: string;
  readonly #events: EventEmitter<WebhookWorkerEvents>;
  readonly #ctx: AppContext;
  readonly #clock: () => number;
  readonly #retry: RetryPolicy;
  readonly #breaker: BreakerPolicy;
  /** Breaker openings this worker has settled so far (see EndpointSlots.openedAt). */
  #breakerVerdicts = 0;
  readonly #transport: DeliveryTransport;
  /** With tracing on: the span of the claim (or poll) that took each delivery, which its attempt's span links to. */
  readonly #claimSpans = new WeakMap<ClaimedDelivery, SpanContext>();
  readonly #brokerReconcileMs: number;
  readonly #idleRemembered: number;
  #brokersReconciledAt = 0;
  readonly #dispatchWake = new Wakeable();
  readonly #concurrency: ConcurrencyPolicy;
  readonly #settleBatchMax: number;
  readonly #settles: SettleBatcher;
  /** Attempts (send and settle) and releases running, for drain() to wait on. */
  readonly #running = new Set<Promise<unknown>>();
  readonly #endpoints = new Map<string, EndpointSlots>();
  /**
   * The endpoints with deliveries waiting here, in the order #pump serves them (one sent to moves
   * to the end): a pump walks these, not every endpoint the worker remembers. An endpoint whose
   * queue was emptied elsewhere (a breaker opening, a stop) leaves it when the pump reaches it.
   */
  readonly #queued = new Map<string, EndpointSlots>();
  /** HTTP requests in flight, deliveries waiting here, attempts waiting for their settle. */
  #sending = 0;
  #waiting = 0;
  #settling = 0;
  /** FIFO endpoints whose line this worker holds (a batch being sent or settled). */
  readonly #lines = new Set<string>();
  /**
   * The store of each FIFO endpoint this worker has sent to (they never enter #endpoints): the
   * broker reconcile asks after their connections too, rather than closing them as gone.
   */
  readonly #lineStores = new Map<string, string>();
  /** Whether enabled FIFO endpoints existed when last asked (fifoEndpointsExist), and when that was (worker clock). */
  #fifoEndpoints = false;
  #fifoCheckedAt = Number.NEGATIVE_INFINITY;
  /** Room promised to a claim or a poll's handover still running. */
  #reserved = 0;
  /** The dispatch loop found no room because a handover held it: the poll wakes it when done. */
  #starved = false;
  /** The last claim found deliveries: a freed slot should claim again. */
  #backlog = false;
  #stopping = false;
  /** Consecutive failed steps of the loop, for its backoff. */
  #dispatchFailures = 0;

  constructor(ctx: AppContext, options: DispatcherOptions) {
    this.#ctx = ctx;
    this.#id = options.workerId;
    this.#events = options.events;
    this.#clock = options.clock;
    this.#brokerReconcileMs = options.brokerReconcileMs;
    this.#idleRemembered = options.idleEndpointsRemembered ?? IDLE_ENDPOINTS_REMEMBERED;
    this.#retry = { scheduleMs: ctx.config.webhookRetryScheduleMs };
    this.#breaker = { threshold: ctx.config.WEBHOOK_BREAKER_THRESHOLD, pauseMs: ctx.config.WEBHOOK_BREAKER_PAUSE_MS };
    this.#settleBatchMax = ctx.database.backend === 'pglite' ? PGLITE_SETTLE_BATCH_MAX : SETTLE_BATCH_MAX;
    this.#settles = new SettleBatcher({ db: ctx.database.db, batchMax: this.#settleBatchMax, mayGather: () => this.#sending > 0 && !this.#stopping });
    this.#concurrency = {
      initial: ctx.config.WEBHOOK_ENDPOINT_CONCURRENCY,
      min: 1,
      max: Math.max(ctx.config.WEBHOOK_ENDPOINT_CONCURRENCY, ctx.config.WEBHOOK_ENDPOINT_CONCURRENCY_MAX),
      slowMs: ctx.config.WEBHOOK_SLOW_ANSWER_MS,
    };
    this.#transport = new DeliveryTransport({
      http: new WebhookHttpClient({
        timeoutMs: ctx.config.WEBHOOK_TIMEOUT_MS,
        allowPrivate: ctx.config.WEBHOOK_ALLOW_PRIVATE_URLS,
        connectionsPerOrigin: Math.min(this.#concurrency.max, ctx.config.WEBHOOK_CONCURRENCY),
        originsKept: ctx.config.WEBHOOK_ORIGINS_KEPT,
        now: this.#clock,
      }),
      timeoutMs: ctx.config.WEBHOOK_TIMEOUT_MS,
      allowPrivate: ctx.config.WEBHOOK_ALLOW_PRIVATE_URLS,
      credentialKeys: credentialKeys(ctx.config.WEBHOOK_CREDENTIALS_KEY),
      now: this.#clock,
    });
  }

  /** An endpoint of `url` exists: its transport is made ready before its first delivery. */
  async prepareEndpoint(url: string): Promise<void> {
    if (await this.#transport.prepare(url)) this.#events.emit('httpReady');
  }

  get httpClientLoaded(): boolean {
    return this.#transport.httpClientLoaded;
  }

  /** Something may be due: the dispatch loop looks again now. */
  wake(): void {
    this.#dispatchWake.wake();
  }

  /** Breaker verdicts so far: a poll notes it when it starts, for `take` (see EndpointSlots.openedAt). */
  get verdicts(): number {
    return this.#breakerVerdicts;
  }

  /**
   * Room for a poll's fan-out to hand deliveries straight over, reserved until `endHandover` (none
   * behind a backlog: the claims serve it oldest first), and the hand-over it may make with it.
   */
  reserveHandover(): { room: number; handover: Handover | undefined } {
    const room = this.#backlog ? 0 : this.#claimRoom();
    this.#reserved += room;
    if (room <= 0) return { room, handover: undefined };
    const endpointCapacity = claimAhead(this.#concurrency.initial, false);
    const { freeSlots, held, heldByStore } = this.#claimShape(endpointCapacity);
    return {
      room,
      handover: {
        workerId: this.#id,
        leaseMs: this.#ctx.config.WEBHOOK_LEASE_MS,
        limit: room,
        freeSlots,
        held,
        heldByStore,
        endpointCapacity,
        breaker: this.#breaker,
      },
    };
  }

  /** The fan-out is done: its room is free again (a claim that found none meanwhile is woken). */
  endHandover(room: number): void {
    this.#reserved -= room;
    if (room > 0 && this.#starved) this.#dispatchWake.wake();
  }

  /** An endpoint was changed or deleted: its broker connection closes now. */
  closeEndpoint(endpointId: string): void {
    void this.#transport.closeEndpoint(endpointId);
  }

  /** Stops claiming: the loop ends after its current step. */
  stopClaiming(): void {
    this.#stopping = true;
    this.#dispatchWake.wake();
  }

  /** After the loop ended: releases what waits here unsent, waits for attempts in flight to settle, closes the transport. */
  async drain(): Promise<void> {
    const unsent = [...this.#endpoints.values()].flatMap((e) => e.waiting.splice(0));
    this.#waiting = 0;
    this.#queued.clear();
    this.#release(unsent.map((w) => w.delivery));
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  /** Closes the HTTP pool and the broker connections. */
  async close(): Promise<void> {
    await this.#transport.close();
  }

  /** The dispatch loop, until stopClaiming(). */
  async run(): Promise<void> {
    const { config } = this.#ctx;
    const interval = config.WEBHOOK_POLL_INTERVAL_MS;
    let claimNow = true;
    while (!this.#stopping) {
      const free = this.#claimRoom();
      this.#starved = free <= 0 && this.#reserved > 0;
      let claimedAll = false;
      let waitMs = interval;
      try {
        // Ask first when the next delivery falls due (one cheap read): an idle worker then never
        // runs the claim transaction, and sleeps until that moment rather than a full interval.
        const due = claimNow || free <= 0 ? null : await nextDueAt(this.#ctx.database.db, this.#clock());
        const now = this.#clock();
        if (free > 0 && (claimNow || (due !== null && due <= now))) {
          this.#reserved += free;
          const verdicts = this.#breakerVerdicts;
          let claimed: ClaimedDelivery[];
          let claimSpan: SpanContext | undefined;
          try {
            [claimed, claimSpan] = await inSpan(
              'webhook claim',
              { kind: SpanKind.INTERNAL, parent: ROOT_CONTEXT, attributes: { 'store_api.claim.limit': free } },
              async (span) => {
                const endpointCapacity = claimAhead(this.#concurrency.initial, false);
                const rows = await claimDueDeliveries(this.#ctx.database.db, {
                  ...this.#claimShape(endpointCapacity),
                  workerId: this.#id,
                  now,
                  leaseMs: config.WEBHOOK_LEASE_MS,
                  limit: free,
                  endpointCapacity,
                  breaker: this.#breaker,
                });
                span.setAttribute('store_api.claim.deliveries', rows.length);
                return [rows, span.isRecording() ? span.spanContext() : undefined] as const;
              },
            );
          } finally {
            this.#reserved -= free;
          }
          this.take(claimed, now, verdicts, claimSpan);
          const lines = await this.#claimLines(now);
          this.#backlog = claimed.length > 0 || lines > 0;
          claimedAll = claimed.length === free;
          // Sleep until the next delivery falls due (a retry, a breaker's probe), not a whole interval.
          if (!claimedAll) waitMs = this.#untilDue(await nextDueAt(this.#ctx.database.db, this.#clock()), now, interval);
        } else if (due !== null && due > now) {
          waitMs = Math.min(interval, due - now);
        }
        this.#dispatchFailures = 0;
        workerHeartbeat.setToCurrentTime({ loop: 'dispatch' });
      } catch (error) {
        this.#dispatchFailures++;
        waitMs = loopBackoffMs(this.#dispatchFailures, interval);
        this.#loopError('delivery claim failed', error);
      }
      if (this.#stopping) break;
      claimNow = claimedAll;
      if (!claimedAll) claimNow = await this.#dispatchWake.wait(waitMs);
    }
  }

  /**
   * Per endpoint held here (sending or waiting) or remembered, the deliveries a claim may add (its
   * claim-ahead room; none while a failure's breaker verdict is pending) when that differs from a
   * new endpoint's `endpointCapacity`, and those it holds, for the claim's rounds. Forgets the
   * idle endpoints beyond the IDLE_ENDPOINTS_REMEMBERED most recently sent to.
   */
  #claimShape(endpointCapacity: number): { freeSlots: Map<string, number>; held: Map<string, number>; heldByStore: Map<string, number> } {
    this.#forgetIdleEndpoints();
    const freeSlots = new Map<string, number>();
    const held = new Map<string, number>();
    const heldByStore = new Map<string, number>();
    for (const [endpointId, e] of this.#endpoints) {
      const holding = e.sending + e.waiting.length;
      // An endpoint this worker knows keeps its limit while it holds nothing (a fast one claims a
      // full round ahead again at once, not the initial two).
      const free = e.failuresSettling > 0 ? 0 : claimAhead(e.limit, e.fast) - holding;
      if (free !== endpointCapacity) freeSlots.set(endpointId, free);
      if (holding > 0) {
        held.set(endpointId, holding);
        heldByStore.set(e.storeId, (heldByStore.get(e.storeId) ?? 0) + holding);
      }
    }
    return { freeSlots, held, heldByStore };
  }

  /**
   * Drops the idle endpoints (nothing sent, waiting or settling here) beyond the
   * IDLE_ENDPOINTS_REMEMBERED (idleEndpointsRemembered) most recently sent to (#pump moves an endpoint to the end of the map
   * when it sends), and the stores of FIFO endpoints neither sending here nor pooled. Kept: an
   * endpoint whose breaker opened less than a lease ago (a claim begun before the opening is
   * checked against it in `take`), and one with a pooled broker connection (reconcileBrokers asks
   * after it by its store).
   */
  #forgetIdleEndpoints(): void {
    let idle = 0;
    for (const e of this.#endpoints.values()) if (isIdle(e)) idle++;
    if (idle > this.#idleRemembered) {
      const pooled = this.#transport.brokerEndpoints();
      const recent = this.#clock() - this.#ctx.config.WEBHOOK_LEASE_MS;
      for (const [endpointId, e] of this.#endpoints) {
        if (idle <= this.#idleRemembered) break;
        if (!isIdle(e) || (e.openedAt > 0 && e.openedClock > recent) || pooled.has(endpointId)) continue;
        this.#endpoints.delete(endpointId);
        idle--;
      }
    }
    if (this.#lineStores.size > this.#idleRemembered) {
      const pooled = this.#transport.brokerEndpoints();
      for (const endpointId of [...this.#lineStores.keys()]) {
        if (this.#lineStores.size <= this.#idleRemembered) break;
        if (!this.#lines.has(endpointId) && !pooled.has(endpointId)) this.#lineStores.delete(endpointId);
      }
    }
  }

  /**
   * Deliveries claimed (or handed over by the poller) at `now` join their endpoints' queues and go
   * out as slots allow. `verdicts` is #breakerVerdicts when the claim started: its statement may have
   * read an endpoint from before a failure that opened the breaker since (its settle committed while
   * the claim ran), and that endpoint's deliveries go back unsent — sending one would be an attempt
   * past the breaker's threshold. (Another worker's claim racing this settle is not seen here: with
   * several workers an endpoint can still get one attempt per worker past the threshold.)
   * `source`: with tracing on, the span of the claim or the poll that took them (their attempts link to it).
   */
  take(all: readonly ClaimedDelivery[], now: number, verdicts: number, source?: SpanContext): void {
    if (source) for (const d of all) this.#claimSpans.set(d, source);
    const isStale = (d: ClaimedDelivery) => (this.#endpoints.get(d.endpointId)?.openedAt ?? 0) > verdicts;
    const stale = all.filter(isStale);
    const claimed = stale.length === 0 ? all : all.filter((d) => !isStale(d));
    this.#release(stale);
    if (claimed.length === 0) return;
    this.#events.emit('claimed', claimed);
    const leaseUntil = now + this.#ctx.config.WEBHOOK_LEASE_MS;
    for (const delivery of claimed) {
      const slots = this.#slots(delivery.endpointId, delivery.storeId);
      slots.waiting.push({ delivery, leaseUntil });
      this.#queued.set(delivery.endpointId, slots);
    }
    this.#waiting += claimed.length;
    // Stopped meanwhile: stop() has taken the queues already, so these go back at once.
    if (this.#stopping) {
      const unsent = [...this.#endpoints.values()].flatMap((e) => e.waiting.splice(0));
      this.#waiting = 0;
      this.#queued.clear();
      this.#release(unsent.map((w) => w.delivery));
      return;
    }
    this.#pump();
  }

  /**
   * How long the dispatch loop sleeps after a claim made at `claimedAt`: until `due` (capped at the
   * poll interval; at once when it fell due since the claim looked); a whole interval when nothing
   * waits, or when what was due already could not be claimed (its endpoint's slots are full: a
   * finished request wakes the loop).
   */
  #untilDue(due: number | null, claimedAt: number, interval: number): number {
    if (due === null || due <= claimedAt) return interval;
    return Math.min(interval, Math.max(0, due - this.#clock()));
  }

  /**
   * Deliveries the next claim may take: up to CLAIM_AHEAD_ROUNDS × WEBHOOK_CONCURRENCY held here
   * (in flight or waiting), and no more while settles lag a batch behind (memory stays bounded by
   * configuration, whatever the backlog in the table). While a full round of deliveries still
   * waits here, the claim waits until half that room is free: fewer, larger claims (each is a
   * round trip and a commit, which is what a fast receiver would otherwise wait on).
   */
  #claimRoom(): number {
    const concurrency = this.#ctx.config.WEBHOOK_CONCURRENCY;
    const most = CLAIM_AHEAD_ROUNDS * concurrency;
    const holding = this.#sending + this.#waiting + this.#reserved;
    const room = Math.min(most - holding, most + this.#settleBatchMax - holding - this.#settling);
    if (this.#waiting >= concurrency && room < most / 2) return 0;
    return this.#ctx.database.backend === 'pglite' ? Math.min(room, PGLITE_CLAIM_MAX) : room;
  }

  /** This worker's slots for `endpointId` of the store `storeId` (a new endpoint starts at the initial limit). */
  #slots(endpointId: string, storeId: string): EndpointSlots {
    let slots = this.#endpoints.get(endpointId);
    if (!slots) {
      slots = { storeId, limit: this.#concurrency.initial, sending: 0, waiting: [], failuresSettling: 0, fast: false, openedAt: 0, openedClock: 0 };
      this.#endpoints.set(endpointId, slots);
    }
    return slots;
  }

  /**
   * Sends waiting deliveries while slots are free: each endpoint below its limit, the worker below
   * WEBHOOK_CONCURRENCY, one delivery per endpoint per round so endpoints share the worker's slots.
   * A delivery whose lease no longer covers an attempt is released instead.
   */
  #pump(): void {
    if (this.#stopping) return;
    const { WEBHOOK_CONCURRENCY: concurrency, WEBHOOK_TIMEOUT_MS: timeoutMs } = this.#ctx.config;
    const expired: ClaimedDelivery[] = [];
    let sent = true;
    while (sent && this.#sending < concurrency && this.#waiting > 0) {
      sent = false;
      const served: string[] = [];
      for (const [endpointId, slots] of this.#queued) {
        if (this.#sending >= concurrency) break;
        if (slots.waiting.length === 0) {
          this.#queued.delete(endpointId);
          continue;
        }
        if (slots.sending >= slots.limit || slots.failuresSettling > 0) continue;
        const next = slots.waiting.shift()!;
        this.#waiting--;
        sent = true;
        if (this.#clock() + timeoutMs + LEASE_MARGIN_MS > next.leaseUntil) {
          expired.push(next.delivery);
          continue;
        }
        served.push(endpointId);
        // The most recently sent to: the idle endpoints forgotten first are the least recently sent to.
        this.#endpoints.delete(endpointId);
        this.#endpoints.set(endpointId, slots);
        this.#send(slots, next.delivery);
      }
      // Served last in the next round.
      for (const endpointId of served) {
        const slots = this.#queued.get(endpointId);
        if (slots === undefined) continue;
        this.#queued.delete(endpointId);
        if (slots.waiting.length > 0) this.#queued.set(endpointId, slots);
      }
    }
    this.#release(expired);
  }

  #send(slots: EndpointSlots, delivery: ClaimedDelivery): void {
    slots.sending++;
    this.#sending++;
    const run = this.#attempt(slots, delivery)
      .catch((error) => this.#loopError('delivery attempt failed', error))
      .finally(() => {
        this.#running.delete(run);
        this.#pump();
        if (this.#backlog) this.#dispatchWake.wake();
      });
    this.#running.add(run);
  }

  /** Gives claimed, unsent deliveries back to the queue (releaseDeliveries). */
  #release(deliveries: readonly ClaimedDelivery[]): void {
    if (deliveries.length === 0) return;
    const run = releaseDeliveries(this.#ctx.database.db, this.#id, deliveries)
      .catch((error) => this.#loopError('releasing unsent webhook deliveries failed (they are sent again when their lease expires)', error))
      .finally(() => this.#running.delete(run));
    this.#running.add(run);
  }

  /**
   * Sends one attempt in its span (decision 0052): a child of the writer's trace context kept with
   * the event (so the receiver sees the writer's trace id), linked to the claim that took it; the
   * request or message carries the span's traceparent. With tracing off, only the send.
   */
  #tracedSend(delivery: ClaimedDelivery, headers: Record<string, string>, bytes: Buffer): Promise<HttpAttemptResult> {
    if (!activeTracing()) return this.#transport.send(delivery, headers, bytes);
    const kind = destinationKind(delivery.url);
    const attributes: Attributes = {
      'store_api.delivery.id': delivery.id,
      'store_api.endpoint.id': delivery.endpointId,
      'store_api.event.id': delivery.event.id,
      'store_api.event.type': delivery.event.type,
      'store_api.store.id': delivery.storeId,
      'store_api.attempt': delivery.attemptNumber,
      'store_api.destination.kind': kind,
    };
    if (kind === 'https') attributes['http.request.method'] = 'POST';
    else attributes['messaging.system'] = kind === 'amqp' ? 'rabbitmq' : kind;
    const claim = this.#claimSpans.get(delivery);
    return inSpan(
      'webhook attempt',
      {
        kind: kind === 'https' ? SpanKind.CLIENT : SpanKind.PRODUCER,
        parent: storedTraceContext(delivery.traceParent, delivery.traceState),
        links: claim ? [{ context: claim }] : [],
        attributes,
      },
      async (span) => {
        injectTraceHeaders(headers);
        const result = await this.#transport.send(delivery, headers, bytes);
        span.setAttribute('store_api.attempt.outcome', result.outcome);
        if (result.statusCode !== null) span.setAttribute('http.response.status_code', result.statusCode);
        if (result.outcome !== 'success') span.setStatus({ code: SpanStatusCode.ERROR, message: result.outcome });
        return result;
      },
    );
  }

  async #attempt(slots: EndpointSlots, delivery: ClaimedDelivery): Promise<void> {
    const startedAt = this.#clock();
    // The body is encoded once: the signature and the request (or publish) take the same bytes.
    const bytes = Buffer.from(delivery.body);
    const headers = deliveryHeaders(delivery, startedAt, bytes);
    let result: HttpAttemptResult;
    try {
      result = await this.#tracedSend(delivery, headers, bytes);
    } finally {
      slots.sending--;
      this.#sending--;
    }
    slots.limit = nextConcurrencyLimit(this.#concurrency, slots.limit, result);
    slots.fast = answeredFast(this.#concurrency, result);
    const failed = result.outcome !== 'success';
    if (failed) slots.failuresSettling++;
    this.#settling++;
    // The endpoint's slot is free: the next waiting delivery goes out while this one settles.
    this.#pump();
    if (this.#backlog) this.#dispatchWake.wake();
    this.#count(delivery.url, result);

    const settleOptions = { workerId: this.#id, startedAt, retry: this.#retry, breaker: this.#breaker };
    let settled;
    try {
      try {
        settled = await this.#settles.settle({ delivery, result, options: { ...settleOptions, now: this.#clock() } });
      } catch (error) {
        // One more try (a dropped connection); if that fails too the lease expires and another claim sends it again.
        this.#ctx.logger.warn({ err: error, deliveryId: delivery.id }, 'settling a webhook delivery failed; retrying once');
        settled = await settleDelivery(this.#ctx.database.db, delivery, result, { ...settleOptions, now: this.#clock() });
      }
    } finally {
      this.#settling--;
      if (failed) slots.failuresSettling--;
    }
    // A retry or a breaker pause now ends sooner, maybe, than the dispatch loop's sleep: it looks again.
    if (failed && settled.settled) this.#dispatchWake.wake();
    // The breaker opened or the endpoint is gone: what waits here for it goes back to the queue
    // (claims skip the endpoint until it may be tried again).
    const open = settled.breaker !== null && settled.breaker.consecutiveFailures >= this.#breaker.threshold;
    if (open) {
      slots.openedAt = ++this.#breakerVerdicts;
      slots.openedClock = this.#clock();
    }
    if (open || settled.endpointDisabled) {
      this.#waiting -= slots.waiting.length;
      this.#release(slots.waiting.splice(0).map((w) => w.delivery));
    }
    if (!settled.settled) {
      this.#ctx.logger.warn({ deliveryId: delivery.id, workerId: this.#id }, 'webhook delivery lease lost before settling; the new holder sends it again');
    } else if (settled.settlement.status !== 'succeeded') {
      this.#ctx.logger.info(
        {
          deliveryId: delivery.id,
          endpointId: delivery.endpointId,
          attempt: delivery.attemptNumber,
          outcome: result.outcome,
          statusCode: result.statusCode,
          status: settled.settlement.status,
        },
        'webhook delivery attempt failed',
      );
    }
    this.#recordSettled([{ delivery, startedAt, result, settled }]);
  }

  /**
   * What every settled attempt of one endpoint does after its settle, unordered or FIFO: the
   * delivery metrics, the log line of an endpoint disabled by a 410 (once), the `attempt` event.
   */
  #recordSettled(attempts: readonly { delivery: ClaimedDelivery; startedAt: number; result: HttpAttemptResult; settled: SettleResult }[]): void {
    for (const { delivery, settled } of attempts) {
      if (!settled.settled) continue;
      if (settled.settlement.status === 'succeeded') {
        deliveriesSucceeded.inc();
        deliveryLatency.observe(Math.max(0, this.#clock() - delivery.eventCreatedAtMs) / 1000);
      } else {
        deliveriesFailed.inc();
        if (settled.settlement.status === 'dead') deliveriesDeadLettered.inc();
      }
    }
    const gone = attempts.find((a) => a.settled.endpointDisabled);
    if (gone) this.#ctx.logger.warn({ endpointId: gone.delivery.endpointId }, 'webhook endpoint answered 410 Gone; disabled');
    for (const { delivery, startedAt, result, settled } of attempts) {
      this.#events.emit('attempt', {
        deliveryId: delivery.id,
        endpointId: delivery.endpointId,
        eventId: delivery.event.id,
        eventType: delivery.event.type,
        attemptNumber: delivery.attemptNumber,
        startedAt,
        result,
        settlement: settled.settled ? settled.settlement : undefined,
        endpointDisabled: settled.endpointDisabled,
      });
    }
  }

  /**
   * Claims the head batch of FIFO lines this worker may send now (as many as its free request slots)
   * and sends each. Returns how many lines were claimed.
   */
  async #claimLines(now: number): Promise<number> {
    const room = this.#ctx.config.WEBHOOK_CONCURRENCY - this.#sending - this.#lines.size;
    if (room <= 0 || this.#stopping) return 0;
    if (now - this.#fifoCheckedAt >= this.#ctx.config.WEBHOOK_POLL_INTERVAL_MS) {
      this.#fifoEndpoints = await fifoEndpointsExist(this.#ctx.database.db);
      this.#fifoCheckedAt = now;
    }
    if (!this.#fifoEndpoints) return 0;
    const batches = await claimFifoBatches(this.#ctx.database.db, {
      workerId: this.#id,
      now,
      leaseMs: this.#ctx.config.WEBHOOK_LEASE_MS,
      limit: room,
      holding: [...this.#lines],
      breaker: this.#breaker,
    });
    for (const batch of batches) {
      this.#events.emit('claimed', batch.deliveries);
      this.#lines.add(batch.endpointId);
      this.#lineStores.set(batch.endpointId, batch.storeId);
      const run = this.#sendLine(batch, now + this.#ctx.config.WEBHOOK_LEASE_MS)
        .catch((error) => this.#loopError('a FIFO batch failed (its lease expires and it is sent again)', error))
        .finally(() => {
          this.#lines.delete(batch.endpointId);
          this.#running.delete(run);
          // The line's next batch may go now.
          this.#dispatchWake.wake();
        });
      this.#running.add(run);
    }
    return batches.length;
  }

  /**
   * Sends a FIFO line's head batch and settles it (decision 0059). To an HTTPS endpoint: one signed
   * request whose body is the JSON array of the events' envelopes (`webhook-id` the batch's id), and
   * every delivery settles with the head's settlement. To a broker: one message each, in order, each
   * awaited (the broker's confirm) before the next; the first failure settles that delivery (it is
   * the line's head now) and the rest go back unsent, as do deliveries whose lease would not cover
   * their publish. Never sent when the lease no longer covers an attempt.
   */
  async #sendLine(batch: ClaimedBatch, leaseUntil: number): Promise<void> {
    const { WEBHOOK_TIMEOUT_MS: timeoutMs } = this.#ctx.config;
    const head = batch.deliveries[0]!;
    const finished: Finished[] = [];
    let unsent: ClaimedDelivery[] = [];
    const startedAt = this.#clock();
    const covered = () => this.#clock() + timeoutMs + LEASE_MARGIN_MS <= leaseUntil;
    const options = () => ({ workerId: this.#id, startedAt, now: this.#clock(), retry: this.#retry, breaker: this.#breaker });
    this.#sending++;
    try {
      if (!covered()) {
        unsent = [...batch.deliveries];
      } else if (destinationKind(head.url) === 'https') {
        const bytes = Buffer.from(batchBody(batch.deliveries.map((d) => d.body)));
        const headers = signatureHeaders(head.secrets, batchId(head.event.id, batch.deliveries.length), Math.floor(startedAt / 1000), bytes);
        if (batch.deliveries.every((d) => d.test)) headers['webhook-test'] = 'true';
        const result = await this.#tracedSend(head, headers, bytes);
        this.#count(head.url, result);
        const settleOptions = options();
        const decided = decideSettlement(this.#retry, head.attemptNumber, result, settleOptions.now);
        batch.deliveries.forEach((delivery, i) => finished.push({ delivery, result, options: settleOptions, decided, followsHead: i > 0 }));
      } else {
        for (const [i, delivery] of batch.deliveries.entries()) {
          if (!covered()) {
            unsent = batch.deliveries.slice(i);
            break;
          }
          const sentAt = this.#clock();
          const bytes = Buffer.from(delivery.body);
          const headers = deliveryHeaders(delivery, sentAt, bytes);
          const result = await this.#tracedSend(delivery, headers, bytes);
          this.#count(delivery.url, result);
          finished.push({ delivery, result, options: { ...options(), startedAt: sentAt } });
          if (result.outcome !== 'success') {
            unsent = batch.deliveries.slice(i + 1);
            break;
          }
        }
      }
    } finally {
      this.#sending--;
    }
    this.#release(unsent);
    if (finished.length === 0) return;
    const settled = await settleDeliveries(this.#ctx.database.db, finished);
    this.#recordSettled(finished.map((f, i) => ({ delivery: f.delivery, startedAt: f.options.startedAt, result: f.result, settled: settled[i]! })));
    if (settled.some((s) => !s.settled)) {
      this.#ctx.logger.warn({ endpointId: batch.endpointId, workerId: this.#id }, 'FIFO batch lease lost before settling; the new holder sends it again');
    }
    const failure = finished.find((f) => f.result.outcome !== 'success');
    if (failure) {
      this.#ctx.logger.info(
        {
          endpointId: batch.endpointId,
          deliveryId: failure.delivery.id,
          outcome: failure.result.outcome,
          statusCode: failure.result.statusCode,
          batch: finished.length,
        },
        'FIFO batch attempt failed',
      );
    }
  }

  /** The attempt metrics of one request or publish. */
  #count(url: string, result: HttpAttemptResult): void {
    const labels = { outcome: result.outcome, destination_kind: destinationKindLabel(url) };
    deliveriesAttempted.inc(labels);
    attemptDuration.observe(labels, result.durationMs / 1000);
  }

  /** Closes pooled broker connections whose endpoint changed, was disabled or deleted (every brokerReconcileMs; the poll loop calls it). */
  async reconcileBrokers(): Promise<void> {
    const pooled = this.#transport.brokerEndpoints();
    const now = this.#clock();
    if (pooled.size === 0 || now - this.#brokersReconciledAt < this.#brokerReconcileMs) return;
    this.#brokersReconciledAt = now;
    const endpoints = [...pooled.keys()].flatMap((id) => {
      const storeId = this.#endpoints.get(id)?.storeId ?? this.#lineStores.get(id);
      return storeId === undefined ? [] : [{ id, storeId }];
    });
    await this.#transport.reconcile(await enabledEndpointUrls(this.#ctx.database.db, endpoints));
  }

  #loopError(message: string, error: unknown): void {
    this.#ctx.logger.error({ err: error, workerId: this.#id }, message);
    this.#events.emit('loopError', error);
  }
}

/** Nothing of the endpoint's is being sent, waits to be, or settles a failure here. */
function isIdle(e: EndpointSlots): boolean {
  return e.sending === 0 && e.waiting.length === 0 && e.failuresSettling === 0;
}

/** The headers of one event's request or message: its signature at `at` over `bytes`, and the test mark. */
function deliveryHeaders(delivery: ClaimedDelivery, at: number, bytes: Buffer): Record<string, string> {
  const headers = signatureHeaders(delivery.secrets, delivery.event.id, Math.floor(at / 1000), bytes);
  if (delivery.test) headers['webhook-test'] = 'true';
  return headers;
}
