/**
 * `npm start` seeds a demo store into an empty deployment of one store; a deployment of several
 * stores is a platform's and is never seeded (decision 0051). Its start once failed here: the
 * emptiness check saw no store's rows and the seed's insert was refused by row-level security.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { pino } from 'pino';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { loadConfig } from '../../src/config/config.ts';
import { seedDemoStoreIfEmpty } from '../../src/demo/demo-seed.ts';
import { createStore, useDefaultStoreScope } from '../../src/stores/store.service.ts';
import { asPlatform } from '../../src/db/store-scope.ts';

describe.each(backends)('demo seed with several stores (%s)', (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(async () => database?.close());

  it('seeds nothing and starts when the deployment has several stores', async () => {
    await createStore(database.db, { name: 'Second shop' });
    await useDefaultStoreScope(database);
    expect(database.scopes.default).toEqual({ kind: 'none' });
    const ctx = { config: loadConfig({ LOG_LEVEL: 'silent' }), database, logger: pino({ level: 'silent' }) };
    expect(await seedDemoStoreIfEmpty(ctx, { products: 5, progress: false })).toBeUndefined();
    const { rows } = await asPlatform(() => sql<{ n: number }>`SELECT count(*)::int AS n FROM products`.execute(database.db));
    expect(rows[0]!.n).toBe(0);
  });
});
