/**
 * Opens the system of record: PGlite in a data directory (embedded default) or a PostgreSQL server
 * (DATABASE_URL). Both get the same type parsers so rows look alike whatever the back end:
 * int8 → number, numeric → number, timestamps/dates/intervals → their text (never a JS Date, which
 * would drop microseconds and break cursors).
 */
import { CompiledQuery, Kysely, PGliteDialect, PostgresDialect, type DatabaseConnection, type LogEvent } from 'kysely';
import pg from 'pg';
import { SpanKind, trace } from '@opentelemetry/api';
import { activeTracing, inSpan } from '../shared/tracing.ts';
import type { PGlite } from '@electric-sql/pglite';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Database } from './schema.ts';
import { acquireDataDirLock, type DataDirLock } from './data-dir-lock.ts';
import { markConnectFailure } from '../shared/db-errors.ts';
import { DISK_FULL_SQLSTATE, isOutOfSpace, isWalWriteFailure, StorageHealth, StoreFailedError } from './storage-health.ts';
import { freeBytes, startDiskWatchdog } from './disk-watchdog.ts';
import { copyPgliteTemplate, PGLITE_TEMPLATE_DIR, readStamp, type TemplateStamp } from './pglite-template.ts';
import { PGliteThread } from './pglite-thread.ts';
import type { ThreadStats } from './pglite-worker.ts';
import { typeParsers } from './type-parsers.ts';
import { withRequestTransactions } from './request-transaction.ts';
import { copyBinary, inlineParameters, parseBinaryCopy, rowsOfMessages, textParameters, type RowReader } from './copy-out.ts';
import { bufferCollector } from './buffer-collector.ts';
import { ScopeState, statementObserverOf } from './store-scope.ts';
import { readsByIndex } from './index-reads.ts';

export type Backend = 'pglite' | 'postgres';

export interface DatabaseHandle {
  readonly db: Kysely<Database>;
  readonly backend: Backend;
  /** PostgreSQL: the connection string (for a dedicated LISTEN connection); undefined on PGlite. */
  readonly url?: string;
  /** Connections in use / total, for metrics (PGlite: one connection). */
  poolStats(): { total: number; idle: number; waiting: number };
  close(): Promise<void>;
  /** Whether the store can take writes (a full disk; db/storage-health.ts). */
  readonly storage: StorageHealth;
  /** The embedded database's data directory (its disk's free space is on /metrics); undefined for PostgreSQL or in memory. */
  readonly dataDir?: string;
  /**
   * Runs a statement and gives its rows' fields to `read` as bytes, never decoded to strings
   * (db/copy-out.ts `RowReader`): on PostgreSQL a binary COPY of it (its parameters inlined) through
   * pg-copy-streams on a connection of its own (decision 0046); on the embedded database in its
   * thread, in a turn of its connection, the statement kept prepared there (decision 0050).
   * Undefined for a PGlite run on this thread (the build's templates), whose callers run the
   * statement through Kysely instead.
   */
  readonly readRows?: RowReader;
  /** Embedded database in its own thread: what that thread runs with (db/pglite-worker.ts); undefined otherwise. */
  readonly threadStats?: () => Promise<ThreadStats>;
  /**
   * Embedded database in its own thread: whether the thread runs, and how long (ms) since it last
   * answered a statement (PGliteThread.activity; /readyz tells a busy database from a gone one);
   * undefined otherwise.
   */
  readonly activity?: () => { alive: boolean; quietMs: number };
  /** Set when this open filled an empty data directory from a template holding a demo store. */
  readonly templateDemo?: TemplateStamp['demo'];
  /** The store scopes of this database's connections (db/store-scope.ts): its default, and each session's. */
  readonly scopes: ScopeState;
}

const parsers = typeParsers;

/** Kysely's log hook: each statement run, to the statement observer when one is set (db/store-scope.ts), which Kysely awaits. */
function observed(scopes: ScopeState): (event: LogEvent) => void | Promise<void> {
  return (event) => statementObserverOf()?.(event.query.sql, event.query.parameters, scopes.wanted(), readsByIndex());
}

