/**
 * The runner of import jobs (decision 0060; the job's states are in import-job.service.ts): part of
 * the process that runs background work (`worker`, `all`; `store-api inventory import` runs one for
 * its store while it waits). One job at a time per runner, one running job per store (the claim).
 *
 * Its loop: give back jobs whose runner stopped renewing its hold (IMPORT_JOB_LEASE_MS; on the
 * embedded database, at its first look, every running job: only this process can open the data
 * directory, so a running job there is one a killed process left), claim the oldest queued job of a
 * store with none running, run it, and look again; with nothing to claim, wait for a wake-up
 * (`importJobsQueued`) or IMPORT_JOB_POLL_MS.
 *
 * Running a job is the stock import of stock-import.ts in the job's store: every row checked first,
 * then committed steps of STOCK_IMPORT_STEP_ROWS rows on both back ends (a job never holds its rows'
 * locks for the whole import, and on the embedded database its steps give way to other statements,
 * decision 0042), each step's transaction also moving the job's `rows_done` under the runner's hold.
 * A resumed job skips the steps already committed. A `quantity_change` import is one transaction.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AppContext } from '../app-context.ts';
import { asPlatform, inStore } from '../db/store-scope.ts';
import { ApiError } from '../shared/problem.ts';
import { holdStoreOpen } from '../stores/store.service.ts';
import { importStockCsv, type StepDone } from './stock-import.ts';
import { importJobsQueued } from './import-job.service.ts';
import {
  claimJob,
  finishJob,
  otherSessionsBusy,
  recordStep,
  releaseAbandonedJobs,
  renewHold,
  requeueJob,
  setJobPlan,
  type ClaimedJob,
} from './import-job.repository.ts';

/** Errors listed in a failed job (all of them are counted in its detail). */
const LISTED_ERRORS = 100;

/** Called after each committed step of a job; for tests that hold a job between two steps. */
export type ImportJobStepHook = (job: { id: string; storeId: string }, step: StepDone) => void | Promise<void>;

let stepHook: ImportJobStepHook | undefined;

/** Longest rest after one step (IMPORT_JOB_REST_PERCENT). */
const MOST_REST_MS = 1000;

/**
 * How long a job rests after a step that took `stepMs` (decision 0060, amended): `percent` of it,
 * at most MOST_REST_MS, when other sessions are busy; none otherwise.
 */
export function restAfterStep(stepMs: number, percent: number, othersBusy: boolean): number {
  if (!othersBusy || percent <= 0 || stepMs <= 0) return 0;
  return Math.min(MOST_REST_MS, Math.round((stepMs * percent) / 100));
}

/** Called with each rest a job takes between two steps (ms); for tests. */
let restHook: ((restMs: number) => void) | undefined;

/** Sets (or clears) the hook told of every rest between steps; for tests, never set in production. */
export function setImportJobRestHook(hook: ((restMs: number) => void) | undefined): void {
  restHook = hook;
}

/** Sets (or clears) the hook called after each committed step of every job; for tests, never set in production. */
export function setImportJobStepHook(hook: ImportJobStepHook | undefined): void {
  stepHook = hook;
}

/** The job is no longer this runner's (another took it over after its hold expired): write nothing more. */
class JobLost extends Error {}
/** The runner stops (its process shuts down): the job goes back to the queue after its last step. */
class RunnerStopping extends Error {}

export interface ImportJobRunner {
  /** Finishes the step in progress, gives the job back to the queue (it resumes there) and stops. */
  stop(): Promise<void>;
  /**
   * Stops looking and renewing without another statement, leaving its job running as a killed
   * process would (for tests of what the next runner does with it).
   */
  abandon(): void;
}

export interface RunnerOptions {
  /** Run the jobs of this store only (the CLI's runner). */
  storeId?: string;
}

const rowsText = (done: number, total: number) => `${done} of ${total} row${total === 1 ? '' : 's'}`;

