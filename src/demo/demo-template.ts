/**
 * The demo store's template: the migrated template (schema/migrated-template.ts) with the default demo
 * store already generated in it, built by `npm run build` so that `npm start` on an empty directory
 * only copies, opens and creates the demo token (decision 0006). Seeding 300 products was most of
 * what was left of a first start (3.8 s on the quiet two-core machine against a 3 s target).
 * Used only when the demo store asked for is the default one (SEED_DEMO on, SEED_DEMO_PRODUCTS at
 * its default); anything else seeds at start as before.
 */
import type { PGlite } from '@electric-sql/pglite';
import { openDatabase, typeParsers } from '../db/database.ts';
import { writeTemplate } from '../db/pglite-template.ts';
import { migrateToLatest, migrationNames } from '../schema/migrate.ts';
import { generateDemoStore } from './demo-store.ts';

/** The store's size in the demo template: the default of SEED_DEMO_PRODUCTS. */
export const DEMO_TEMPLATE_PRODUCTS = 300;

/** Builds the demo template in `templateDir` from the migrated (empty) template `fromTemplate`. */
export async function writeDemoTemplate(templateDir: string, fromTemplate: string): Promise<void> {
  await writeTemplate(
    templateDir,
    fromTemplate,
    migrationNames(),
    async (pglite: PGlite) => {
      const database = await openDatabase({ pglite });
      await migrateToLatest(database.db);
      return generateDemoStore(database.db, { products: DEMO_TEMPLATE_PRODUCTS });
    },
    typeParsers,
  );
}
