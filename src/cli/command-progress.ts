/**
 * Progress of a long command (`demo generate`, `documents backfill`): a bar on a terminal; anywhere
 * else (CI, a container's log, journald) one JSON log line on stderr every PROGRESS_LOG_INTERVAL_MS
 * saying what is being done and how far it got, as the server's long starts do. The
 * commands' own logger is quieted to warnings, so the lines get one of their own at info.
 */
import type { Config } from '../config/config.ts';
import { progressBar } from '../demo/demo-seed.ts';
import { createLogger } from '../main/runtime.ts';
import { progressLog, type ProgressLog } from '../shared/progress-log.ts';

/** A bar when stderr is a terminal, else progress lines (shared/progress-log.ts) as JSON on stderr. */
export function commandProgress(config: Config, task: string, { terminal = process.stderr.isTTY === true }: { terminal?: boolean } = {}): ProgressLog {
  if (terminal) {
    const bar = progressBar(true);
    return { update: (done, total, phase) => bar.update(done, total, phase ?? task), stop: () => bar.stop() };
  }
  const logger = createLogger({ ...config, LOG_LEVEL: 'info' }, process.stderr, { terminal: false });
  return progressLog(logger, task, { intervalMs: config.PROGRESS_LOG_INTERVAL_MS });
}
