/**
 * The retention pruner of the worker role (`worker` and `all`): every RETENTION_INTERVAL_MS it
 * deletes what retention-policy.ts says is past its time, in batches of RETENTION_BATCH_SIZE, each
 * its own short transaction (retention.repository.ts), then logs one line and counts the rows in
 * the metrics. Several workers may prune at once: rows are taken with SKIP LOCKED.
 *
 * One run:
 *  1. succeeded deliveries past WEBHOOK_DELIVERY_RETENTION_MS, with their attempts; the deliveries
 *     watermark moves to that cutoff (deliveries created since are all there);
 *  2. dead letters past WEBHOOK_DEAD_LETTER_RETENTION_MS, with their attempts;
 *  3. events older than the events watermark published by an earlier run, that the poller has read
 *     and no delivery refers to; then the watermark moves to this run's cutoff. Deleting only below
 *     a watermark published a run earlier means a reader (events feed, replay) that checked its
 *     cursor against the watermark never finds events missing while it reads: events are deleted
 *     one interval after the feed stopped offering them.
 *  4. audit log entries past AUDIT_LOG_RETENTION_MS.
 *  5. finished import jobs past IMPORT_JOB_RETENTION_MS (queued and running ones are never pruned).
 *  5. admin API idempotency keys older than 24 h (decision 0013).
 */
import { asPlatform } from '../db/store-scope.ts';
import { EventEmitter } from 'node:events';
import type { AppContext } from '../app-context.ts';
import { isoFromMillis } from '../shared/time.ts';
import { IDEMPOTENCY_KEY_TTL_MS, cutoffsAt, retentionPolicyOf, type RetentionPolicy } from './retention-policy.ts';
import {
  deleteAuditBefore,
  deleteFinishedImportJobs,
  deleteExpiredIdempotencyKeys,
  deleteFinishedDeliveries,
  deleteUnneededEvents,
  oldestAvailable,
  publishWatermark,
} from './retention.repository.ts';
import { lastPruningRun, pruningRuns, rowsPruned } from './retention-metrics.ts';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';

/** What one run deleted. */
export interface PruneReport {
  readonly events: number;
  readonly deliveries: number;
  readonly deadLetters: number;
  readonly attempts: number;
  readonly auditEntries: number;
  readonly importJobs: number;
  /** Admin API idempotency keys past their 24 h. */
  readonly idempotencyKeys: number;
  /** Events older than this were deleted (the watermark of the previous run), if any. */
  readonly eventsDeletedBefore?: string;
  readonly durationMs: number;
}

/** At most this many batches per table and run, so one run stays short; the next run goes on. */
const MAX_BATCHES_PER_RUN = 1000;

async function inBatches(batch: () => Promise<number>, batchSize: number, signal?: AbortSignal): Promise<number> {
  let total = 0;
  for (let i = 0; i < MAX_BATCHES_PER_RUN && !signal?.aborted; i++) {
    const n = await batch();
    total += n;
    if (n < batchSize) break;
    // Let other work of this process (HTTP, deliveries; on PGlite the same connection) go between batches.
    await new Promise((resolve) => setImmediate(resolve));
  }
  return total;
}

