/**
 * Free space of the embedded database's disk, and a watchdog for when it ran out anyway.
 *
 * When PGlite cannot create a write-ahead-log segment for want of space it may never return from the
 * statement (it spins a core; observed on a 64 MiB tmpfs): no JavaScript runs again in its thread
 * (its own worker thread, decision 0030), and nothing it was asked ever answers. Two defences:
 *  - `freeBytes` lets db/database.ts refuse writes (SQLSTATE 53100, answered 507) while the data
 *    directory's disk has less than DATA_DIR_MIN_FREE_MB free, before PGlite meets a full disk, and
 *    accept them again as soon as space is freed;
 *  - `startDiskWatchdog` checks, every second on the HTTP thread, how long the oldest statement sent
 *    to the database's thread has gone unanswered (`inFlightSince`): past STALL_MS while that disk is
 *    (nearly) full, it writes a clear message to stderr and kills the process (SIGKILL: the
 *    database's thread cannot be stopped from outside, nor can it run an exit), so a supervisor
 *    restarts it; PGlite replays its log at the next start and nothing acknowledged is lost.
 *    The HTTP thread keeps running while the database's thread is stuck, so the check needs no
 *    thread of its own (decision 0048: it had one, ~7 MiB of resident memory for a second isolate).
 */
import { statfsSync, writeSync } from 'node:fs';

/** Bytes available to this process on the file system holding `dir`. */
export function freeBytes(dir: string): number {
  const stats = statfsSync(dir);
  return stats.bavail * stats.bsize;
}

/** How long a statement may go unanswered, with the disk full, before the process is killed. */
export const STALL_MS = 20_000;

/** Below this many free bytes the disk counts as full for the watchdog (a WAL segment is 16 MiB). */
export const FULL_BELOW_BYTES = 16 * 1024 * 1024;

/**
 * Starts the watchdog of `dir`; call the returned function to stop it. `inFlightSince` gives when
 * the oldest statement still waiting for the database's thread was sent (ms epoch), if any.
 */
export function startDiskWatchdog(
  dir: string,
  inFlightSince: () => number | undefined,
  { stallMs = STALL_MS, fullBelow = FULL_BELOW_BYTES, everyMs = 1000 } = {},
): () => void {
  const timer = setInterval(() => {
    const since = inFlightSince();
    if (since === undefined) return;
    const silentMs = Date.now() - since;
    if (silentMs < stallMs) return;
    let free: number;
    try {
      free = freeBytes(dir);
    } catch {
      return;
    }
    if (free >= fullBelow) return;
    writeSync(
      2,
      `store-api: the embedded database stopped answering for ${Math.round(silentMs / 1000)} s with its disk full (${Math.round(free / 1048576)} MiB free on ${dir}). It cannot recover in this process: killing it so a supervisor restarts it once space is freed (nothing acknowledged is lost). Free space or grow the volume.\n`,
    );
    process.kill(process.pid, 'SIGKILL');
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
