/**
 * The migrated PGlite template `npm run build` makes (db/pglite-template.ts): an empty data
 * directory starts from it, already migrated; a data directory that has data is never touched; a
 * template this code cannot use (another PGlite, a migration it does not know, a build that did not
 * finish) is passed over for initdb. PGlite only: PostgreSQL has no data directory of ours.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest, migrationNames, pendingMigrations } from '../../src/db/migrate.ts';
import { templateUnusable, writePgliteTemplate } from '../../src/db/pglite-template.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { DEMO_TEMPLATE_PRODUCTS, writeDemoTemplate } from '../../src/demo/demo-template.ts';
import { seedDemoStoreIfEmpty } from '../../src/demo/demo-seed.ts';

describe('the PGlite template of a first start', () => {
  let root: string;
  let template: string;

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
    const database = await openDatabase({ dataDir, template });
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
    const other = await openDatabase({ dataDir: second, template });
    try {
      expect(await pendingMigrations(other.db)).toEqual([]);
      expect(await other.db.selectFrom('api_tokens').select('name').execute()).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('never replaces a data directory that has data', async () => {
    const dataDir = join(root, 'existing');
    const first = await openDatabase({ dataDir, template });
    try {
      await createToken(first.db, { name: 'kept' });
    } finally {
      await first.close();
    }
    const again = await openDatabase({ dataDir, template });
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
    expect(templateUnusable(template)).toBeUndefined();
    expect(templateUnusable(otherPglite)).toMatch(/PGlite 0\.0\.1/);
    expect(templateUnusable(future)).toMatch(/9999-future/);
    expect(templateUnusable(unfinished)).toMatch(/no finished template/);

    const database = await openDatabase({ dataDir: join(root, 'fallback'), template: otherPglite });
    try {
      expect(await pendingMigrations(database.db)).toEqual(migrationNames());
    } finally {
      await database.close();
    }
  }, 180_000);

  it('a template holding the default demo store gives a first start its store, and only the token is made at start', async () => {
    const demo = join(root, 'demo-template');
    await writeDemoTemplate(demo, template);
    expect(templateUnusable(demo)).toBeUndefined();
    const dataDir = join(root, 'demo-start');
    const database = await openDatabase({ dataDir, template: [demo, template] });
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
    const again = await openDatabase({ dataDir, template: [demo, template] });
    try {
      expect(again.templateDemo).toBeUndefined();
    } finally {
      await again.close();
    }
    // An unusable demo template falls back to the empty one.
    rmSync(join(demo, 'stamp.json'));
    const fallback = await openDatabase({ dataDir: join(root, 'demo-fallback'), template: [demo, template] });
    try {
      expect(fallback.templateDemo).toBeUndefined();
      expect(await pendingMigrations(fallback.db)).toEqual([]);
      expect(await fallback.db.selectFrom('products').select('id').execute()).toEqual([]);
    } finally {
      await fallback.close();
    }
  }, 180_000);
});