/**
 * A migrated PGlite data directory copied into an empty `dataDir` instead of running initdb
 * (db/pglite-template.ts). The migrations are above db/ (schema/migrate.ts, decision 0041), so the
 * caller says which ones it knows: a template holding another one comes from a later build and is
 * passed over. No `knownMigrations`, no template (a template named without them is a type error).
 */
export type TemplateOptions =
  | { template?: false; knownMigrations?: readonly string[] }
  | {
      /**
       * The template(s), default the one `npm run build` makes. Several: the first usable one is
       * copied (the demo store's template, then the empty one).
       */
      template?: string | readonly string[];
      /** Every migration this code has (schema/migrate.ts `migrationNames()`). */
      knownMigrations: readonly string[];
    };

/** What openDatabase opens: a PostgreSQL server, an embedded data directory or an in-memory PGlite. */
export type OpenDatabaseOptions = DatabaseTarget & TemplateOptions;

interface DatabaseTarget {
  databaseUrl?: string;
  /** Embedded data directory; `undefined` with no databaseUrl means an in-memory PGlite (tests). */
  dataDir?: string;
  poolSize?: number;
  /**
   * An already open PGlite instance, used on this thread (the build's templates). Every other
   * embedded open runs PGlite in its own worker thread (db/pglite-thread.ts, decision 0030).
   */
  pglite?: PGlite;
  /** An in-memory embedded database started from a dumped data directory (tests' clones). */
  archive?: Uint8Array;
  /**
   * Embedded only: V8's young generation of the database thread in MiB
   * (PGLITE_WORKER_YOUNG_GENERATION_MB; default DEFAULT_PGLITE_WORKER_YOUNG_GENERATION_MB).
   */
  workerYoungGenerationMb?: number;
  /**
   * Embedded only: MiB of dead buffers the database thread, and the HTTP thread for the pages it
   * reads from it, may pile up before they collect them (PGLITE_WORKER_BUFFER_SLACK_MB; default
   * DEFAULT_PGLITE_WORKER_BUFFER_SLACK_MB; 0 = V8 decides).
   */
  workerBufferSlackMb?: number;
  applicationName?: string;
  /**
   * Embedded data directory only: writes are refused (53100, answered 507) while its disk has less
   * than this many bytes free (DATA_DIR_MIN_FREE_MB; 0 = no check), and a watchdog kills a process
   * wedged by a full disk (db/disk-watchdog.ts).
   */
  minFreeBytes?: number;
  /**
   * Embedded only: PostgreSQL's shared_buffers inside PGlite, in MiB (PGLITE_SHARED_BUFFERS_MB;
   * default DEFAULT_PGLITE_SHARED_BUFFERS_MB). Ignored with `pglite` (the instance is already open).
   */
  sharedBuffersMb?: number;
  /** Told about connection errors the pool recovers from by itself (default: ignored). */
  onConnectionError?: (error: Error) => void;
  /** PostgreSQL: longest opening one connection may take (DATABASE_CONNECT_TIMEOUT_MS; default CONNECT_TIMEOUT_MS). */
  connectTimeoutMs?: number;
}

/**
 * How long a request waits for a PostgreSQL connection before it is answered 503 (an unreachable
 * server must not hold requests forever; pg's default is to wait without end). The default of
 * DATABASE_CONNECT_TIMEOUT_MS; a start tries again past it (main/runtime.ts).
 */
export const CONNECT_TIMEOUT_MS = 5000;

/** Whether `dataDir` holds an embedded store (a PGlite cluster made by a start or a command with --create). */
export function embeddedStoreExists(dataDir: string): boolean {
  return existsSync(join(resolve(dataDir), 'pglite', 'PG_VERSION'));
}

/** Opens the database described by the options. Never runs migrations (schema/migrate.ts does). */
export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  if (options.databaseUrl) {
    return openPostgres(options.databaseUrl, options.poolSize ?? 10, options.applicationName, options.onConnectionError, options.connectTimeoutMs);
  }
  return openPglite(options);
}

