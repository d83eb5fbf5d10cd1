/**
 * docs/integration-guide.md: every fenced block, in order, against a test service (the guide promises
 * it works as written), on each back end. The admin's block runs the real `store-api` command on the
 * service's store (its working directory on PGlite, with the service stopped as the guide says; its
 * DATABASE_URL on PostgreSQL) and its token is the one every later block uses; the variables block
 * runs with the service's address and that token in place of its examples, which must look like them.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { migrateToLatest, migrationNames } from '../../src/schema/migrate.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { PROJECT_ROOT } from '../production/process-helpers.ts';

const run = promisify(execFile);
const guide = readFileSync(join(PROJECT_ROOT, 'docs/integration-guide.md'), 'utf8');
const blocks = [...guide.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, code: m[2]! }));
const EXAMPLE_URL = 'http://127.0.0.1:3000';
const EXAMPLE_TOKEN = 'sia_…';

describe('the integration guide', () => {
  it('has only blocks the test runs (sh, js), the admin command first, then the variables, and a snippet for each way in', () => {
    expect(blocks.map((b) => b.lang).filter((lang) => lang !== 'sh' && lang !== 'js')).toEqual([]);
    expect(blocks[0]!.code).toMatch(/^npx store-api tokens create --name \S+ --scopes \S+\n$/);
    expect(blocks[1]!.code).toBe(`export STORE_API_URL=${EXAMPLE_URL}\nexport STORE_API_TOKEN=${EXAMPLE_TOKEN}\n`);
    expect(blocks.filter((s) => s.code.includes('curl ')).length).toBeGreaterThanOrEqual(2);
    expect(blocks.filter((s) => s.lang === 'js' && s.code.includes('@store-api/client')).length).toBe(1);
    expect(blocks.some((s) => s.code.includes('store-api-sync verify'))).toBe(true);
    // Never a secret on a command line.
    expect(guide).not.toMatch(/--secret whsec/);
  });
});

describe.each(backends)('docs/integration-guide.md, run as written (%s)', (backend) => {
  let dir: string;
  let pg: TestDatabase | undefined;
  let database: DatabaseHandle | undefined;
  let app: App | undefined;
  let cliEnv: Record<string, string>;

  const openStore = async () =>
    pg ? openDatabase({ databaseUrl: pg.url!, poolSize: 4 }) : openDatabase({ dataDir: join(dir, 'data'), knownMigrations: migrationNames() });

  beforeAll(async () => {
    // Under the checkout (git-ignored tmp/), so `@store-api/client` and `npx store-api-sync` resolve as in a project that installed them.
    mkdirSync(join(PROJECT_ROOT, 'tmp'), { recursive: true });
    dir = mkdtempSync(join(PROJECT_ROOT, 'tmp', 'integration-guide-'));
    // A fresh shell of the checkout: no `store-api` on PATH (the block said `store-api …`,
    // "command not found" there); `npx` resolves the project's own bin.
    cliEnv = { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', LOG_LEVEL: 'warn' };
    if (backend === 'postgres') {
      pg = await openTestDatabase('postgres', { poolSize: 1 });
      cliEnv.DATABASE_URL = pg.url!;
    }
    // The service's store with a few products, then stopped (the embedded store is one process's).
    const store = await openStore();
    await migrateToLatest(store.db);
    for (let i = 0; i < 3; i++) await aProductWithVariants(store.db, [2]);
    for (let i = 0; i < 4; i++) await aProduct(store.db);
    await store.close();
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await database?.close();
    await pg?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every block succeeds in order and the mirror verifies', async () => {
    // 0. The admin, in the service's working directory.
    const admin = await run('bash', ['-euo', 'pipefail', '-c', blocks[0]!.code], { cwd: dir, env: cliEnv });
    const token = /^(sia_\S+)$/m.exec(admin.stdout)?.[1];
    expect(token, admin.stdout + admin.stderr).toMatch(/^sia_[A-Za-z0-9_-]{43}$/);

    // The service starts on that store.
    database = await openStore();
    app = await buildApp({ config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', ...UNLIMITED }), database, logger: pino({ level: 'silent' }) });
    const baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });

    // 1. The integrator's variables, with this service and the admin's token in place of the examples.
    const variables = blocks[1]!.code.replace(EXAMPLE_URL, baseUrl).replace(EXAMPLE_TOKEN, token!);
    const exported = await run('bash', ['-euo', 'pipefail', '-c', `${variables}\nprintf '%s\\n' "$STORE_API_URL" "$STORE_API_TOKEN"`], { cwd: dir });
    const [url, exportedToken] = exported.stdout.trim().split('\n');
    expect([url, exportedToken]).toEqual([baseUrl, token]);
    const env = {
      PATH: process.env.PATH!,
      HOME: process.env.HOME ?? '/tmp',
      STORE_API_URL: url!,
      STORE_API_TOKEN: exportedToken!,
      // The tests run the client's and the sync tool's sources (vitest.config.ts).
      NODE_OPTIONS: '--conditions=source --import tsx',
    };

    const outputs: string[] = [];
    for (const [i, block] of blocks.slice(2).entries()) {
      let result: { stdout: string; stderr: string };
      if (block.lang === 'sh') {
        result = await run('bash', ['-euo', 'pipefail', '-c', block.code], { cwd: dir, env });
      } else {
        const file = join(dir, `snippet-${i}.mjs`);
        writeFileSync(file, block.code);
        result = await run(process.execPath, [file], { cwd: dir, env });
      }
      outputs.push(result.stdout);
    }
    const all = outputs.join('\n');
    expect(all).toMatch(/"data":\[/);
    expect(all).toMatch(/x-total-count: 7/i);
    expect(all).toMatch(/^7 of at most 7 products; continue from \S+_00000000-0000-0000-0000-000000000000$/m);
    expect(outputs.at(-1)).toMatch(/products +api 7 \((-?\w+)\) mirror 7 \(\1\) match/);
  }, 240_000);
});
