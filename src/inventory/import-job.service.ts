/**
 * Large stock imports as jobs (decision 0060). An import of more than IMPORT_JOB_ROWS rows is not run
 * while its client waits: it is stored as a job of its store and answered 202; the process that runs
 * background work (import-job-runner.ts) runs it, and its owner polls it.
 *
 * States of a job (column `status`):
 *   queued     Stored with its CSV, waiting for its store's running job (one at a time per store)
 *              and for a runner. Also where a job goes back to when its runner's process stopped
 *              (SIGTERM: at once; a kill: once its hold is IMPORT_JOB_LEASE_MS old), with a note.
 *   running    Held by one runner, which renews its hold. Its rows are checked first (nothing is
 *              written before every row is), then applied in committed steps; `rows_done` moves in
 *              the same transaction as each step's rows, so it says exactly what is applied.
 *   succeeded  Every row applied. Final; the CSV is dropped.
 *   failed     A row or sku was refused (`error` names the lines; nothing written when it was the
 *              first run, otherwise `rows_done` rows stay applied and the error says so), or it was
 *              stopped IMPORT_JOB_ATTEMPTS times. Final; the CSV is dropped.
 * Transitions (each one statement, import-job.repository.ts; a runner's guarded by its hold):
 *   (submit) → queued; queued → running (claim); running → succeeded | failed (its runner);
 *   running → queued (its runner stops, or its hold expired and attempts remain);
 *   running → failed (its hold expired on its last attempt).
 */
import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { ApiError } from '../shared/problem.ts';
import { uuidv7 } from '../shared/uuid-v7.ts';
import { checkStockCsvHeader, roughRowCount } from './stock-import.ts';
import { insertJob, jobById, jobsAhead, listJobs, lockStoreQueue, waitingJobCount, type ImportJobRow, type JobActor } from './import-job.repository.ts';

/** Seconds a client refused for a full queue is told to wait (a job of a large import runs minutes). */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 60;

/** A job as its owner sees it (the admin API's ImportJob). */
export interface ImportJob {
  id: string;
  kind: 'stock_csv';
  status: ImportJobRow['status'];
  rows_total: number;
  rows_done: number;
  /** Queued jobs of its store ahead of it, the running one included; null unless queued. */
  queue_position: number | null;
  result: { rows: number; movements: number; products: number } | null;
  error: ImportJobRow['error'];
  notes: string[];
  attempts: number;
  created_by: JobActor | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  updated_at: string;
}

/** Wakes the runners of this process when a job was queued (they also look every IMPORT_JOB_POLL_MS). */
export const importJobsQueued = new EventEmitter();

/** The API's shape of a job row. */
export function toImportJob(row: ImportJobRow, queuePosition: number | null = null): ImportJob {
  return {
    id: row.id,
    kind: row.kind,
    status: row.status,
    rows_total: row.rows_total,
    rows_done: row.rows_done,
    queue_position: row.status === 'queued' ? queuePosition : null,
    result: row.status === 'succeeded' ? { rows: row.rows_total, movements: row.movements, products: row.products } : null,
    error: row.error,
    notes: row.notes,
    attempts: row.attempts,
    created_by: row.created_by,
    created_at: row.created_at,
    started_at: row.started_at,
    finished_at: row.finished_at,
    updated_at: row.updated_at,
  };
}

/** Whether an import of `csv` runs as a job: more rows than `threshold` (0: always). */
export function importRunsAsJob(csv: string, threshold: number): boolean {
  return threshold === 0 || roughRowCount(csv) > threshold;
}

/**
 * Stores an import of the statement's store as a queued job. Its header is checked now (a 400, nothing
 * stored); its rows by the job. Refused 429 with Retry-After when the store already has `queueMax`
 * jobs queued or running. Run it in the request's transaction: the job exists exactly when the
 * answer (and a keyed request's stored answer) was committed.
 */
export async function submitImportJob(
  db: Kysely<Database>,
  csv: string,
  { createdBy, queueMax }: { createdBy: JobActor | null; queueMax: number },
): Promise<ImportJob> {
  checkStockCsvHeader(csv);
  const job = await db.transaction().execute(async (trx) => {
    await lockStoreQueue(trx);
    const waiting = await waitingJobCount(trx);
    if (waiting >= queueMax) {
      throw new ApiError(
        'rate_limited',
        `This store already has ${waiting} import job${waiting === 1 ? '' : 's'} queued or running, its limit (IMPORT_JOB_QUEUE = ${queueMax}); nothing was stored. Retry after one ends (GET /admin/api/v1/inventory/import-jobs).`,
        undefined,
        { 'Retry-After': String(QUEUE_FULL_RETRY_AFTER_SECONDS) },
      );
    }
    const row = await insertJob(trx, { id: uuidv7(), body: csv, rowsTotal: roughRowCount(csv), createdBy });
    return toImportJob(row, waiting);
  });
  return job;
}

/**
 * Whether the statement's store has import jobs queued or running: an import submitted then, however
 * small, queues behind them as a job, so imports apply in the order they were sent (a small
 * `sku,stock` import applied at once would be set back by an earlier job's later steps).
 */
export async function importsWaiting(db: Kysely<Database>): Promise<boolean> {
  return (await waitingJobCount(db)) > 0;
}

/** One job of the statement's store; 404 when it has none of that id. */
export async function importJob(db: Kysely<Database>, id: string): Promise<ImportJob> {
  const row = await jobById(db, id);
  if (!row) throw new ApiError('not_found', `No import job ${id} in this store.`);
  return toImportJob(row, row.status === 'queued' ? await jobsAhead(db, row) : null);
}

/** The statement's store's jobs, newest first (`waiting`: queued and running only). */
export async function importJobs(db: Kysely<Database>, { limit, waiting }: { limit: number; waiting: boolean }): Promise<ImportJob[]> {
  const rows = await listJobs(db, { limit, waiting });
  return Promise.all(rows.map(async (r) => toImportJob(r, r.status === 'queued' ? await jobsAhead(db, r) : null)));
}
