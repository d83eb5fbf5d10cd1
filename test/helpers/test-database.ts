/**
 * Databases for tests. Every test that touches the database runs against each back end in
 * `backends`: PGlite always, PostgreSQL when TEST_DATABASE_URL is set. Each call gives a fresh,
 * migrated database cloned from the run's template (see global-setup.ts).
 */
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { sql, type Kysely } from 'kysely';
import { inject } from 'vitest';
import { openDatabase, type Backend, type DatabaseHandle } from '../../src/db/database.ts';
import type { Database } from '../../src/db/schema.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgliteTemplate: string;
    postgresTemplate: string;
  }
}

/**
 * The back ends this run tests against: PGlite, and PostgreSQL when TEST_DATABASE_URL is set.
 * TEST_BACKENDS (a comma-separated list of `pglite`, `postgres`) runs the tests written for every
 * back end on those only; the tests that open PostgreSQL databases of their own from
 * TEST_DATABASE_URL still run when it is set. CI's Node 22 leg runs with `pglite` (docs/decisions/0073).
 */
export const backends: Backend[] = backendsOf(process.env);

/** `backends` for an environment; a wrong TEST_BACKENDS stops the run naming what is wrong. */
export function backendsOf(env: NodeJS.ProcessEnv): Backend[] {
  const available: Backend[] = env.TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];
  const asked = env.TEST_BACKENDS?.trim();
  if (!asked) return available;
  const names = asked.split(',').map((name) => name.trim());
  for (const name of names) {
    if (name !== 'pglite' && name !== 'postgres')
      throw new Error(`TEST_BACKENDS=${JSON.stringify(asked)}: unknown back end ${JSON.stringify(name)} (pglite, postgres)`);
    if (!available.includes(name)) throw new Error(`TEST_BACKENDS=${JSON.stringify(asked)}: ${name} needs TEST_DATABASE_URL`);
  }
  return available.filter((backend) => names.includes(backend));
}

export interface TestDatabase extends DatabaseHandle {
  /** PostgreSQL connection string of this database (postgres back end only). */
  readonly url?: string;
}

/** A fresh migrated database of `backend`. Close it in afterAll. */
export async function openTestDatabase(backend: Backend, { poolSize = 5 } = {}): Promise<TestDatabase> {
  if (backend === 'pglite') {
    // In its own worker thread with the embedded default's settings (shared_buffers), so tests run
    // what production runs.
    return openDatabase({ archive: readFileSync(inject('pgliteTemplate')) });
  }
  const base = process.env.TEST_DATABASE_URL!;
  const name = `store_api_test_${process.ppid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${inject('postgresTemplate')}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  const handle = await openDatabase({ databaseUrl: url.toString(), poolSize });
  return {
    ...handle,
    url: url.toString(),
    close: async () => {
      await handle.close();
      const dropper = new pg.Client({ connectionString: base });
      await dropper.connect();
      await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      await dropper.end();
    },
  };
}

/**
 * An empty PostgreSQL database (no migration run) on TEST_DATABASE_URL's server: its URL, and how
 * to drop it (tests of what a fresh or an old database does).
 */
export async function emptyPostgresDatabase(label = 'empty'): Promise<{ url: string; drop: () => Promise<void> }> {
  const base = process.env.TEST_DATABASE_URL!;
  const name = `store_api_test_${process.ppid}_${label}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const dropper = new pg.Client({ connectionString: base });
      await dropper.connect();
      await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      await dropper.end();
    },
  };
}

/**
 * After tests that terminated PostgreSQL connections under the pool: the pool may still hold dead
 * ones, and each failing query drops one, so a few queries leave it healthy before it is closed.
 */
export async function drainDeadConnections(db: Kysely<Database>, poolSize = 5): Promise<void> {
  for (let attempt = 0; attempt <= poolSize; attempt++) {
    const ok = await sql`SELECT 1`.execute(db).then(
      () => true,
      () => false,
    );
    if (ok) return;
  }
}
