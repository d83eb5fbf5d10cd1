/**
 * Opens the system of record: PGlite in a data directory (embedded default) or a PostgreSQL server
 * (DATABASE_URL). Both get the same type parsers so rows look alike whatever the back end:
 * int8 → number, numeric → number, timestamps/dates/intervals → their text (never a JS Date, which
 * would drop microseconds and break cursors).
 */
import { Kysely, PGliteDialect, PostgresDialect } from 'kysely';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Database } from './schema.ts';
import { acquireDataDirLock, type DataDirLock } from './data-dir-lock.ts';

export type Backend = 'pglite' | 'postgres';

export interface DatabaseHandle {
  readonly db: Kysely<Database>;
  readonly backend: Backend;
  /** Connections in use / total, for metrics (PGlite: one connection). */
  poolStats(): { total: number; idle: number; waiting: number };
  close(): Promise<void>;
}

const OID = { int8: 20, numeric: 1700, timestamp: 1114, timestamptz: 1184, date: 1082, interval: 1186 } as const;
const identity = (value: string) => value;
const toNumber = (value: string) => Number(value);
const parsers: Record<number, (value: string) => unknown> = {
  [OID.int8]: toNumber,
  [OID.numeric]: toNumber,
  [OID.timestamp]: identity,
  [OID.timestamptz]: identity,
  [OID.date]: identity,
  [OID.interval]: identity,
};

export interface OpenDatabaseOptions {
  databaseUrl?: string;
  /** Embedded data directory; `undefined` with no databaseUrl means an in-memory PGlite (tests). */
  dataDir?: string;
  poolSize?: number;
  /** Clone source for tests: an already migrated PGlite instance. */
  pglite?: PGlite;
  applicationName?: string;
}

/** Opens the database described by the options. Never runs migrations (see migrate.ts). */
export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options.poolSize ?? 10, options.applicationName);
  return openPglite(options);
}

function openPostgres(url: string, max: number, applicationName = 'store-api'): DatabaseHandle {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    application_name: applicationName,
    // Session time zone UTC so that any timestamp text we read back is in UTC.
    options: '-c TimeZone=UTC',
    types: { getTypeParser: ((oid: number, format?: string) => parsers[oid] ?? pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser },
  });
  // An idle client's error (server restart) must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    backend: 'postgres',
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    close: () => db.destroy(),
  };
}

async function openPglite(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  let lock: DataDirLock | undefined;
  let pglite: PGlite;
  if (options.pglite) {
    pglite = options.pglite;
  } else if (options.dataDir) {
    const dir = resolve(options.dataDir);
    mkdirSync(dir, { recursive: true });
    // PGlite takes no lock of its own: two processes on one directory lose rows. Refuse the second.
    lock = acquireDataDirLock(dir);
    try {
      pglite = await PGlite.create({ dataDir: join(dir, 'pglite'), parsers });
    } catch (error) {
      lock.release();
      throw error;
    }
  } else {
    pglite = await PGlite.create({ parsers });
  }
  await pglite.exec(`SET TimeZone = 'UTC'`);
  const db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) });
  return {
    db,
    backend: 'pglite',
    poolStats: () => ({ total: 1, idle: 1, waiting: 0 }),
    close: async () => {
      await db.destroy();
      if (!pglite.closed) await pglite.close();
      lock?.release();
    },
  };
}

/** Type parsers shared by both back ends (exported for PGlite instances made by tests). */
export const typeParsers = parsers;
