/**
 * Once per test run: a migrated template of each database back end, so every test file starts from
 * a fresh, current schema in well under a second (graphile-worker's "database per test file from a
 * template" habit).
 *  - PGlite: a migrated instance dumped to a tarball; files load it with `loadDataDir`.
 *  - PostgreSQL (when TEST_DATABASE_URL is set): a template database; files CREATE DATABASE … TEMPLATE.
 */
import { PGlite } from '@electric-sql/pglite';
import { writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/schema/migrate.ts';

export default async function setup({ provide }: { provide: (key: string, value: unknown) => void }) {
  const runId = `${process.pid}_${Date.now()}`;
  const tarball = join(tmpdir(), `store-api-template-${runId}.tgz`);
  const pglite = await PGlite.create();
  const handle = await openDatabase({ pglite });
  await migrateToLatest(handle.db);
  const dump = await pglite.dumpDataDir('gzip');
  writeFileSync(tarball, Buffer.from(await dump.arrayBuffer()));
  await handle.close();
  provide('pgliteTemplate', tarball);

  let templateDb: string | undefined;
  const url = process.env.TEST_DATABASE_URL;
  if (url) {
    templateDb = `store_api_template_${runId}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${templateDb}`);
    await admin.end();
    const target = new URL(url);
    target.pathname = `/${templateDb}`;
    const tpl = await openDatabase({ databaseUrl: target.toString(), poolSize: 2 });
    await migrateToLatest(tpl.db);
    await tpl.close();
    provide('postgresTemplate', templateDb);
  } else {
    provide('postgresTemplate', '');
  }

  return async () => {
    rmSync(tarball, { force: true });
    if (url && templateDb) {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      const { rows } = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE 'store_api_test_${runId.split('_')[0]}%' OR datname = $1`, [
        templateDb,
      ]);
      for (const row of rows) await admin.query(`DROP DATABASE IF EXISTS ${row.datname} WITH (FORCE)`);
      await admin.end();
    }
  };
}
