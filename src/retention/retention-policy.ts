/**
 * How long what is kept: retention as data plus pure functions (no I/O), from the configuration.
 *
 *  - events: EVENT_RETENTION_MS (30 days, as Stripe keeps events). An event is kept longer while a
 *    delivery still refers to it or the poller has not read it yet.
 *  - deliveries that succeeded, with their attempts: WEBHOOK_DELIVERY_RETENTION_MS (30 days after
 *    success).
 *  - dead letters, with their attempts: WEBHOOK_DEAD_LETTER_RETENTION_MS (90 days after
 *    dead-lettering) unless retried first (a retried one is pending again and kept).
 *  - the administrators' audit log: AUDIT_LOG_RETENTION_MS (365 days) after each entry.
 *  - finished import jobs (succeeded or failed): IMPORT_JOB_RETENTION_MS (30 days) after they ended;
 *    queued and running jobs are never pruned.
 *  - pending and failed deliveries (waiting for an attempt, or in flight) are never pruned, nor stock
 *    movements (business records served by the API), nor anything else.
 */
import type { Config } from '../config/config.ts';
import { isoFromMillis } from '../shared/time.ts';

/** How long an admin API idempotency key is kept and its answer replayed (decision 0013). */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 60 * 60 * 1000;

export interface RetentionPolicy {
  readonly eventsMs: number;
  readonly deliveriesMs: number;
  readonly deadLettersMs: number;
  /** Audit log entries (AUDIT_LOG_RETENTION_MS). */
  readonly auditLogMs: number;
  /** Finished import jobs (IMPORT_JOB_RETENTION_MS). */
  readonly importJobsMs: number;
  /** Rows deleted per statement (each batch is its own short transaction). */
  readonly batchSize: number;
  /** Time between pruning runs. */
  readonly intervalMs: number;
}

/** The policy of `config`. */
export function retentionPolicyOf(config: Config): RetentionPolicy {
  return {
    eventsMs: config.EVENT_RETENTION_MS,
    deliveriesMs: config.WEBHOOK_DELIVERY_RETENTION_MS,
    deadLettersMs: config.WEBHOOK_DEAD_LETTER_RETENTION_MS,
    auditLogMs: config.AUDIT_LOG_RETENTION_MS,
    importJobsMs: config.IMPORT_JOB_RETENTION_MS,
    batchSize: config.RETENTION_BATCH_SIZE,
    intervalMs: config.RETENTION_INTERVAL_MS,
  };
}

export interface RetentionCutoffs {
  /** Events created before this instant are past their retention. */
  readonly events: string;
  /** Deliveries that succeeded before this instant are past their retention. */
  readonly deliveries: string;
  /** Dead letters dead-lettered before this instant are past their retention. */
  readonly deadLetters: string;
  /** Audit log entries recorded before this instant are past their retention. */
  readonly auditLog: string;
  /** Import jobs that ended before this instant are past their retention. */
  readonly importJobs: string;
}

/** The cutoffs (ISO text) at `nowMs`. */
export function cutoffsAt(policy: RetentionPolicy, nowMs: number): RetentionCutoffs {
  return {
    events: isoFromMillis(nowMs - policy.eventsMs),
    deliveries: isoFromMillis(nowMs - policy.deliveriesMs),
    deadLetters: isoFromMillis(nowMs - policy.deadLettersMs),
    auditLog: isoFromMillis(nowMs - policy.auditLogMs),
    importJobs: isoFromMillis(nowMs - policy.importJobsMs),
  };
}
