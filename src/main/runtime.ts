/**
 * Opening and closing what a process runs on: configuration → logger → database → migrations.
 * Entry points (main/cli.ts) call this; nothing here listens or starts workers.
 */
import { pino, type Logger } from 'pino';
import type { AppContext } from '../app-context.ts';
import type { Config } from '../config/config.ts';
import { openDatabase } from '../db/database.ts';
import { migrateToLatest, migrationNames } from '../schema/migrate.ts';
import { requestLogSerializer } from '../ops/log-redaction.ts';
import { withProgressLog } from '../shared/progress-log.ts';
import { terminalLogStream } from '../ops/terminal-log.ts';
import { useDefaultStoreScope } from '../stores/store.service.ts';

/**
 * Paths whose values never reach a log line: credentials in headers (API tokens, session cookies,
 * CSRF tokens), and token or secret fields in any logged object up to two levels deep (API tokens
 * in admin responses, webhook signing secrets). Request logs carry no headers or bodies anyway
 * (our request serializer: method, URL with credentials redacted, host, address); these paths guard
 * what code logs by hand. The test in test/production/logging.test.ts greps captured output for a live token.
 */
export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-csrf-token"]',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  '*.headers.authorization',
  '*.headers.cookie',
  'authorization',
  'token',
  'secret',
  'secrets',
  'signing_secret',
  'password',
  '*.token',
  '*.secret',
  '*.secrets',
  '*.signing_secret',
  '*.password',
  '*.*.token',
  '*.*.secret',
  '*.*.signing_secret',
];

/**
 * The process's logger: JSON lines, or on a terminal (`terminal`, by default whether stdout is one
 * and no destination is given) one short line per record and per request (ops/terminal-log.ts).
 */
export function createLogger(
  config: Config,
  destination?: NodeJS.WritableStream,
  { terminal = destination === undefined && process.stdout.isTTY === true }: { terminal?: boolean } = {},
): Logger {
  const stream = terminal ? terminalLogStream(destination ?? process.stdout) : destination;
  return pino(
    {
      level: config.LOG_LEVEL,
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' },
      // Fastify takes the instance's serializers over its own: request URLs are logged redacted.
      serializers: { req: requestLogSerializer },
    },
    stream as never,
  );
}

/** Opens the database of `config` and brings its schema up to date. */
export async function openContext(
  config: Config,
  logger: Logger,
  { migrate = true, applicationName = 'store-api', template }: { migrate?: boolean; applicationName?: string; template?: readonly string[] } = {},
): Promise<AppContext> {
  const every = { intervalMs: config.PROGRESS_LOG_INTERVAL_MS };
  const database = await withProgressLog(
    logger,
    'opening the database',
    () =>
      openDatabase({
        databaseUrl: config.DATABASE_URL,
        dataDir: config.DATABASE_URL ? undefined : config.DATA_DIR,
        poolSize: config.DATABASE_POOL_SIZE,
        minFreeBytes: config.DATA_DIR_MIN_FREE_MB * 1024 * 1024,
        sharedBuffersMb: config.PGLITE_SHARED_BUFFERS_MB,
        workerYoungGenerationMb: config.PGLITE_WORKER_YOUNG_GENERATION_MB,
        workerBufferSlackMb: config.PGLITE_WORKER_BUFFER_SLACK_MB,
        applicationName,
        // An empty data directory starts from the build's template unless it is from a later build.
        knownMigrations: migrationNames(),
        ...(template ? { template } : {}),
        onConnectionError: (error) => logger.warn({ err: error }, 'database connection lost; the pool opens a fresh one when needed'),
      }),
    every,
  );
  try {
    if (migrate) {
      await withProgressLog(logger, 'migrating the database schema', () => migrateToLatest(database.db), every);
      // Code outside any store scope acts for the only store, or (several) for none (decision 0051).
      await useDefaultStoreScope(database);
    }
  } catch (error) {
    await database.close();
    throw error;
  }
  return { config, database, logger };
}
