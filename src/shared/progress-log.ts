/**
 * Progress of long work as log lines: a first start that seeds 20,000 demo products,
 * migrations over a large store, opening a data directory that replays its log, a large import or
 * backfill. A terminal gets a progress bar where there is one; everywhere else (JSON logs read by
 * `kubectl logs`, journald, CI) nothing was printed for minutes while the port stayed closed. So a
 * line every PROGRESS_LOG_INTERVAL_MS says what is being done and how far it got; work that ends
 * sooner prints nothing extra. The timer runs on the HTTP thread, which the database no longer holds
 * (decision 0030), so the lines come while a long statement runs.
 */
import type { Logger } from 'pino';

/** How often long work logs where it is. */
export const PROGRESS_LOG_INTERVAL_MS = 5000;

export interface ProgressLog {
  /** Where the work is now (logged at the next tick). */
  update(done: number, total: number, phase?: string): void;
  /** Stops the lines; when any was logged, a last one says the work ended and how long it took. */
  stop(fields?: Record<string, unknown>): void;
}

type Sink = Pick<Logger, 'info'>;

export function progressLog(logger: Sink, task: string, { intervalMs = PROGRESS_LOG_INTERVAL_MS }: { intervalMs?: number } = {}): ProgressLog {
  const started = performance.now();
  const seconds = () => Math.round((performance.now() - started) / 100) / 10;
  let at: { done: number; total: number; phase?: string } | undefined;
  let logged = 0;
  let stopped = false;
  const timer = setInterval(() => {
    logged += 1;
    const elapsed_s = seconds();
    const where = at ? `${at.phase ? `${at.phase} ` : ''}${at.done}/${at.total}` : 'still working';
    logger.info({ task, progress: at, elapsed_s }, `${task}: ${where} (${elapsed_s} s so far)`);
  }, intervalMs);
  // Never what keeps a process alive.
  timer.unref();
  return {
    update(done, total, phase) {
      at = phase === undefined ? { done, total } : { done, total, phase };
    },
    stop(fields = {}) {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      if (logged > 0) logger.info({ task, elapsed_s: seconds(), ...fields }, `${task}: done in ${seconds()} s`);
    },
  };
}

/** Runs `work` with progress lines while it takes longer than an interval. */
export async function withProgressLog<T>(
  logger: Sink,
  task: string,
  work: (progress: ProgressLog) => Promise<T>,
  options?: { intervalMs?: number },
): Promise<T> {
  const progress = progressLog(logger, task, options);
  try {
    return await work(progress);
  } finally {
    progress.stop();
  }
}
