/**
 * The SQL of import jobs (migration 0042, decision 0060). Every statement names its store: a store's
 * own statements by its scope (`ownStoreIs`), the runner's claims across stores by each row's
 * `store_id`. The job's state machine is in import-job.service.ts; each of its transitions here is one
 * statement, guarded by the runner holding the job where a runner moves it.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import { ownStore, ownStoreIs } from '../db/store-scope.ts';
import type { ParamError } from '../shared/problem.ts';

export type ImportJobStatus = 'queued' | 'running' | 'succeeded' | 'failed';

/** Who submitted a job: the administrator or key of the request, or the CLI. */
export interface JobActor {
  kind: string;
  id: string | null;
  name: string;
}

/** Why a job failed: the problem's detail and the rows or fields it names (bounded). */
export interface JobError {
  code: string;
  detail: string;
  errors: ParamError[];
}

/** A job's row as its owner sees it (the CSV itself left out). */
export interface ImportJobRow {
  store_id: string;
  id: string;
  kind: 'stock_csv';
  status: ImportJobStatus;
  rows_total: number;
  rows_done: number;
  movements: number;
  products: number;
  step_rows: number | null;
  attempts: number;
  error: JobError | null;
  notes: string[];
  created_by: JobActor | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  updated_at: string;
}

type Handle = Kysely<Database> | Transaction<Database>;

const COLUMNS = sql.raw(`store_id, id, kind, status, rows_total, rows_done, movements, products, step_rows, attempts, error, notes, created_by,
  iso_utc(created_at) AS created_at, iso_utc(started_at) AS started_at, iso_utc(finished_at) AS finished_at, iso_utc(updated_at) AS updated_at`);

/** Inserts a queued job of the statement's store. */
export async function insertJob(db: Handle, job: { id: string; body: string; rowsTotal: number; createdBy: JobActor | null }): Promise<ImportJobRow> {
  const { rows } = await sql<ImportJobRow>`
    INSERT INTO import_jobs (store_id, id, kind, status, body, rows_total, created_by)
    VALUES (${ownStore()}, ${job.id}::uuid, 'stock_csv', 'queued', ${job.body}, ${job.rowsTotal}, ${job.createdBy === null ? null : JSON.stringify(job.createdBy)}::jsonb)
    RETURNING ${COLUMNS}
  `.execute(db);
  return rows[0]!;
}

/**
 * Holds the statement's store's job queue until the transaction ends (a transaction-level advisory
 * lock), so two submissions at once cannot both pass the bound of queued jobs.
 */
export async function lockStoreQueue(trx: Handle): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtext('import_jobs:' || ${ownStore()}::text))`.execute(trx);
}

/** The statement's store's jobs still queued or running. */
export async function waitingJobCount(db: Handle): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM import_jobs WHERE ${ownStoreIs('store_id')} AND status IN ('queued', 'running')
  `.execute(db);
  return rows[0]!.n;
}

/** One job of the statement's store, or undefined. */
export async function jobById(db: Handle, id: string): Promise<ImportJobRow | undefined> {
  const { rows } = await sql<ImportJobRow>`SELECT ${COLUMNS} FROM import_jobs WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid`.execute(db);
  return rows[0];
}

/** The statement's store's jobs, newest first; `waiting`: only those queued or running. */
export async function listJobs(db: Handle, { limit, waiting }: { limit: number; waiting: boolean }): Promise<ImportJobRow[]> {
  const { rows } = await sql<ImportJobRow>`
    SELECT ${COLUMNS} FROM import_jobs
    WHERE ${ownStoreIs('store_id')} ${waiting ? sql`AND status IN ('queued', 'running')` : sql``}
    ORDER BY created_at DESC, id DESC LIMIT ${limit}
  `.execute(db);
  return rows;
}

