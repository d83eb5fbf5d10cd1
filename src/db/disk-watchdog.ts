/**
 * Free space of the embedded database's disk, and a watchdog for when it ran out anyway.
 *
 * When PGlite cannot create a write-ahead-log segment for want of space it may never return from the
 * statement (it spins a core; observed on a 64 MiB tmpfs): no JavaScript runs again in its thread
 * (its own worker thread, decision 0030; the main thread for an instance opened there), and nothing
 * it was asked ever answers. Two defences:
 *  - `freeBytes` lets db/database.ts refuse writes (SQLSTATE 53100, answered 507) while the data
 *    directory's disk has less than DATA_DIR_MIN_FREE_MB free, before PGlite meets a full disk, and
 *    accept them again as soon as space is freed;
 *  - `startDiskWatchdog` runs a worker thread that watches a heartbeat of the main thread, which
 *    beats only while no statement has been in flight longer (`inFlightSince`): when it has not
 *    beaten for STALL_MS while that disk is (nearly) full, it writes a clear
 *    message to stderr and kills the process (SIGKILL: the main thread cannot run an exit), so a
 *    supervisor restarts it; PGlite replays its log at the next start and nothing acknowledged is lost.
 */
import { statfsSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

/** Bytes available to this process on the file system holding `dir`. */
export function freeBytes(dir: string): number {
  const stats = statfsSync(dir);
  return stats.bavail * stats.bsize;
}

/** How long the main thread may miss its heartbeat, with the disk full, before the process is killed. */
export const STALL_MS = 20_000;

/** Below this many free bytes the disk counts as full for the watchdog (a WAL segment is 16 MiB). */
export const FULL_BELOW_BYTES = 16 * 1024 * 1024;

const WATCHDOG_SOURCE = `
const { workerData } = require('node:worker_threads');
const { statfsSync, writeSync } = require('node:fs');
const beat = new Int32Array(workerData.heartbeat);
setInterval(() => {
  const silentMs = Date.now() - Atomics.load(beat, 0) * 1000;
  if (silentMs < workerData.stallMs) return;
  let free;
  try { const s = statfsSync(workerData.dir); free = s.bavail * s.bsize; } catch { return; }
  if (free >= workerData.fullBelow) return;
  writeSync(2, 'store-api: the embedded database stopped answering for ' + Math.round(silentMs / 1000) + ' s with its disk full ('
    + Math.round(free / 1048576) + ' MiB free on ' + workerData.dir + '). It cannot recover in this process: killing it so a supervisor '
    + 'restarts it once space is freed (nothing acknowledged is lost). Free space or grow the volume.\\n');
  process.kill(process.pid, 'SIGKILL');
}, 1000);
`;

/**
 * Starts the watchdog of `dir`; call the returned function to stop it. `inFlightSince` gives when
 * the oldest statement still waiting for the database was sent (ms epoch), if any: the heartbeat is
 * the older of that and now, so a statement stuck in the database's own thread counts as a stall.
 */
export function startDiskWatchdog(
  dir: string,
  { stallMs = STALL_MS, fullBelow = FULL_BELOW_BYTES, inFlightSince = (): number | undefined => undefined } = {},
): () => void {
  const heartbeat = new SharedArrayBuffer(4);
  const beat = new Int32Array(heartbeat);
  const tick = () => Atomics.store(beat, 0, Math.floor(Math.min(Date.now(), inFlightSince() ?? Number.POSITIVE_INFINITY) / 1000));
  tick();
  const timer = setInterval(tick, 1000);
  timer.unref();
  const worker = new Worker(WATCHDOG_SOURCE, { eval: true, workerData: { heartbeat, dir, stallMs, fullBelow } });
  worker.unref();
  return () => {
    clearInterval(timer);
    void worker.terminate();
  };
}
