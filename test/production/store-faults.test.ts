/**
 * Faults of the store an operator meets (points 1 and 4), on both back ends where they apply:
 *  - a full disk: a write that meets SQLSTATE 53100 is answered 507 problem+json naming the cause,
 *    /readyz then reports that the store cannot write, and writes resume as soon as the disk takes
 *    them again. The out-of-space error is raised by a trigger (RAISE … USING ERRCODE '53100'), the
 *    same error a full volume gives; the real full disk (a small tmpfs) is the fault suite's
 *    (bench/faults.ts, `npm run faults`);
 *  - the embedded database's write-ahead log failing to write: PGlite is never asked anything again
 *    (its next statement would spin for ever), requests get 503 at once and the fatal listener fires
 *    (the server exits 75 on it, see cli/server.command.ts);
 *  - connections PostgreSQL refuses while they are being opened (55000 "not currently accepting
 *    connections", 3D000 no such database) answer 503 + Retry-After, never 500.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { isOutOfSpace, isWalWriteFailure, OUT_OF_SPACE_HOLD_MS, StorageHealth } from '../../src/db/storage-health.ts';
import { isDatabaseUnavailable, markConnectFailure } from '../../src/shared/db-errors.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import { backends } from '../helpers/test-database.ts';
import { assertContractKept, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { attachContractCheck } from '../helpers/contract-check.ts';

const DATABASE_URL = process.env.TEST_DATABASE_URL;

/** Makes every UPDATE of products fail as a full disk does, with `message`. */
async function failProductWrites(t: TestApp, message: string): Promise<void> {
  await sql
    .raw(`CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION '${message.replace(/'/g, "''")}' USING ERRCODE = '53100'; END $$`)
    .execute(t.database.db);
  await sql`CREATE TRIGGER disk_full BEFORE UPDATE ON products FOR EACH ROW EXECUTE FUNCTION disk_full()`.execute(t.database.db);
}

describe('what counts as out of space', () => {
  it('SQLSTATE 53100, ENOSPC and the file-system message; WAL failures told apart', () => {
    expect(isOutOfSpace({ code: '53100', message: 'could not extend file "base/1/2": No space left on device' })).toBe(true);
    expect(isOutOfSpace({ code: 'ENOSPC' })).toBe(true);
    expect(isOutOfSpace(new Error('wrapped', { cause: { code: '53100' } }))).toBe(true);
    expect(isOutOfSpace({ code: '23505', message: 'duplicate key' })).toBe(false);
    expect(isWalWriteFailure({ code: '53100', message: 'could not write to file "pg_wal/xlogtemp.42": No space left on device' })).toBe(true);
    expect(isWalWriteFailure({ code: '53100', message: 'could not extend file "base/5/16384": No space left on device' })).toBe(false);
  });

  it('the store is reported unable to write for OUT_OF_SPACE_HOLD_MS after the last error, then clears by itself', () => {
    let now = 1_000_000;
    const storage = new StorageHealth(() => now);
    expect(storage.cannotWrite()).toBeUndefined();
    storage.noteOutOfSpace({ code: '53100', message: 'No space left on device' });
    expect(storage.cannotWrite()).toMatch(/no space left/);
    now += OUT_OF_SPACE_HOLD_MS - 1;
    expect(storage.cannotWrite()).toMatch(/no space left/);
    now += 1;
    expect(storage.cannotWrite()).toBeUndefined();
  });
});

describe('what counts as a connection failure', () => {
  it('any error raised while opening a connection, and the refusals PostgreSQL gives then', () => {
    expect(isDatabaseUnavailable(markConnectFailure({ code: '55000', message: 'database "x" is not currently accepting connections' }))).toBe(true);
    expect(isDatabaseUnavailable(markConnectFailure(new Error('anything at all')))).toBe(true);
    expect(isDatabaseUnavailable({ code: '3D000', message: 'database "x" does not exist' })).toBe(true);
    expect(isDatabaseUnavailable({ code: '28P01', message: 'password authentication failed' })).toBe(true);
    // The same code from a running query is a bug of ours, not an outage.
    expect(isDatabaseUnavailable({ code: '55000', message: 'currval of sequence "s" is not yet defined in this session' })).toBe(false);
  });
});