/** One pruning run at `nowMs` (epoch ms); `signal` ends it after the current batch (shutdown). */
export async function pruneOnce(db: Kysely<Database>, policy: RetentionPolicy, nowMs: number, signal?: AbortSignal): Promise<PruneReport> {
  const started = Date.now();
  const cutoffs = cutoffsAt(policy, nowMs);
  const nowIso = isoFromMillis(nowMs);
  let attempts = 0;

  const deliveries = await inBatches(
    async () => {
      const r = await deleteFinishedDeliveries(db, 'succeeded', cutoffs.deliveries, policy.batchSize);
      attempts += r.attempts;
      return r.deliveries;
    },
    policy.batchSize,
    signal,
  );
  await publishWatermark(db, 'webhook_deliveries', cutoffs.deliveries, nowIso);

  const deadLetters = await inBatches(
    async () => {
      const r = await deleteFinishedDeliveries(db, 'dead', cutoffs.deadLetters, policy.batchSize);
      attempts += r.attempts;
      return r.deliveries;
    },
    policy.batchSize,
    signal,
  );

  const published = await oldestAvailable(db, 'events');
  const events = published === undefined ? 0 : await inBatches(() => deleteUnneededEvents(db, published, policy.batchSize), policy.batchSize, signal);
  await publishWatermark(db, 'events', cutoffs.events, nowIso);

  const auditEntries = await inBatches(() => deleteAuditBefore(db, cutoffs.auditLog, policy.batchSize), policy.batchSize, signal);
  const importJobs = await inBatches(() => deleteFinishedImportJobs(db, cutoffs.importJobs, policy.batchSize), policy.batchSize, signal);
  const keyCutoff = isoFromMillis(nowMs - IDEMPOTENCY_KEY_TTL_MS);
  const idempotencyKeys = await inBatches(() => deleteExpiredIdempotencyKeys(db, keyCutoff, policy.batchSize), policy.batchSize, signal);

  return {
    events,
    deliveries,
    deadLetters,
    attempts,
    auditEntries,
    importJobs,
    idempotencyKeys,
    eventsDeletedBefore: published,
    durationMs: Date.now() - started,
  };
}

/** Typed events of the pruner (tests wait on them instead of sleeping). */
export interface RetentionPrunerEvents {
  pruned: [PruneReport];
  pruneError: [unknown];
}

export interface RetentionPruner {
  readonly events: EventEmitter<RetentionPrunerEvents>;
  /** Stops after the run in progress, if any. */
  stop(): Promise<void>;
}

export interface RetentionPrunerOptions {
  /** Epoch ms; default Date.now. */
  clock?: () => number;
}

/** Starts pruning every RETENTION_INTERVAL_MS, the first run at once. */
export function startRetentionPruner(ctx: AppContext, options: RetentionPrunerOptions = {}): RetentionPruner {
  // Across stores (decision 0051): retention prunes every store's old rows alike.
  return asPlatform(() => startRetentionPrunerOfEveryStore(ctx, options));
}

function startRetentionPrunerOfEveryStore(ctx: AppContext, options: RetentionPrunerOptions): RetentionPruner {
  const clock = options.clock ?? Date.now;
  const policy = retentionPolicyOf(ctx.config);
  const events = new EventEmitter<RetentionPrunerEvents>();
  let stopping = false;
  const abort = new AbortController();
  let wake: (() => void) | undefined;

  const loop = (async () => {
    while (!stopping) {
      try {
        const report = await pruneOnce(ctx.database.db, policy, clock(), abort.signal);
        rowsPruned.inc({ table: 'events' }, report.events);
        rowsPruned.inc({ table: 'webhook_deliveries' }, report.deliveries);
        rowsPruned.inc({ table: 'webhook_dead_letters' }, report.deadLetters);
        rowsPruned.inc({ table: 'webhook_attempts' }, report.attempts);
        rowsPruned.inc({ table: 'admin_audit_log' }, report.auditEntries);
        rowsPruned.inc({ table: 'import_jobs' }, report.importJobs);
        rowsPruned.inc({ table: 'idempotency_keys' }, report.idempotencyKeys);
        pruningRuns.inc({ result: 'ok' });
        lastPruningRun.set(Date.now() / 1000);
        ctx.logger.info(
          {
            events: report.events,
            deliveries: report.deliveries,
            dead_letters: report.deadLetters,
            attempts: report.attempts,
            audit_entries: report.auditEntries,
            import_jobs: report.importJobs,
            idempotency_keys: report.idempotencyKeys,
            duration_ms: report.durationMs,
          },
          'retention pruning run',
        );
        events.emit('pruned', report);
      } catch (error) {
        pruningRuns.inc({ result: 'error' });
        ctx.logger.error({ err: error }, 'retention pruning run failed; trying again at the next run');
        events.emit('pruneError', error);
      }
      if (stopping) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, policy.intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  })();

  return {
    events,
    stop: async () => {
      stopping = true;
      abort.abort();
      wake?.();
      await loop;
    },
  };
}