function openPostgres(
  url: string,
  max: number,
  applicationName = 'store-api',
  onConnectionError: (error: Error) => void = () => {},
  connectTimeoutMs = CONNECT_TIMEOUT_MS,
): DatabaseHandle {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    connectionTimeoutMillis: connectTimeoutMs,
    application_name: applicationName,
    // Session time zone UTC so that any timestamp text we read back is in UTC. No JIT compilation:
    // every statement of the service is short, and past a few thousand enabled endpoints (a fleet
    // of stores) the claims' estimated cost crossed jit_above_cost, compiling for 1.9 s a statement
    // that runs in 44 ms (docs/benchmarks-stores.md).
    options: '-c TimeZone=UTC -c jit=off',
    types: {
      getTypeParser: ((oid: number, format?: string) => parsers[oid] ?? pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // A connection that dies (pg_terminate_backend, restart, failover) emits 'error' on its client;
  // an unlistened 'error' event kills the process. pg-pool listens only while a client is idle
  // (pool 'error'), so every client gets its own listener for the time it is checked out too. The
  // query that was running fails with the same error (answered 503, see shared/db-errors.ts), and
  // the pool drops the dead client when it is released and connects a fresh one on demand.
  pool.on('connect', (client) => client.on('error', onConnectionError));
  // An idle client's error reaches the pool too (the client listener above has reported it).
  pool.on('error', () => {});
  // Whatever PostgreSQL says while a connection is being opened (55000 "not currently accepting
  // connections", 3D000, 28P01, a refused socket, a timeout) means the request could not get a
  // connection: tagged so it is answered 503 + Retry-After (shared/db-errors.ts), never 500.
  // Every connection a statement or a copy takes is put in the running code's store scope first
  // (db/store-scope.ts): outside a transaction, as it is taken from the pool.
  const scopes = new ScopeState();
  const connectTagged = {
    connect: async () => {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        throw markConnectFailure(error);
      }
      try {
        await scopes.sync(client, (text, parameters) => client.query(text, parameters));
      } catch (error) {
        client.release(true);
        throw markConnectFailure(error);
      }
      return client;
    },
    end: () => pool.end(),
  } as unknown as pg.Pool;
  const db = new Kysely<Database>({ dialect: withRequestTransactions(new PostgresDialect({ pool: connectTagged })), log: observed(scopes) });
  return {
    db,
    backend: 'postgres',
    url,
    scopes,
    storage: new StorageHealth(),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    readRows: async (query, read) => {
      void statementObserverOf()?.(query.sql, query.parameters, scopes.wanted(), readsByIndex());
      const client = await connectTagged.connect();
      let pieces: Buffer[];
      try {
        pieces = await copyBinary(client, inlineParameters(query.sql, query.parameters));
      } catch (error) {
        // A COPY broken off may leave the connection mid-protocol: dropped, not reused.
        client.release(true);
        throw error;
      }
      client.release();
      return read(parseBinaryCopy(pieces), true);
    },
    close: () => db.destroy(),
  };
}

async function openPglite(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  let lock: DataDirLock | undefined;
  let templateDemo: TemplateStamp['demo'];
  let diskDir: string | undefined;
  // Set once the worker stops without being closed (below): statements fail 57P01 from then on.
  let onThreadExit: (reason: string) => void = () => {};
  const startThread = (start: { dataDir?: string; archive?: Uint8Array }) =>
    PGliteThread.open({
      ...start,
      startParams: pgliteStartParams(options.sharedBuffersMb),
      youngGenerationMb: options.workerYoungGenerationMb ?? DEFAULT_PGLITE_WORKER_YOUNG_GENERATION_MB,
      bufferSlackMb: options.workerBufferSlackMb ?? DEFAULT_PGLITE_WORKER_BUFFER_SLACK_MB,
      onExit: (reason) => onThreadExit(reason),
    });
  let engine: PGlite | PGliteThread;
  if (options.pglite) {
    engine = options.pglite;
    await engine.exec(`SET TimeZone = 'UTC'`);
  } else if (options.dataDir) {
    const dir = resolve(options.dataDir);
    mkdirSync(dir, { recursive: true });
    // PGlite takes no lock of its own: two processes on one directory lose rows. Refuse the second.
    lock = acquireDataDirLock(dir);
    try {
      const known = options.knownMigrations;
      const templates = options.template === false || known === undefined ? [] : [options.template ?? PGLITE_TEMPLATE_DIR].flat();
      for (const template of templates) {
        if (copyPgliteTemplate(template, join(dir, 'pglite'), known!)) {
          templateDemo = readStamp(template)?.demo;
          break;
        }
      }
      engine = await startThread({ dataDir: join(dir, 'pglite') });
      diskDir = dir;
    } catch (error) {
      lock.release();
      throw error;
    }
  } else {
    engine = await startThread(options.archive ? { archive: options.archive } : {});
  }
  const minFree = diskDir ? (options.minFreeBytes ?? 0) : 0;
  const lowSpace = (): string | undefined => {
    if (!diskDir || minFree <= 0) return undefined;
    const free = freeBytes(diskDir);
    return free < minFree
      ? `The store cannot write: only ${(free / 1048576).toFixed(1)} MiB free on the embedded database's disk (${diskDir}), below DATA_DIR_MIN_FREE_MB (${(minFree / 1048576).toFixed(0)}). No space left on device for safe writes; free space or grow the volume.`
      : undefined;
  };
  const storage = new StorageHealth(Date.now, undefined, diskDir && minFree > 0 ? lowSpace : undefined);
  onThreadExit = (reason) => storage.markFatal(`${reason}; restart the process (PostgreSQL replays its log at the next start).`);
  // A statement stuck in the database's thread with the disk full ends the process (db/disk-watchdog.ts).
  const stopWatchdog = diskDir && engine instanceof PGliteThread ? startDiskWatchdog(diskDir, () => engine.inFlightSince()) : () => {};
  const inThread = engine instanceof PGliteThread;
  // One session, put in the running code's store scope as its connection is taken for a statement,
  // a transaction or a copy (db/store-scope.ts): never inside a transaction, which a rollback
  // would undo.
  const scopes = new ScopeState();
  const session: object = engine;
  const db = new Kysely<Database>({
    dialect: withRequestTransactions(
      new PGliteDialect({
        pglite: engine as PGlite,
        onCreateConnection: async (connection) => {
          guardAgainstWedge(connection, storage, lowSpace);
          // With tracing on, each statement is a span, as pg's instrumentation makes on PostgreSQL.
          if (activeTracing()) traceStatements(connection);
          // On this thread only: a worker's statements never hold the HTTP side.
          if (!inThread) await yieldBetweenStatements(connection);
        },
      }),
      (connection) => scopes.sync(session, (text, parameters) => connection.executeQuery(CompiledQuery.raw(text, parameters))),
    ),
    log: observed(scopes),
  });
  const thread = engine instanceof PGliteThread ? engine : undefined;
  // The pages' bodies built on this thread from the copies' answers (decision 0046) die once sent:
  // collected early like the database thread's buffers, with the same slack (decision 0043).
  const bodies = thread ? bufferCollector(options.workerBufferSlackMb ?? DEFAULT_PGLITE_WORKER_BUFFER_SLACK_MB) : undefined;
  return {
    db,
    backend: 'pglite',
    storage,
    dataDir: diskDir,
    scopes,
    templateDemo,
    ...(thread
      ? {
          threadStats: () => thread.stats(),
          activity: () => thread.activity(),
          // The copy is sent in a turn of the connection, taken as any statement's (a request
          // transaction's own connection inside one; a step's inside runGivingWay), and the turn
          // ends once it is sent, not answered: the thread runs what it is sent in order, so the
          // next statement waits in the thread, not for this one's answer to cross back and be
          // read (the thread idled a third of the time under the list load when the turn lasted
          // until then). The output may lie in the area the thread shares with this one: `read`
          // runs before it is released.
          readRows: async (query, read) => {
            void statementObserverOf()?.(query.sql, query.parameters, scopes.wanted(), readsByIndex());
            const params = textParameters(query.parameters);
            const { answer } = await db.connection().execute(async () => {
              if (storage.fatal !== undefined) throw new StoreFailedError(storage.fatal);
              return { answer: thread.rowsRaw(query.sql, params) };
            });
            const raw = await answer;
            try {
              return read(rowsOfMessages(raw.bytes), raw.owned);
            } finally {
              raw.release();
              bodies?.check();
            }
          },
        }
      : {}),
    poolStats: () => {
      const busy = engine instanceof PGliteThread ? engine.inFlight : 0;
      return { total: 1, idle: busy > 0 ? 0 : 1, waiting: Math.max(0, busy - 1) };
    },
    close: async () => {
      stopWatchdog();
      if (storage.fatal === undefined) {
        await db.destroy();
        if (!engine.closed) await engine.close();
      } else if (engine instanceof PGliteThread) {
        // A wedged PGlite spins for ever in close(): its thread is stopped instead.
        await engine.terminate();
      }
      // (On this thread, a wedged instance is left to the process exit.)
      lock?.release();
    },
  };
}

/**
 * V8's young generation of the embedded database's thread, in MiB: the rows of one statement pass
 * through it on their way to the HTTP thread, so a small one keeps the resident size down
 * (decision 0030) at the cost of a few more scavenges; 8 (was 16) saved ~8 MiB for the same list
 * throughput (decision 0043).
 */
export const DEFAULT_PGLITE_WORKER_YOUNG_GENERATION_MB = 8;

/**
 * How many MiB of ArrayBuffers the embedded database's thread may hold above its last collection
 * before it asks V8 for a young-generation collection (db/pglite-worker.ts `bufferCollector`):
 * PGlite's copies of each statement's output die at once, and without it 30–40 MiB of them and a
 * malloc arena as large stayed resident under the list load (decision 0043).
 */
export const DEFAULT_PGLITE_WORKER_BUFFER_SLACK_MB = 8;

/**
 * PostgreSQL's page cache inside PGlite. It lives in PGlite's WebAssembly memory, which never gives
 * pages back: the stock 128 MB, once the working set has passed through it (a 100k-product list
 * load does), is 128 MB of resident memory for the life of the process. Pages that do not fit are
 * read from the data directory's files, which the operating system caches outside the process
 * (not counted in its RSS, shared, and given back under pressure), so a small pool costs a copy per
 * page read rather than disk I/O. 16 MB kept the list throughput (docs/decisions/0018); 8 MB, ~8 MiB
 * less resident, kept it too (docs/decisions/0043).
 */
export const DEFAULT_PGLITE_SHARED_BUFFERS_MB = 8;

/**
 * Our start parameters of PGlite, which the database's thread appends to PGlite's own (startParams
 * replaces its defaults, so they are kept; PGlite itself is loaded in that thread only, decision 0048).
 * `wal_init_zero=off`: a new 16 MB WAL segment is made by writing its last byte instead of 16 MB of
 * zeros, which PGlite's file layer passed through a 16 MiB buffer of native memory: during the
 * 100,000-row import the database thread's malloc arena grew by 13.6–16 MiB at a segment switch
 * and kept it (decision 0043, session 11). PostgreSQL documents the setting for file systems where
 * preallocation buys nothing; the price is that a full disk is met at a WAL write instead of at the
 * segment's creation, both stopping the embedded database, which the disk guard refuses writes
 * well before (DATA_DIR_MIN_FREE_MB).
 */
export function pgliteStartParams(sharedBuffersMb = DEFAULT_PGLITE_SHARED_BUFFERS_MB): string[] {
  return ['-c', `shared_buffers=${sharedBuffersMb}MB`, '-c', 'wal_init_zero=off'];
}

/** Longest the embedded database keeps the thread across consecutive statements before it yields. */
const YIELD_AFTER_MS = 20;

/**
 * PGlite runs PostgreSQL as WebAssembly on this thread: while a statement runs, nothing else does,
 * and consecutive statements of one transaction follow each other as microtasks, so a long
 * transaction (a 100k-row import) would starve the HTTP side — even /healthz — until it commits.
 * Once statements have held the thread for YIELD_AFTER_MS since the last turn, we let the event loop
 * turn (setImmediate) before going on, so requests are read and answered between the statements of
 * a long transaction, while short ones still run back to back. Other queries still wait for the
 * single connection (Kysely serialises it), so a transaction stays all-or-nothing and isolated;
 * bulk writers keep their statements bounded (shared/chunks.ts) to keep the pauses short.
 */
function yieldBetweenStatements(connection: DatabaseConnection): Promise<void> {
  const execute = connection.executeQuery.bind(connection);
  // `turned` becomes true once the event loop has turned since `heldSince` was set: statements
  // issued after a turn start a new stretch of holding the thread.
  let turned = true;
  let heldSince = 0;
  const noteTurn = () => {
    turned = true;
  };
  connection.executeQuery = async (query) => {
    if (turned) {
      turned = false;
      heldSince = performance.now();
      setImmediate(noteTurn);
    }
    try {
      return await execute(query);
    } finally {
      // Scheduled after noteTurn, so the next statement starts a new stretch.
      if (!turned && performance.now() - heldSince >= YIELD_AFTER_MS) await new Promise<void>((resume) => setImmediate(resume));
    }
  };
  return Promise.resolve();
}

/**
 * With tracing on (decision 0052): each statement of the embedded database is a client span of the
 * trace it runs in, described as PostgreSQL's statements are (ops/tracing-sdk.ts): `db.system.name`
 * and `db.system` postgresql, `db.query.text` and `db.statement` the SQL text, never its parameters.
 * Only inside a span, as pg's instrumentation is configured (`requireParentSpan`).
 */
function traceStatements(connection: DatabaseConnection): void {
  const execute = connection.executeQuery.bind(connection);
  connection.executeQuery = (query) => {
    if (!trace.getActiveSpan()) return execute(query);
    const operation = /^\s*([A-Za-z]+)/.exec(query.sql)?.[1]?.toUpperCase() ?? 'query';
    return inSpan(
      `pglite.${operation}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'db.system.name': 'postgresql',
          'db.query.text': query.sql,
          'db.operation.name': operation,
          'db.namespace': 'pglite',
          'db.system': 'postgresql',
          'db.statement': query.sql,
        },
      },
      () => execute(query),
    );
  };
}

/**
 * After PGlite fails to write its WAL for want of space, the next statement it runs never returns
 * (it spins a core and the process stops answering, SIGTERM included). So the first such failure
 * marks the store failed (db/storage-health.ts) and no statement reaches PGlite again; every other
 * out-of-space error is recorded for /readyz.
 */
function guardAgainstWedge(connection: DatabaseConnection, storage: StorageHealth, lowSpace: () => string | undefined): void {
  const execute = connection.executeQuery.bind(connection);
  connection.executeQuery = async (query) => {
    if (storage.fatal !== undefined) throw new StoreFailedError(storage.fatal);
    // Writes stop before the disk is full (a full disk can wedge PGlite); reads and transaction
    // control go on. Checked per statement: a statfs costs microseconds.
    if (isWrite(query.sql)) {
      const reason = lowSpace();
      if (reason) {
        const error = Object.assign(new Error(reason), { code: DISK_FULL_SQLSTATE });
        storage.noteOutOfSpace(error);
        throw error;
      }
    }
    try {
      return await execute(query);
    } catch (error) {
      if (isOutOfSpace(error)) {
        storage.noteOutOfSpace(error);
        if (isWalWriteFailure(error)) {
          storage.markFatal(
            `The embedded database could not write its log: ${(error as Error).message}. It cannot recover in this process; free disk space and restart it.`,
          );
        }
      }
      throw error;
    }
  };
}

/** Statements refused on a low disk: data and schema changes (reads and transaction control go on). */
const WRITE_STATEMENT = /^\s*(insert|update|delete|merge|copy|create|alter|drop|truncate|vacuum|reindex|cluster|refresh)\b/i;
function isWrite(text: string): boolean {
  return WRITE_STATEMENT.test(text) || (/^\s*with\b/i.test(text) && /\b(insert|update|delete)\b/i.test(text));
}

/** Type parsers shared by both back ends (exported for PGlite instances made by tests). */
export { typeParsers };