describe.each(backends)('a full disk (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a write that meets 53100 is answered 507 naming the cause, /readyz says the store cannot write, writes resume once space is back', async () => {
    const admin = await t.auth(['admin']);
    const product = await aProduct(t.database.db);
    expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(200);
    await failProductWrites(t, 'could not extend file "base/16384/16390": No space left on device');

    const refused = await t.app.inject({ method: 'PATCH', url: `/admin/api/v1/products/${product.id}`, headers: admin, payload: { name: 'Renamed' } });
    expect(refused.statusCode).toBe(507);
    expect(refused.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(refused.headers['retry-after']).toBeDefined();
    expect(refused.json()).toMatchObject({ status: 507, code: 'insufficient_storage', detail: expect.stringMatching(/no space left/i) });

    const ready = await t.app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({ code: 'service_unavailable', detail: expect.stringMatching(/cannot write.*no space left/i) });
    // Reads go on, and the process answers its liveness probe.
    expect((await t.app.inject({ url: `/admin/api/v1/products/${product.id}`, headers: admin })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/healthz' })).statusCode).toBe(200);

    // Space is freed: the next write goes through without a restart.
    await sql`DROP TRIGGER disk_full ON products`.execute(t.database.db);
    const written = await t.app.inject({ method: 'PATCH', url: `/admin/api/v1/products/${product.id}`, headers: admin, payload: { name: 'Renamed' } });
    expect(written.statusCode).toBe(200);
    expect(written.json().data.name).toBe('Renamed');
  });
});

describe('the embedded database failing to write its log (pglite)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp('pglite');
  });
  afterAll(async () => {
    // Closing meets the failed store too (hooks that still query it); the database is not touched.
    await t?.app.close().catch(() => {});
    await t?.database.close();
  });

  it('is never asked again: requests answer 503 at once, /readyz says why, the fatal listener fires once', async () => {
    const admin = await t.auth(['admin']);
    const product = await aProduct(t.database.db);
    const reasons: string[] = [];
    t.database.storage.onFatal((reason) => reasons.push(reason));
    await failProductWrites(t, 'could not write to file "pg_wal/xlogtemp.42": No space left on device');

    const failed = await t.app.inject({ method: 'PATCH', url: `/admin/api/v1/products/${product.id}`, headers: admin, payload: { name: 'Renamed' } });
    expect(failed.statusCode).toBe(507);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/could not write its log.*pg_wal.*restart/);

    for (const url of ['/api/v1/products', `/admin/api/v1/products/${product.id}`]) {
      const res = await t.app.inject({ url, headers: admin });
      expect(res.statusCode, url).toBe(503);
      expect(res.headers['retry-after'], url).toBeDefined();
      expect(res.json(), url).toMatchObject({ code: 'service_unavailable', detail: expect.stringMatching(/could not write its log/) });
    }
    const ready = await t.app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json().detail).toMatch(/could not write its log/);
    expect((await t.app.inject({ url: '/healthz' })).statusCode).toBe(200);
    expect(reasons).toHaveLength(1);
  });
});

describe.skipIf(!DATABASE_URL)('connections PostgreSQL refuses (postgres)', () => {
  const name = `store_api_refusing_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  const urlOf = (database: string) => {
    const url = new URL(DATABASE_URL!);
    url.pathname = `/${database}`;
    return url.toString();
  };
  beforeAll(async () => {
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
  });
  afterAll(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`).catch(() => {});
    await admin.end();
  });

  it.each([
    ['55000 not accepting connections', () => urlOf(name), '55000'],
    ['3D000 no such database', () => urlOf(`${name}_missing`), '3D000'],
  ])('%s: the API and /readyz answer 503 with Retry-After', async (_label, url, sqlstate) => {
    const database = await openDatabase({ databaseUrl: url(), poolSize: 2 });
    const direct = await database.db
      .selectFrom('products')
      .select('id')
      .execute()
      .catch((error: { code?: string }) => error);
    expect((direct as { code?: string }).code).toBe(sqlstate);
    const app = await buildApp({ config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false' }), database, logger: pino({ level: 'silent' }) });
    // The 503s (and their Retry-After) are declared answers of these operations.
    const contract = attachContractCheck(app);
    try {
      for (const path of ['/api/v1/products', '/admin/api/v1/tokens']) {
        const res = await app.inject({ url: path, headers: { authorization: `Bearer sia_${'A'.repeat(43)}` } });
        expect(res.statusCode, path).toBe(503);
        expect(res.headers['retry-after'], path).toBe('2');
        expect(res.json(), path).toMatchObject({ code: 'service_unavailable' });
      }
      expect((await app.inject({ url: '/readyz' })).statusCode).toBe(503);
      assertContractKept(contract);
    } finally {
      await app.close();
      await database.close();
    }
  });
});

describe('the embedded database on a disk low on space (pglite data directory)', () => {
  it('refuses writes with 507 while free space is below DATA_DIR_MIN_FREE_MB, /readyz says so; reads go on; a database with room writes', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { migrateToLatest } = await import('../../src/schema/migrate.ts');
    const { createToken } = await import('../../src/tokens/token.service.ts');
    const dir = mkdtempSync(join(tmpdir(), 'store-faults-low-'));
    try {
      for (const [minFreeBytes, expected] of [
        [Number.MAX_SAFE_INTEGER, 507],
        [1, 201],
      ] as const) {
        const database = await openDatabase({ dataDir: dir, template: false, minFreeBytes: 0 });
        await migrateToLatest(database.db);
        const { token } = await createToken(database.db, { name: 'low', scopes: ['admin'] });
        await database.close();
        const low = await openDatabase({ dataDir: dir, template: false, minFreeBytes });
        const app = await buildApp({ config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false' }), database: low, logger: pino({ level: 'silent' }) });
        const contract = attachContractCheck(app);
        try {
          const headers = { authorization: `Bearer ${token}` };
          const res = await app.inject({
            method: 'POST',
            url: '/admin/api/v1/products',
            headers,
            payload: { name: 'Low disk', product_type: 'physical', price: 1 },
          });
          expect(res.statusCode, res.body).toBe(expected);
          const ready = await app.inject({ url: '/readyz' });
          expect((await app.inject({ url: '/admin/api/v1/tokens', headers })).statusCode).toBe(200);
          if (expected === 507) {
            expect(res.json()).toMatchObject({ code: 'insufficient_storage' });
            expect(ready.statusCode).toBe(503);
            expect(ready.json().detail).toMatch(/DATA_DIR_MIN_FREE_MB/);
          } else {
            expect(ready.statusCode).toBe(200);
          }
          assertContractKept(contract);
        } finally {
          await app.close();
          await low.close();
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