/** Where a queued job waits: how many of its store's jobs are ahead of it (the running one included). */
export async function jobsAhead(db: Handle, job: { id: string; created_at: string }): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM import_jobs
    WHERE ${ownStoreIs('store_id')} AND status IN ('queued', 'running') AND (created_at, id) < (${job.created_at}::timestamptz, ${job.id}::uuid)
  `.execute(db);
  return rows[0]!.n;
}

/** A claimed job: its row and its CSV. */
export interface ClaimedJob extends ImportJobRow {
  body: string;
}

/**
 * Claims the oldest queued job of an active store with no running job (of `storeId` only, when
 * given) for `runner`: one statement, across stores (the platform's scope). A suspended store's jobs
 * wait in the queue until it is resumed, as its deliveries do (decision 0051). Another runner claiming a job of the
 * same store at the same moment makes the partial unique index refuse one of them: no claim then.
 */
export async function claimJob(db: Handle, runner: string, storeId?: string): Promise<ClaimedJob | undefined> {
  try {
    const { rows } = await sql<ClaimedJob>`
      UPDATE import_jobs j SET status = 'running', runner = ${runner}, heartbeat_at = now(), updated_at = now(),
        started_at = coalesce(j.started_at, now()), attempts = j.attempts + 1
      WHERE (j.store_id, j.id) = (
        SELECT q.store_id, q.id FROM import_jobs q
        WHERE q.status = 'queued' ${storeId === undefined ? sql`` : sql`AND q.store_id = ${storeId}::uuid`}
          AND NOT EXISTS (SELECT 1 FROM import_jobs r WHERE r.store_id = q.store_id AND r.status = 'running')
          AND EXISTS (SELECT 1 FROM stores st WHERE st.id = q.store_id AND st.status = 'active')
        ORDER BY q.created_at, q.id LIMIT 1 FOR UPDATE SKIP LOCKED
      )
      RETURNING ${COLUMNS}, body
    `.execute(db);
    return rows[0];
  } catch (error) {
    if ((error as { code?: unknown }).code === '23505') return undefined;
    throw error;
  }
}

/**
 * Jobs whose runner stopped renewing its hold for `leaseMs` (its process was killed, or lost the
 * database): back to queued with `note` (it resumes after its last committed step), or failed once it
 * has had `maxAttempts` runs. Answers the jobs moved, for the log.
 */
export async function releaseAbandonedJobs(
  db: Handle,
  {
    leaseMs,
    maxAttempts,
    note,
    storeId,
  }: { leaseMs: number; maxAttempts: number; note: (row: { rows_done: number; rows_total: number }) => string; storeId?: string },
): Promise<{ store_id: string; id: string; status: ImportJobStatus; rows_done: number; rows_total: number }[]> {
  const { rows: stale } = await sql<{ store_id: string; id: string; rows_done: number; rows_total: number; attempts: number }>`
    SELECT store_id, id, rows_done, rows_total, attempts FROM import_jobs
    WHERE status = 'running' ${storeId === undefined ? sql`` : sql`AND store_id = ${storeId}::uuid`}
      AND heartbeat_at < now() - make_interval(secs => ${leaseMs / 1000})
  `.execute(db);
  const moved: { store_id: string; id: string; status: ImportJobStatus; rows_done: number; rows_total: number }[] = [];
  for (const job of stale) {
    const failing = job.attempts >= maxAttempts;
    const text = note(job) + (failing ? ` It has run ${job.attempts} times, the most allowed (IMPORT_JOB_ATTEMPTS): not run again.` : '');
    const { rows } = await sql<{ store_id: string; id: string; status: ImportJobStatus; rows_done: number; rows_total: number }>`
      UPDATE import_jobs SET status = ${failing ? 'failed' : 'queued'}, runner = NULL, heartbeat_at = NULL, updated_at = now(),
        notes = notes || jsonb_build_array(${text}::text),
        ${failing ? sql`finished_at = now(), body = NULL, error = ${JSON.stringify({ code: 'interrupted', detail: text, errors: [] })}::jsonb` : sql`finished_at = NULL`}
      WHERE store_id = ${job.store_id}::uuid AND id = ${job.id}::uuid AND status = 'running'
        AND heartbeat_at < now() - make_interval(secs => ${leaseMs / 1000})
      RETURNING store_id, id, status, rows_done, rows_total
    `.execute(db);
    moved.push(...rows);
  }
  return moved;
}

/** Renews `runner`'s hold of a job; false when the job is no longer its own. */
export async function renewHold(db: Handle, id: string, runner: string): Promise<boolean> {
  const { rows } = await sql`
    UPDATE import_jobs SET heartbeat_at = now() WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid AND runner = ${runner} AND status = 'running'
    RETURNING id
  `.execute(db);
  return rows.length > 0;
}

/** Sets the exact row count and the step size of a running job; false when no longer `runner`'s. */
export async function setJobPlan(db: Handle, id: string, runner: string, plan: { rowsTotal: number; stepRows: number | null }): Promise<boolean> {
  const { rows } = await sql`
    UPDATE import_jobs SET rows_total = ${plan.rowsTotal}, step_rows = ${plan.stepRows}, heartbeat_at = now(), updated_at = now()
    WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid AND runner = ${runner} AND status = 'running'
    RETURNING id
  `.execute(db);
  return rows.length > 0;
}

/**
 * Records a committed step inside its transaction: the rows done and what the step wrote added up;
 * false when the job is no longer `runner`'s (the caller then rolls the step back).
 */
export async function recordStep(trx: Handle, id: string, runner: string, step: { done: number; movements: number; products: number }): Promise<boolean> {
  const { rows } = await sql`
    UPDATE import_jobs SET rows_done = ${step.done}, movements = movements + ${step.movements}, products = products + ${step.products},
      heartbeat_at = now(), updated_at = now()
    WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid AND runner = ${runner} AND status = 'running'
    RETURNING id
  `.execute(trx);
  return rows.length > 0;
}

/** Ends a job `runner` holds: succeeded, or failed with `error`; its CSV is dropped. False when not its own. */
export async function finishJob(
  db: Handle,
  id: string,
  runner: string,
  outcome: { status: 'succeeded' | 'failed'; error?: JobError; note?: string },
): Promise<boolean> {
  const { rows } = await sql`
    UPDATE import_jobs SET status = ${outcome.status}, body = NULL, runner = NULL, heartbeat_at = NULL, finished_at = now(), updated_at = now(),
      error = ${outcome.error === undefined ? null : JSON.stringify(outcome.error)}::jsonb
      ${outcome.note === undefined ? sql`` : sql`, notes = notes || jsonb_build_array(${outcome.note}::text)`}
    WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid AND runner = ${runner} AND status = 'running'
    RETURNING id
  `.execute(db);
  return rows.length > 0;
}

/** Gives a job `runner` holds back to the queue (its process stops), with `note`. */
export async function requeueJob(db: Handle, id: string, runner: string, note: string): Promise<boolean> {
  const { rows } = await sql`
    UPDATE import_jobs SET status = 'queued', runner = NULL, heartbeat_at = NULL, updated_at = now(), notes = notes || jsonb_build_array(${note}::text)
    WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid AND runner = ${runner} AND status = 'running'
    RETURNING id
  `.execute(db);
  return rows.length > 0;
}

/**
 * Whether another session of this database is running a statement now (PostgreSQL's
 * pg_stat_activity: the sessions of the service's own role are visible to it), the runner's sign
 * that other work is waiting for the cores.
 */
export async function otherSessionsBusy(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ busy: boolean }>`
    SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'
      AND pid <> pg_backend_pid() AND backend_type = 'client backend') AS busy`.execute(db);
  return rows[0]?.busy === true;
}
