/**
 * The migrated PGlite template `npm run build` writes to dist/pglite-template/ (bin/build.js): an
 * initdb'd data directory with every migration applied, stamped with their names, which the first
 * start of the embedded default copies instead of running initdb (db/pglite-template.ts, decision
 * 0006). Here rather than in db/ because it runs the migrations (decision 0041).
 */
import { Kysely, PGliteDialect } from 'kysely';
import { writeTemplate } from '../db/pglite-template.ts';
import { migrateToLatest, migrationNames } from './migrate.ts';

/** Builds a migrated template in `templateDir` (replacing what was there); the stamp is written last. */
export async function writePgliteTemplate(templateDir: string): Promise<void> {
  await writeTemplate(templateDir, undefined, migrationNames(), async (pglite) => {
    const db = new Kysely<unknown>({ dialect: new PGliteDialect({ pglite }) });
    try {
      await migrateToLatest(db);
      await pglite.exec('CHECKPOINT');
    } finally {
      await db.destroy(); // closes the PGlite too
    }
    return undefined;
  });
}