/** Starts the runner of this process. */
export function startImportJobRunner(ctx: AppContext, { storeId }: RunnerOptions = {}): ImportJobRunner {
  const { config, database, logger } = ctx;
  const db = database.db;
  const me = `${process.pid}:${randomUUID()}`;
  const leaseMs = config.IMPORT_JOB_LEASE_MS;
  let stopping = false;
  let abandoned = false;
  let wake: (() => void) | undefined;
  const onQueued = () => wake?.();
  importJobsQueued.on('queued', onQueued);
  let lastRelease = Number.NEGATIVE_INFINITY;
  let firstLook = true;

  const note = (text: string) => `${new Date().toISOString()}: ${text}`;

  /** Gives back the jobs of runners that stopped renewing their hold. */
  async function releaseAbandoned(): Promise<void> {
    const now = Date.now();
    if (!firstLook && now - lastRelease < leaseMs / 2) return;
    const moved = await releaseAbandonedJobs(db, {
      leaseMs: firstLook && database.backend === 'pglite' ? 0 : leaseMs,
      maxAttempts: config.IMPORT_JOB_ATTEMPTS,
      storeId,
      note: (job) =>
        note(
          `The process running this job stopped (killed or cut off from the database) after ${rowsText(job.rows_done, job.rows_total)}; ` +
            `${job.rows_done === 0 ? 'nothing of it was written.' : 'those rows, committed in whole steps, stay applied, and the job resumes after them.'}`,
        ),
    });
    firstLook = false;
    lastRelease = now;
    for (const job of moved)
      logger.warn({ job: job.id, store: job.store_id, status: job.status, rowsDone: job.rows_done }, 'import job of a stopped runner taken back');
  }

  /**
   * Whether other sessions of the database are running a statement now (another store's reads, the
   * deliveries): on PostgreSQL, from pg_stat_activity (sessions of the service's own role are
   * visible to it). The embedded database has one session, whose steps give way by turns already.
   */
  async function othersBusy(): Promise<boolean> {
    if (database.backend === 'pglite' || config.IMPORT_JOB_REST_PERCENT === 0) return false;
    return otherSessionsBusy(db);
  }

  /** Runs one claimed job in its store, to its end or to the runner's stop. */
  async function run(job: ClaimedJob): Promise<void> {
    const stepRows = job.step_rows ?? (config.STOCK_IMPORT_STEP_ROWS > 0 ? config.STOCK_IMPORT_STEP_ROWS : null);
    let done = job.rows_done;
    let total = job.rows_total;
    const stop = new AbortController();
    const renew = setInterval(
      () => {
        if (abandoned) return;
        inStore(job.store_id, () => renewHold(db, job.id, me))
          .then((held) => {
            if (!held) stop.abort();
          })
          .catch((error: unknown) => logger.warn({ err: error, job: job.id }, 'could not renew the hold of an import job'));
      },
      Math.max(10, Math.floor(leaseMs / 4)),
    );
    renew.unref();
    const log = logger.child({ job: job.id, store: job.store_id });
    // When the current step began (the previous one's end, after its rest).
    let stepStarted = performance.now();
    try {
      await inStore(job.store_id, async () => {
        try {
          const summary = await importStockCsv(db, job.body, {
            log,
            intervalMs: config.PROGRESS_LOG_INTERVAL_MS,
            stepRows: stepRows ?? undefined,
            resumeFrom: job.rows_done,
            signal: stop.signal,
            onChecked: async (rows) => {
              total = rows;
              if (abandoned || !(await setJobPlan(db, job.id, me, { rowsTotal: rows, stepRows }))) throw new JobLost();
              if (stopping) throw new RunnerStopping();
            },
            inStep: async (trx, step) => {
              // The store's row held FOR SHARE until the step commits, as every admin write holds it:
              // a suspension or deletion waits for the step, and a step after it is refused (403
              // store_suspended, rolled back) and the job waits in the queue for the store's resumption.
              await holdStoreOpen(trx);
              if (abandoned || !(await recordStep(trx, job.id, me, step))) throw new JobLost();
            },
            afterStep: async (step) => {
              done = step.done;
              await stepHook?.({ id: job.id, storeId: job.store_id }, step);
              if (abandoned) throw new JobLost();
              if (stopping) throw new RunnerStopping();
              // Give way to other work: a job that takes every core it can delays another
              // store's lists and deliveries (the fairness bench, docs/benchmarks-stores.md).
              const last = step.done >= step.total;
              const rest = last ? 0 : restAfterStep(performance.now() - stepStarted, config.IMPORT_JOB_REST_PERCENT, await othersBusy());
              if (rest > 0) {
                restHook?.(rest);
                await sleep(rest);
              }
              stepStarted = performance.now();
            },
          });
          done = summary.rows;
          if (!(await finishJob(db, job.id, me, { status: 'succeeded' }))) throw new JobLost();
          log.info({ ...summary }, 'import job succeeded');
        } catch (error) {
          if (abandoned || error instanceof JobLost || stop.signal.aborted) {
            log.warn('import job taken over by another runner (this one had stopped renewing its hold): it writes nothing more');
            return;
          }
          if (error instanceof RunnerStopping || stopping) {
            await requeueJob(db, job.id, me, note(`Paused after ${rowsText(done, total)} as its process stopped; it resumes after them at the next start.`));
            log.info({ rowsDone: done }, 'import job paused: the process stops');
            return;
          }
          if (error instanceof ApiError && error.code === 'store_suspended') {
            await requeueJob(
              db,
              job.id,
              me,
              note(
                `Paused after ${rowsText(done, total)}: the store was suspended (or is being deleted); those rows stay applied, and the job resumes after them once the store is active again.`,
              ),
            );
            log.info({ rowsDone: done }, 'import job paused: its store is suspended');
            return;
          }
          if (error instanceof ApiError) {
            const applied =
              done > 0
                ? ` ${rowsText(done, total)} had been applied by an earlier run of this job, in whole committed steps, and stay applied.`
                : ' Nothing was imported.';
            await finishJob(db, job.id, me, {
              status: 'failed',
              error: {
                code: error.code,
                detail: `${error.detail.replace(/[;,.]? ?nothing was imported\.$/i, '.')}${applied}`,
                errors: (error.errors ?? []).slice(0, LISTED_ERRORS),
              },
            });
            log.info({ code: error.code }, 'import job failed: its rows were refused');
            return;
          }
          // A database fault or a bug: run again (it resumes after its last step) while attempts remain.
          log.error({ err: error }, 'import job stopped by an error');
          const message = (error as Error).message ?? String(error);
          if (job.attempts >= config.IMPORT_JOB_ATTEMPTS) {
            await finishJob(db, job.id, me, {
              status: 'failed',
              error: {
                code: 'internal',
                detail: `The job stopped on an error after ${rowsText(done, total)} (${done === 0 ? 'nothing written' : 'those rows stay applied, in whole committed steps'}), on its last allowed run (IMPORT_JOB_ATTEMPTS = ${config.IMPORT_JOB_ATTEMPTS}).`,
                errors: [],
              },
              note: note(`Stopped by an error: ${message}`),
            });
          } else {
            await requeueJob(db, job.id, me, note(`Stopped by an error after ${rowsText(done, total)} (${message}); it runs again, resuming after them.`));
          }
        }
      });
    } finally {
      clearInterval(renew);
    }
  }

  const loop = (async () => {
    while (!stopping && !abandoned) {
      let claimed = false;
      try {
        await asPlatform(async () => {
          await releaseAbandoned();
          if (stopping || abandoned) return;
          const job = await claimJob(db, me, storeId);
          if (!job) return;
          claimed = true;
          logger.info({ job: job.id, store: job.store_id, attempt: job.attempts, rowsDone: job.rows_done }, 'import job started');
          await run(job);
        });
      } catch (error) {
        logger.warn({ err: error }, 'import job runner: could not look for jobs; trying again');
      }
      if (claimed || stopping || abandoned) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, config.IMPORT_JOB_POLL_MS);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  })();

  return {
    stop: async () => {
      stopping = true;
      importJobsQueued.off('queued', onQueued);
      wake?.();
      await loop;
    },
    abandon: () => {
      abandoned = true;
      importJobsQueued.off('queued', onQueued);
      wake?.();
    },
  };
}
