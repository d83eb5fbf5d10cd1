/**
 * Opening and closing what a process runs on: configuration → logger → database → migrations.
 * Entry points (main/cli.ts) call this; nothing here listens or starts workers.
 */
import { activeTracing, traceLogFields } from '../shared/tracing.ts';
import { setTimeout as pause } from 'node:timers/promises';
import { pino, type Logger } from 'pino';
import type { MigrationResultSet } from 'kysely/migration';
import type { AppContext } from '../app-context.ts';
import type { Config } from '../config/config.ts';
import { openDatabase } from '../db/database.ts';
import { MigrationError, migrateToLatest, migrationNames } from '../schema/migrate.ts';
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
      // With tracing on, a line written while a span is active names its trace_id and span_id.
      ...(activeTracing() ? { mixin: traceLogFields } : {}),
    },
    stream as never,
  );
}

/** Pause between two tries of a start whose database did not answer in time. */
const START_RETRY_PAUSE_MS = 1000;

/**
 * Applies the pending migrations: at a start, the first statement on a new connection. On
 * PostgreSQL a connection that timed out (on a CPU-starved host the start's own work can hold the
 * thread past DATABASE_CONNECT_TIMEOUT_MS) or a server still starting up is tried again,
 * with a warning per try, until DATABASE_START_TIMEOUT_MS has passed or `signal` aborts (a SIGTERM
 * during the start); a clear refusal (nothing listening, wrong password, missing database) ends the
 * start at once (schema/migrate.ts says which is which).
 */
export async function migrateAtStart(ctx: AppContext, { signal }: { signal?: AbortSignal } = {}): Promise<MigrationResultSet> {
  const { config, database, logger } = ctx;
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await withProgressLog(logger, 'migrating the database schema', () => migrateToLatest(database.db), {
        intervalMs: config.PROGRESS_LOG_INTERVAL_MS,
      });
    } catch (error) {
      if (!(error instanceof MigrationError && error.retryable)) throw error;
      const elapsedMs = Date.now() - started;
      const tried = `Tried ${attempt} time${attempt === 1 ? '' : 's'} in ${Math.round(elapsedMs / 1000)} s (DATABASE_START_TIMEOUT_MS=${config.DATABASE_START_TIMEOUT_MS}).`;
      if (signal?.aborted) throw new MigrationError(`${error.message} ${tried} The start was stopped (${String(signal.reason)}).`);
      if (elapsedMs + START_RETRY_PAUSE_MS >= config.DATABASE_START_TIMEOUT_MS) throw new MigrationError(`${error.message} ${tried}`);
      logger.warn(
        { attempt, elapsed_s: Math.round(elapsedMs / 1000), cause: error.message },
        `the database did not answer within DATABASE_CONNECT_TIMEOUT_MS (${config.DATABASE_CONNECT_TIMEOUT_MS} ms) or is starting up; trying again until DATABASE_START_TIMEOUT_MS (${config.DATABASE_START_TIMEOUT_MS} ms) has passed`,
      );
      await pause(START_RETRY_PAUSE_MS, undefined, signal ? { signal } : {}).catch(() => {});
    }
  }
}

/** Opens the database of `config` and brings its schema up to date (`signal`: stops waiting for a slow database, migrateAtStart). */
export async function openContext(
  config: Config,
  logger: Logger,
  {
    migrate = true,
    applicationName = 'store-api',
    template,
    signal,
  }: { migrate?: boolean; applicationName?: string; template?: readonly string[]; signal?: AbortSignal } = {},
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
        connectTimeoutMs: config.DATABASE_CONNECT_TIMEOUT_MS,
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
      await migrateAtStart({ config, database, logger }, signal ? { signal } : {});
      // Code outside any store scope acts for the only store, or (several) for none (decision 0051).
      await useDefaultStoreScope(database);
    }
  } catch (error) {
    await database.close();
    throw error;
  }
  return { config, database, logger };
}
