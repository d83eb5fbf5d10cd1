/**
 * The mirror database: PostgreSQL (`--database postgres://…`) or an embedded PGlite directory
 * (`--data-dir ./mirror`), both through Kysely, so every command runs one code path. Tables live in
 * the schema `store_mirror`, so a mirror can share a database with an ERP's own tables.
 */
import { Kysely, PGliteDialect, PostgresDialect } from 'kysely';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { migrateMirror } from './mirror-migrations.ts';

export interface MirrorOptions {
  /** PostgreSQL connection string; wins over dataDir. */
  databaseUrl?: string;
  /** Embedded PGlite data directory; neither given: an in-memory PGlite (tests). */
  dataDir?: string;
}

export interface MirrorDatabase {
  // The mirror's tables are generated from SYNC_RESOURCES, so queries use raw SQL through `db`.
  readonly db: Kysely<unknown>;
  readonly backend: 'pglite' | 'postgres';
  /** PostgreSQL only: the pool under `db`, for what Kysely cannot send (COPY … FROM STDIN, see mirror.repository.ts). */
  readonly pool?: pg.Pool;
  close(): Promise<void>;
}

const identity = (value: string) => value;
// Timestamps as text (a JS Date drops microseconds, and last_modified is compared to the microsecond).
const parsers: Record<number, (value: string) => unknown> = { 1114: identity, 1184: identity, 20: Number };

/** Opens (and migrates) the mirror described by `options`. */
export async function openMirror(options: MirrorOptions): Promise<MirrorDatabase> {
  const mirror = options.databaseUrl ? openPostgres(options.databaseUrl) : await openPglite(options.dataDir);
  try {
    await migrateMirror(mirror.db);
  } catch (error) {
    await mirror.close();
    throw error;
  }
  return mirror;
}

function openPostgres(url: string): MirrorDatabase {
  const pool = new pg.Pool({
    connectionString: url,
    max: 4,
    application_name: 'store-api-sync',
    options: '-c TimeZone=UTC',
    types: {
      getTypeParser: ((oid: number, format?: string) => parsers[oid] ?? pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  pool.on('error', () => {});
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  return { db, backend: 'postgres', pool, close: () => db.destroy() };
}

async function openPglite(dataDir: string | undefined): Promise<MirrorDatabase> {
  let release = () => {};
  let pglite: PGlite;
  if (dataDir) {
    const dir = resolve(dataDir);
    mkdirSync(dir, { recursive: true });
    release = lockDirectory(dir);
    try {
      pglite = await PGlite.create({ dataDir: join(dir, 'pglite'), parsers });
    } catch (error) {
      release();
      throw error;
    }
  } else {
    pglite = await PGlite.create({ parsers });
  }
  await pglite.exec(`SET TimeZone = 'UTC'`);
  const db = new Kysely<unknown>({ dialect: new PGliteDialect({ pglite }) });
  return {
    db,
    backend: 'pglite',
    close: async () => {
      await db.destroy();
      if (!pglite.closed) await pglite.close();
      release();
    },
  };
}

/**
 * PGlite takes no lock of its own and two processes on one directory corrupt it, so the directory
 * gets a lock file with our pid; a stale one (its process is gone) is taken over.
 */
function lockDirectory(dir: string): () => void {
  const file = join(dir, 'store-api-sync.lock');
  for (let tries = 0; tries < 2; tries++) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(file, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const pid = Number(readFileSync(file, 'utf8'));
      if (pid && pid !== process.pid && isAlive(pid)) {
        throw new Error(`mirror directory ${dir} is in use by process ${pid}; stop it or use another --data-dir`);
      }
      rmSync(file, { force: true });
    }
  }
  throw new Error(`could not lock mirror directory ${dir}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs `fn` in one transaction of the mirror. */
export function inTransaction<T>(mirror: MirrorDatabase, fn: (trx: Kysely<unknown>) => Promise<T>): Promise<T> {
  return mirror.db.transaction().execute(fn);
}
