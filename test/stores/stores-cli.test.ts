/**
 * The platform operator's stores, as an operator runs them (real CLI processes, decision 0051): a
 * store created with the CLI gets its own key and data and serves them, and nothing of another
 * store; `--store` is asked for once there are several stores, and a malformed, unknown or taken
 * one is refused with one line, nothing written; suspend, resume and delete act as documented.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { runCli } from '../helpers/cli-process.ts';
import { openDatabase } from '../../src/db/database.ts';
import { loadConfig } from '../../src/config/config.ts';
import { buildApp } from '../../src/app.ts';
import { useDefaultStoreScope } from '../../src/stores/store.service.ts';
import { migrationNames } from '../../src/schema/migrate.ts';

vi.setConfig({ testTimeout: 240_000 });

const run = runCli;

describe.each(backends)('store-api stores (%s)', (backend) => {
  let env: Record<string, string> = {};
  let dataDir: string | undefined;
  let database: TestDatabase | undefined;

  beforeAll(async () => {
    if (backend === 'pglite') {
      dataDir = mkdtempSync(join(tmpdir(), 'store-api-stores-'));
      env = { DATA_DIR: dataDir };
      expect((await run(['migrate', '--create'], env)).code).toBe(0);
    } else {
      database = await openTestDatabase('postgres', { poolSize: 1 });
      env = { DATABASE_URL: database.url! };
    }
  });
  afterAll(async () => {
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    await database?.close();
  });

  /** GET `path` of a service opened on this store with `token`: status and body. */
  async function get(path: string, token: string): Promise<{ status: number; body: { data?: { name: string }[]; code?: string } }> {
    const opened = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir, knownMigrations: migrationNames(), template: false });
    await useDefaultStoreScope(opened);
    const app = await buildApp({
      config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', ...env }),
      database: opened,
      logger: pino({ level: 'silent' }),
    });
    try {
      const res = await app.inject({ url: path, headers: { authorization: `Bearer ${token}` } });
      return { status: res.statusCode, body: res.json() };
    } finally {
      await app.close();
      await opened.close();
    }
  }

  it('creates a store that serves its own key and data and nothing of another; refuses bad --store and names', async () => {
    const listed = await run(['stores', 'list', '--json'], env);
    expect(listed.code, listed.stderr).toBe(0);
    const [first] = JSON.parse(listed.stdout) as { id: string; name: string }[];
    expect(first!.name).toBe('Default store');

    // With one store, no --store is needed.
    const keyOfFirst = await run(['tokens', 'create', '--name', 'first', '--json'], env);
    expect(keyOfFirst.code, keyOfFirst.stderr).toBe(0);

    const created = await run(['stores', 'create', '--name', 'Second shop', '--json'], env);
    expect(created.code, created.stderr).toBe(0);
    const second = JSON.parse(created.stdout) as { id: string; name: string; status: string };
    expect(second).toMatchObject({ name: 'Second shop', status: 'active' });
    expect(second.id).toMatch(/^[0-9a-f-]{36}$/);

    const taken = await run(['stores', 'create', '--name', 'second SHOP'], env);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain('exists already');
    const blank = await run(['stores', 'create', '--name', '   '], env);
    expect(blank.code).toBe(1);
    expect(blank.stderr).toContain('needs a name');

    // Several stores: a store-scoped command asks which.
    const unnamed = await run(['tokens', 'create', '--name', 'x'], env);
    expect(unnamed.code).toBe(1);
    expect(unnamed.stderr).toContain('--store');
    const malformed = await run(['tokens', 'create', '--name', 'x', '--store', 'not-a-store'], env);
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toContain('is not a store id');
    const unknown = await run(['tokens', 'create', '--name', 'x', '--store', '00000000-0000-4000-8000-000000000000'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no store has the id');
    const across = await run(['stores', 'list', '--store', second.id], env);
    expect(across.code).not.toBe(0);

    const keyOfSecond = await run(['tokens', 'create', '--store', second.id, '--name', 'erp', '--json'], env);
    expect(keyOfSecond.code, keyOfSecond.stderr).toBe(0);
    const generated = await run(['demo', 'generate', '--store', second.id, '--products', '5', '--customers', '2', '--orders', '2'], env);
    expect(generated.code, generated.stderr).toBe(0);
    // The first store's keys do not list the second's.
    const keysOfFirst = await run(['tokens', 'list', '--store', first!.id, '--json'], env);
    expect((JSON.parse(keysOfFirst.stdout) as { name: string }[]).map((k) => k.name)).toEqual(['first']);

    const tokenOfSecond = (JSON.parse(keyOfSecond.stdout) as { token: string }).token;
    const tokenOfFirst = (JSON.parse(keyOfFirst.stdout) as { token: string }).token;
    const own = await get('/api/v1/products?limit=100', tokenOfSecond);
    expect(own.status).toBe(200);
    expect(own.body.data).toHaveLength(5);
    const other = await get('/api/v1/products?limit=100', tokenOfFirst);
    expect(other.status).toBe(200);
    expect(other.body.data).toEqual([]);

    // Suspended: its keys get 403 store_suspended; resumed: served again.
    expect((await run(['stores', 'suspend', second.id], env)).stdout).toContain('is suspended');
    const suspended = await get('/api/v1/products', tokenOfSecond);
    expect(suspended).toMatchObject({ status: 403, body: { code: 'store_suspended' } });
    expect((await get('/api/v1/products', tokenOfFirst)).status).toBe(200);
    expect((await run(['stores', 'resume', second.id], env)).stdout).toContain('is active');
    expect((await get('/api/v1/products', tokenOfSecond)).status).toBe(200);

    // Deleted: every row of it gone, its key unknown; the first store untouched.
    const unconfirmed = await run(['stores', 'delete', second.id], env);
    expect(unconfirmed.code).toBe(1);
    expect(unconfirmed.stderr).toContain('--yes');
    const deleted = await run(['stores', 'delete', second.id, '--yes'], env);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await get('/api/v1/products', tokenOfSecond)).status).toBe(401);
    expect((await get('/api/v1/products', tokenOfFirst)).status).toBe(200);
    const after = JSON.parse((await run(['stores', 'list', '--json'], env)).stdout) as { id: string }[];
    expect(after.map((s) => s.id)).toEqual([first!.id]);

    // The platform audit log holds each of these actions, newest first, by the CLI.
    const log = await run(['stores', 'audit-log', '--store-id', second.id, '--json'], env);
    expect(log.code, log.stderr).toBe(0);
    const entries = log.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { action: string; actor: string; store_name: string });
    expect(entries.map((e) => e.action)).toEqual(['store.deleted', 'store.deletion_started', 'store.resumed', 'store.suspended', 'store.created']);
    expect(entries.every((e) => e.actor === 'cli' && e.store_name === 'Second shop')).toBe(true);
    const badLimit = await run(['stores', 'audit-log', '--limit', 'many'], env);
    expect(badLimit.code).toBe(1);
    expect(badLimit.stderr).toContain('--limit');
  });

  it("prints the new store's setup_url: its first owner sets a password and signs in to that store only", async () => {
    const created = await run(['stores', 'create', '--name', 'Owned by its link', '--json'], { ...env, PUBLIC_URL: 'https://shop.example.com' });
    expect(created.code, created.stderr).toBe(0);
    const store = JSON.parse(created.stdout) as { id: string; name: string; status: string; created_at: string; setup_url: string };
    expect(Object.keys(store).sort()).toEqual(['created_at', 'id', 'name', 'setup_url', 'status']);
    expect(store.setup_url).toMatch(/^https:\/\/shop\.example\.com\/admin#\/setup\?code=[A-Za-z0-9_-]{43}$/);
    const code = store.setup_url.split('code=')[1]!;
    const opened = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir, knownMigrations: migrationNames(), template: false });
    await useDefaultStoreScope(opened);
    const app = await buildApp({
      config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', ...env }),
      database: opened,
      logger: pino({ level: 'silent' }),
    });
    try {
      const made = await app.inject({
        method: 'POST',
        url: '/admin/setup',
        payload: { code, email: 'first-owner@example.com', password: 'correct horse battery' },
      });
      expect(made.statusCode, made.body).toBe(201);
      expect(made.json().data).toMatchObject({ role: 'owner', store: { id: store.id, name: 'Owned by its link' } });
      const signIn = await app.inject({
        method: 'POST',
        url: '/admin/session',
        payload: { email: 'first-owner@example.com', password: 'correct horse battery' },
      });
      expect(signIn.statusCode, signIn.body).toBe(200);
      const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
      const stores = await app.inject({ url: '/admin/api/v1/account/stores', headers: { cookie } });
      expect(stores.json().data.map((s: { id: string; role: string }) => `${s.id}:${s.role}`)).toEqual([`${store.id}:owner`]);
      const admins = await app.inject({ url: '/admin/api/v1/admins', headers: { cookie } });
      expect(admins.json().data.map((u: { email: string }) => u.email)).toEqual(['first-owner@example.com']);
      // Spent: the link works once.
      const again = await app.inject({ method: 'POST', url: '/admin/setup/check', payload: { code } });
      expect(again.statusCode).toBe(409);
    } finally {
      await app.close();
      await opened.close();
    }
  });
});
