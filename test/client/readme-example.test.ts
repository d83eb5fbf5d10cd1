/**
 * The README's client example works as written: the code block in README.md and in
 * packages/client/README.md is packages/client/examples/pull-and-verify.mjs, and that file, run with
 * node against `store-api all` started from this repository (importing the package, built from
 * the current sources, by its name), pulls every product and verifies a real signed ping.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest, migrationNames } from '../../src/schema/migrate.ts';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { PROJECT_ROOT, childEnv, listeningUrl, startStoreApi, type StoreApiProcess } from '../production/process-helpers.ts';

const EXAMPLE = resolve(PROJECT_ROOT, 'packages/client/examples/pull-and-verify.mjs');
const PRODUCTS = 120;

function jsBlockAfter(markdown: string, heading: string): string {
  const at = markdown.indexOf(heading);
  expect(at, `${heading} in the README`).toBeGreaterThan(-1);
  const match = /```js\n([\s\S]*?)```/.exec(markdown.slice(at));
  return match![1]!;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** A child process running the example (installed in `dir`), with its output and a wait for a line. */
function runExample(dir: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [join(dir, 'pull-and-verify.mjs')], { cwd: dir, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  const waiters = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    for (const w of waiters) w();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  child.on('exit', () => {
    for (const w of waiters) w();
  });
  return {
    child,
    output: () => text,
    waitFor: (pattern: RegExp, timeoutMs = 60_000) =>
      new Promise<RegExpMatchArray>((resolveMatch, reject) => {
        const timer = setTimeout(() => finish(() => reject(new Error(`the example did not print ${pattern}:\n${text}`))), timeoutMs);
        const finish = (then: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          then();
        };
        const check = () => {
          const match = text.match(pattern);
          if (match) finish(() => resolveMatch(match));
          else if (child.exitCode !== null) finish(() => reject(new Error(`the example exited ${child.exitCode}:\n${text}`)));
        };
        waiters.add(check);
        check();
      }),
  };
}

/**
 * A project of its own holding the example and the package, built from the current sources, in
 * node_modules/@store-api/client: the example imports it by name as an integrator's code would, and
 * the repository's own packages/client/dist (which other tests may be reading) is left alone.
 */
let exampleDir: string;
beforeAll(() => {
  exampleDir = mkdtempSync(join(tmpdir(), 'store-api-client-example-project-'));
  const installed = join(exampleDir, 'node_modules/@store-api/client');
  mkdirSync(installed, { recursive: true });
  copyFileSync(resolve(PROJECT_ROOT, 'packages/client/package.json'), join(installed, 'package.json'));
  execFileSync(
    process.execPath,
    [resolve(PROJECT_ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'packages/client/tsconfig.build.json', '--outDir', join(installed, 'dist')],
    { cwd: PROJECT_ROOT },
  );
  copyFileSync(EXAMPLE, join(exampleDir, 'pull-and-verify.mjs'));
}, 120_000);
afterAll(() => {
  if (exampleDir) rmSync(exampleDir, { recursive: true, force: true });
});

describe('the client example in the READMEs', () => {
  it('is the example file, verbatim, in both READMEs', () => {
    const example = readFileSync(EXAMPLE, 'utf8');
    expect(jsBlockAfter(readFileSync(resolve(PROJECT_ROOT, 'README.md'), 'utf8'), '## Client')).toBe(example);
    expect(jsBlockAfter(readFileSync(resolve(PROJECT_ROOT, 'packages/client/README.md'), 'utf8'), '## Example')).toBe(example);
  });
});

describe.each(backends)('the client example against a running service (%s)', (backend) => {
  let service: StoreApiProcess;
  let example: ReturnType<typeof runExample> | undefined;
  let dataDir: string | undefined;
  let database: TestDatabase | undefined;
  let baseUrl: string;
  let readToken: string;
  let adminToken: string;
  let products: number;

  beforeAll(async () => {
    let env: Record<string, string>;
    const seed = async (db: Parameters<typeof generateDemoStore>[0]) => {
      await generateDemoStore(db, { products: PRODUCTS, customers: 10, orders: 24 });
      readToken = (await createToken(db, { name: 'example' })).token;
      adminToken = (await createToken(db, { name: 'example admin', scopes: ['admin'] })).token;
    };
    if (backend === 'pglite') {
      dataDir = mkdtempSync(join(tmpdir(), 'store-api-client-example-'));
      const handle = await openDatabase({ dataDir, knownMigrations: migrationNames() });
      await migrateToLatest(handle.db);
      await seed(handle.db);
      products = Number(
        (
          await handle.db
            .selectFrom('products')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
      await handle.close();
      env = { DATA_DIR: dataDir };
    } else {
      database = await openTestDatabase('postgres');
      await seed(database.db);
      products = Number(
        (
          await database.db
            .selectFrom('products')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
      env = { DATABASE_URL: database.url! };
    }
    service = startStoreApi(['all'], { ...env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_POLL_INTERVAL_MS: '100' }, { name: `store-api all (${backend})` });
    baseUrl = await listeningUrl(service);
  }, 240_000);
  afterAll(async () => {
    example?.child.kill('SIGKILL');
    await service?.stop();
    await database?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('pulls every product, then verifies a signed ping', async () => {
    const port = await freePort();
    const admin = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };
    const created = await fetch(`${baseUrl}/admin/api/v1/webhooks/endpoints`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ url: `http://127.0.0.1:${port}/` }),
    });
    expect(created.status).toBe(201);
    const endpoint = ((await created.json()) as { data: { id: string; secret: string } }).data;

    example = runExample(exampleDir, { STORE_API_URL: baseUrl, STORE_API_TOKEN: readToken, STORE_WEBHOOK_SECRET: endpoint.secret, WEBHOOK_PORT: String(port) });
    expect(Number((await example.waitFor(/pulled (\d+) products/))[1])).toBe(products);
    await example.waitFor(/waiting for webhooks/);

    const ping = await fetch(`${baseUrl}/admin/api/v1/webhooks/endpoints/${endpoint.id}/ping`, {
      method: 'POST',
      headers: { authorization: admin.authorization },
    });
    expect(ping.status).toBeLessThan(300);
    const eventId = ((await ping.json()) as { data: { event_id: string } }).data.event_id;
    await example.waitFor(new RegExp(`verified ping ${eventId}`));
    expect(example.output()).not.toMatch(/signature|Error/);
  });
});
