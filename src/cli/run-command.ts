/**
 * Shared frame of CLI commands: load config, open the database, run, close, and turn known
 * failures (bad configuration, locked data directory, API errors) into one clear line and exit 1.
 */
import type { AppContext } from '../app-context.ts';
import { ConfigError, loadConfig } from '../config/config.ts';
import { DataDirLockedError } from '../db/data-dir-lock.ts';
import { MigrationError } from '../db/migrate.ts';
import { ApiError } from '../shared/problem.ts';
import { createLogger, openContext } from '../main/runtime.ts';

/** A mistake in the command line itself (bad option value): printed plainly, exit 1. */
export class CliUsageError extends Error {}

/** Prints a known failure plainly and exits 1; anything unexpected with its stack. */
export function exitWithError(error: unknown): never {
  if (error instanceof ConfigError || error instanceof DataDirLockedError || error instanceof MigrationError || error instanceof CliUsageError) {
    process.stderr.write(`${error.message}\n`);
  } else if (error instanceof ApiError) {
    process.stderr.write(`Error (${error.code}): ${error.detail}\n`);
  } else {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  process.exit(1);
}

/**
 * One line for a command refused because a running server holds the embedded data directory:
 * the holder, what to do instead while it runs (`instead`, when the command has a way through the
 * running server), and the fallback of stopping it.
 */
export function dataDirBusyLine(error: DataDirLockedError, instead?: string): string {
  const why = `the data directory ${error.dataDir} is in use by another process (pid ${error.pid}), most likely the running server, and the embedded database allows one process at a time`;
  return instead
    ? `Cannot run this while ${why}. Instead, ${instead}; or stop that process and run this again. Nothing was changed.`
    : `Cannot run this while ${why}. Stop that process and run this again. Nothing was changed.`;
}

export interface ContextOptions {
  /** What to do instead while a server holds the embedded data directory (one clause). */
  whileServerRuns?: string;
}

/** Runs `fn` with an opened context (database migrated), closing it afterwards. */
export async function withContext<T>(fn: (ctx: AppContext) => Promise<T>, { whileServerRuns }: ContextOptions = {}): Promise<T> {
  try {
    const config = loadConfig();
    const logger = createLogger({ ...config, LOG_LEVEL: config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL });
    const ctx = await openContext(config, logger, { applicationName: 'store-api-cli' });
    try {
      return await fn(ctx);
    } finally {
      await ctx.database.close();
    }
  } catch (error) {
    if (error instanceof DataDirLockedError) {
      process.stderr.write(`${dataDirBusyLine(error, whileServerRuns)}\n`);
      process.exit(1);
    }
    exitWithError(error);
  }
}
