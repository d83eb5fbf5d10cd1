/**
 * The loop of `store-api-sync run`: the initial sync (resumable), then a reconcile every
 * `reconcileEveryMs`, for as long as the process lives. A failure (the service restarting or down,
 * the network, the mirror database) does not end it: it is logged, recorded for `status`
 * (store_mirror.daemon_state, when the mirror answers) and retried after a jittered backoff that
 * grows from `retryMinMs` to `retryMaxMs`, without end. A resource the token may not read (403, a
 * missing scope) is skipped and said once; the others are synced, and it is tried again every cycle,
 * so a scope granted later mirrors it from then on (unreadable-resources.ts). Only failures that
 * waiting cannot heal end it: a token the service refuses (401) or that may read no resource at all,
 * or a base URL where something else answers.
 */
import { sql } from 'kysely';
import type { MirrorDatabase } from './mirror/mirror-database.ts';
import type { StoreReader } from './store-reader.ts';
import type { SyncResource } from './sync-resources.ts';
import { initialSync, type InitialSyncOptions } from './initial-sync.ts';
import { reconcile, type ReconcileReport } from './reconcile.ts';
import { describeError, SyncError } from './sync-errors.ts';
import { readSyncState } from './mirror/mirror.repository.ts';
import { unreadableResources } from './unreadable-resources.ts';

export interface DaemonOptions {
  reconcileEveryMs: number;
  /** First wait after a failure (ms). */
  retryMinMs: number;
  /** Longest wait between tries (ms). */
  retryMaxMs: number;
  /** Ends the loop (SIGINT/SIGTERM). */
  signal: AbortSignal;
  log: (line: string) => void;
  onProgress?: InitialSyncOptions['onProgress'];
  onReconcile?: (reports: ReconcileReport[]) => void;
  /** Called when a resource is skipped for a missing scope (each cycle it is). */
  onSkip?: (resource: SyncResource) => void;
  random?: () => number;
}

/** The daemon's record of an outage, as `status` shows it. */
export interface DaemonState {
  outage_since: string | null;
  outage_attempts: number;
  last_error: string | null;
  last_success_at: string | null;
}

/** Whether waiting cannot heal `error` (a refused token, something that is not the Store API). */
export function isFatal(error: unknown): boolean {
  if (error instanceof SyncError) return true;
  const code = (error as { code?: unknown })?.code;
  return code === 'unauthorized' || code === 'forbidden' || code === 'not_store_api';
}

/** Backoff before try number `attempt` (1-based) after failures: between half and all of min(max, min·2^(n-1)). */
export function daemonBackoff(attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

export async function readDaemonState(mirror: MirrorDatabase): Promise<DaemonState | undefined> {
  const { rows } = await sql<DaemonState>`
    SELECT to_char(outage_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS outage_since, outage_attempts, last_error,
           to_char(last_success_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_success_at
    FROM store_mirror.daemon_state WHERE id = 1`.execute(mirror.db);
  return rows[0];
}

async function recordOutage(mirror: MirrorDatabase, error: string): Promise<void> {
  await sql`
    INSERT INTO store_mirror.daemon_state (id, outage_since, outage_attempts, last_error, updated_at)
    VALUES (1, now(), 1, ${error}, now())
    ON CONFLICT (id) DO UPDATE SET outage_since = coalesce(store_mirror.daemon_state.outage_since, now()),
      outage_attempts = store_mirror.daemon_state.outage_attempts + 1, last_error = excluded.last_error, updated_at = now()`.execute(mirror.db);
}

async function recordSuccess(mirror: MirrorDatabase): Promise<void> {
  await sql`
    INSERT INTO store_mirror.daemon_state (id, last_success_at, updated_at) VALUES (1, now(), now())
    ON CONFLICT (id) DO UPDATE SET outage_since = NULL, outage_attempts = 0, last_error = NULL, last_success_at = now(), updated_at = now()`.execute(mirror.db);
}

function wait(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Runs until `options.signal` aborts; throws only a fatal error (see isFatal). */
export async function runDaemon(mirror: MirrorDatabase, reader: StoreReader, resources: readonly SyncResource[], options: DaemonOptions): Promise<void> {
  const { signal, log } = options;
  let failures = 0;
  let outageStarted: number | undefined;
  let initialDone = false;
  const readable = unreadableResources({ warn: log, mirror, onSkip: options.onSkip });
  const initial = (resource: SyncResource) => initialSync(mirror, reader, [resource], { onProgress: options.onProgress });
  while (!signal.aborted) {
    try {
      if (!initialDone) {
        const synced = await readable.each(resources, initial);
        initialDone = true;
        log(
          `initial sync complete${synced.length < resources.length ? ` (${synced.length} of ${resources.length} resources; the others skipped, see above)` : ''}`,
        );
      }
      const reports = await readable.each(resources, async (resource) => {
        // A resource skipped until now (its scope granted since) starts with its initial sync.
        if (!(await readSyncState(mirror.db, resource.name)).initial_done) await initial(resource);
        return reconcile(mirror, reader, [resource]);
      });
      options.onReconcile?.(reports.flat());
      if (outageStarted !== undefined)
        log(`recovered after ${Math.round((Date.now() - outageStarted) / 1000)} s and ${failures} failed tries; the mirror is caught up`);
      failures = 0;
      outageStarted = undefined;
      await recordSuccess(mirror).catch(() => {});
      await wait(options.reconcileEveryMs, signal);
    } catch (error) {
      if (signal.aborted) return;
      if (isFatal(error)) throw error;
      failures++;
      outageStarted ??= Date.now();
      const delay = daemonBackoff(failures, options.retryMinMs, options.retryMaxMs, options.random);
      const what = describeError(error);
      log(
        `outage: ${what}; the webhook receiver stays up; retrying ${initialDone ? 'the reconcile' : 'the initial sync'} in ${(delay / 1000).toFixed(1)} s (failed try ${failures})`,
      );
      await recordOutage(mirror, what).catch(() => {
        /* the mirror itself is down: the log says so */
      });
      await wait(delay, signal);
    }
  }
}
