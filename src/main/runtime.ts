/**
 * Opening and closing what a process runs on: configuration → logger → database → migrations.
 * Entry points (main/cli.ts) call this; nothing here listens or starts workers.
 */
import { pino, type Logger } from 'pino';
import type { AppContext } from '../app-context.ts';
import type { Config } from '../config/config.ts';
import { openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';

/** Paths whose values never reach a log line. */
export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-csrf-token"]',
  'res.headers["set-cookie"]',
  'token',
  'secret',
  'password',
  '*.token',
  '*.secret',
  '*.password',
];

export function createLogger(config: Config, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level: config.LOG_LEVEL,
      redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' },
    },
    destination as never,
  );
}

/** Opens the database of `config` and brings its schema up to date. */
export async function openContext(config: Config, logger: Logger, { migrate = true, applicationName = 'store-api' } = {}): Promise<AppContext> {
  const database = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.DATABASE_URL ? undefined : config.DATA_DIR,
    poolSize: config.DATABASE_POOL_SIZE,
    applicationName,
  });
  try {
    if (migrate) await migrateToLatest(database.db);
  } catch (error) {
    await database.close();
    throw error;
  }
  return { config, database, logger };
}
