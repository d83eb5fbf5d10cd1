/**
 * The migrated PGlite template `npm run build` makes (schema/migrated-template.ts, copied by
 * db/pglite-template.ts): an empty data directory starts from it, already migrated; a data directory
 * that has data is never touched; a template this code cannot use (another PGlite, a migration it
 * does not know, a build that did not finish) is passed over for initdb. The migrations known are
 * the caller's (decision 0041). PGlite only: PostgreSQL has no data directory of ours.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest, migrationNames, pendingMigrations } from '../../src/schema/migrate.ts';
import { templateUnusable } from '../../src/db/pglite-template.ts';
import { writePgliteTemplate } from '../../src/schema/migrated-template.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { DEMO_TEMPLATE_PRODUCTS, writeDemoTemplate } from '../../src/demo/demo-template.ts';
import { seedDemoStoreIfEmpty } from '../../src/demo/demo-seed.ts';
import { loadConfig } from '../../src/config/config.ts';
import { openContext } from '../../src/main/runtime.ts';
import { pino } from 'pino';

describe('the PGlite template of a first start', () => {
  let root: string;
  let template: string;
  const knownMigrations = migrationNames();

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'store-api-template-'));
    template = join(root, 'template');
    await writePgliteTemplate(template);
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const tokenNames = async (dataDir: string) => {
    const database = await openDatabase({ dataDir, template: false });
    try {
      return (await database.db.selectFrom('api_tokens').select('name').execute()).map((r) => r.name);
    } finally {
      await database.close();
    }
  };

  it('gives an empty data directory a migrated database that keeps what is written, and stays unchanged itself', async () => {
    const dataDir = join(root, 'fresh');
    // What a start killed while copying leaves: a half copy beside the data directory.
    mkdirSync(join(dataDir, 'pglite.partial-999999', 'base'), { recursive: true });
    const database = await openDatabase({ dataDir, template, knownMigrations });
    expect(readdirSync(dataDir).filter((name) => name.startsWith('pglite'))).toEqual(['pglite']);
    try {
      expect(await pendingMigrations(database.db)).toEqual([]);
      await migrateToLatest(database.db); // what every start runs: nothing left to do
      await createToken(database.db, { name: 'written after the copy' });
    } finally {
      await database.close();
    }
    expect(await tokenNames(dataDir)).toEqual(['written after the copy']);

    const second = join(root, 'second');
    const other = await openDatabase({ dataDir: second, template, knownMigrations });
    try {
      expect(await pendingMigrations(other.db)).toEqual([]);
      expect(await other.db.selectFrom('api_tokens').select('name').execute()).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('never replaces a data directory that has data', async () => {
    const dataDir = join(root, 'existing');
    const first = await openDatabase({ dataDir, template, knownMigrations });
    try {
      await createToken(first.db, { name: 'kept' });
    } finally {
      await first.close();
    }
    const again = await openDatabase({ dataDir, template, knownMigrations });
    await again.close();
    expect(await tokenNames(dataDir)).toEqual(['kept']);
  });

  it('passes over a template of another PGlite, with an unknown migration or unfinished, for initdb', async () => {
    const stamp = JSON.parse(readFileSync(join(template, 'stamp.json'), 'utf8')) as { pglite: string; migrations: string[] };
    const variant = (name: string, write: ((file: string) => void) | undefined) => {
      const dir = join(root, name);
      cpSync(template, dir, { recursive: true });
      if (write) write(join(dir, 'stamp.json'));
      else rmSync(join(dir, 'stamp.json'));
      return dir;
    };
    const otherPglite = variant('other-pglite', (file) => writeFileSync(file, JSON.stringify({ ...stamp, pglite: '0.0.1' })));
    const future = variant('future', (file) => writeFileSync(file, JSON.stringify({ ...stamp, migrations: [...stamp.migrations, '9999-future'] })));
    const unfinished = variant('unfinished', undefined);
    expect(templateUnusable(template, knownMigrations)).toBeUndefined();
    expect(templateUnusable(otherPglite, knownMigrations)).toMatch(/PGlite 0\.0\.1/);
    expect(templateUnusable(future, knownMigrations)).toMatch(/9999-future/);
    expect(templateUnusable(unfinished, knownMigrations)).toMatch(/no finished template/);

    const database = await openDatabase({ dataDir: join(root, 'fallback'), template: otherPglite, knownMigrations });
    try {
      expect(await pendingMigrations(database.db)).toEqual(migrationNames());
    } finally {
      await database.close();
    }
  }, 180_000);

  it('the caller says which migrations it knows: a template with another one is passed over, one it knows is copied', async () => {
    const stamp = JSON.parse(readFileSync(join(template, 'stamp.json'), 'utf8')) as { pglite: string; migrations: string[] };
    // A later build's template, told apart from the empty one by its stamp's `demo` (shown as templateDemo).
    const later = join(root, 'later-build');
    cpSync(template, later, { recursive: true });
    const marker = { products: 1, customers: 2, orders: 3 };
    writeFileSync(join(later, 'stamp.json'), JSON.stringify({ ...stamp, migrations: [...stamp.migrations, '9999-later'], demo: marker }));

    const today = await openDatabase({ dataDir: join(root, 'known-today'), template: [later, template], knownMigrations });
    try {
      expect(today.templateDemo).toBeUndefined(); // the empty template, not the later build's
      expect(await pendingMigrations(today.db)).toEqual([]);
    } finally {
      await today.close();
    }
    const knowing = await openDatabase({
      dataDir: join(root, 'known-later'),
      template: [later, template],
      knownMigrations: [...knownMigrations, '9999-later'],
    });
    try {
      expect(knowing.templateDemo).toEqual(marker);
    } finally {
      await knowing.close();
    }
  });

  it('a start (main/runtime.ts) copies a template of the migrations it has into an empty data directory', async () => {
    const stamp = JSON.parse(readFileSync(join(template, 'stamp.json'), 'utf8')) as { pglite: string; migrations: string[] };
    const marked = join(root, 'marked');
    cpSync(template, marked, { recursive: true });
    const marker = { products: 4, customers: 5, orders: 6 }; // tells the copy from an initdb
    writeFileSync(join(marked, 'stamp.json'), JSON.stringify({ ...stamp, demo: marker }));
    const config = loadConfig({ DATA_DIR: join(root, 'runtime-start') });
    const ctx = await openContext(config, pino({ level: 'silent' }), { template: [marked] });
    try {
      expect(ctx.database.templateDemo).toEqual(marker);
    } finally {
      await ctx.database.close();
    }
  });

  it('a template holding the default demo store gives a first start its store, and only the token is made at start', async () => {
    const demo = join(root, 'demo-template');
    await writeDemoTemplate(demo, template);
    expect(templateUnusable(demo, knownMigrations)).toBeUndefined();
    const dataDir = join(root, 'demo-start');
    const database = await openDatabase({ dataDir, template: [demo, template], knownMigrations });
    try {
      expect(database.templateDemo).toEqual({ products: DEMO_TEMPLATE_PRODUCTS, customers: expect.any(Number), orders: expect.any(Number) });
      const count = async (table: 'products' | 'orders' | 'customers') =>
        Number(
          (
            await database.db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      expect(await count('products')).toBe(DEMO_TEMPLATE_PRODUCTS);
      expect(await count('orders')).toBe(database.templateDemo!.orders);
      expect(await count('customers')).toBe(database.templateDemo!.customers);
      // What `store-api all` does next: the demo token, no second store.
      const ctx = { database } as unknown as Parameters<typeof seedDemoStoreIfEmpty>[0];
      const seeded = await seedDemoStoreIfEmpty(ctx, { products: DEMO_TEMPLATE_PRODUCTS, progress: false });
      expect(seeded).toMatchObject({ products: DEMO_TEMPLATE_PRODUCTS, token: expect.stringMatching(/^sia_/) });
      expect(await count('products')).toBe(DEMO_TEMPLATE_PRODUCTS);
    } finally {
      await database.close();
    }
    // A restart of that directory copies nothing: the store it has is not a fresh demo.
    const again = await openDatabase({ dataDir, template: [demo, template], knownMigrations });
    try {
      expect(again.templateDemo).toBeUndefined();
    } finally {
      await again.close();
    }
    // An unusable demo template falls back to the empty one.
    rmSync(join(demo, 'stamp.json'));
    const fallback = await openDatabase({ dataDir: join(root, 'demo-fallback'), template: [demo, template], knownMigrations });
    try {
      expect(fallback.templateDemo).toBeUndefined();
      expect(await pendingMigrations(fallback.db)).toEqual([]);
      expect(await fallback.db.selectFrom('products').select('id').execute()).toEqual([]);
    } finally {
      await fallback.close();
    }
  }, 180_000);
});
