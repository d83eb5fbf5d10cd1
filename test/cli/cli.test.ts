/**
 * The CLI as an operator runs it: real processes on a real data directory (PGlite) or database
 * (PostgreSQL). Tokens are created, listed and revoked; a data directory held by a running server is
 * refused with a plain message and nothing changes.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { BIN, runCli } from '../helpers/cli-process.ts';
import { openDatabase } from '../../src/db/database.ts';
import { migrationNames } from '../../src/schema/migrate.ts';
import { EnvSchema } from '../../src/config/config.ts';

// Each CLI run is a fresh process (TypeScript loader, PGlite start, migration check): seconds each,
// more on a busy machine. Generous per-test time; no assertion on speed.
vi.setConfig({ testTimeout: 240_000 });

const run = runCli;

/** Starts a long-running command and resolves once its stdout matches `ready`. */
function start(args: string[], env: Record<string, string>, ready: RegExp): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (ready.test(out)) resolve(child);
    });
    child.on('close', (code) => reject(new Error(`exited ${code} before ready: ${out}`)));
  });
}

/** A store for a CLI describe block: a fresh DATA_DIR on PGlite, a scratch database on PostgreSQL; `env` points the CLI at it. */
function cliStore(backend: string, prefix: string): { env: Record<string, string>; dataDir?: string; database?: TestDatabase } {
  const store: { env: Record<string, string>; dataDir?: string; database?: TestDatabase } = { env: {} };
  beforeAll(async () => {
    if (backend === 'pglite') {
      store.dataDir = mkdtempSync(join(tmpdir(), prefix));
      store.env = { DATA_DIR: store.dataDir };
    } else {
      store.database = await openTestDatabase('postgres', { poolSize: 1 });
      store.env = { DATABASE_URL: store.database.url! };
    }
  });
  afterAll(async () => {
    if (store.dataDir) rmSync(store.dataDir, { recursive: true, force: true });
    await store.database?.close();
  });
  return store;
}

describe('store-api --help', () => {
  it('lists the commands', async () => {
    const { code, stdout } = await run(['--help'], {});
    expect(code).toBe(0);
    for (const cmd of ['all', 'serve', 'worker', 'migrate', 'tokens', 'demo']) expect(stdout).toContain(cmd);
  });
});

describe('outside a data directory (no store in DATA_DIR, no DATABASE_URL)', () => {
  let parent: string;
  beforeAll(() => {
    parent = mkdtempSync(join(tmpdir(), 'store-api-nostore-'));
  });
  afterAll(() => rmSync(parent, { recursive: true, force: true }));

  it('every command that opens the store refuses, says where it would create one and asks for --create; nothing is created', async () => {
    const dataDir = join(parent, 'data');
    const commands = [
      ['tokens', 'create', '--name', 'erp'],
      ['tokens', 'list'],
      ['tokens', 'revoke', 'sia_x'],
      ['admin', 'create', '--email', 'a@example.com'],
      ['admin', 'list'],
      ['migrate'],
      ['demo', 'generate', '--products', '5'],
      ['documents', 'check'],
    ];
    const answers = await Promise.all(commands.map((args) => run(args, { DATA_DIR: dataDir, ADMIN_PASSWORD: 'a long enough password' })));
    answers.forEach((res, i) => {
      expect(res.code, commands[i]!.join(' ')).toBe(1);
      expect(res.stdout).toBe('');
      expect(res.stderr.trimEnd().split('\n')).toEqual([expect.stringContaining(`No store in ${dataDir}`)]);
      expect(res.stderr).toContain(`to create a new store in ${dataDir}, run it again with --create. Nothing was created.`);
    });
    expect(existsSync(dataDir)).toBe(false);
  });

  it('--create makes the store there, after which the commands work without it; migrate says what it applied', async () => {
    const dataDir = join(parent, 'created');
    const created = await run(['tokens', 'create', '--create', '--name', 'erp', '--json'], { DATA_DIR: dataDir });
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout).token).toMatch(/^sia_/);
    const listed = await run(['tokens', 'list'], { DATA_DIR: dataDir });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain('erp');
    const migrated = await run(['migrate'], { DATA_DIR: dataDir });
    expect(migrated.code, migrated.stderr).toBe(0);
    // Not a terminal: one JSON line (the same words on a terminal).
    expect(JSON.parse(migrated.stdout)).toMatchObject({ msg: 'Schema is current.', applied: [], pending: [] });
  });

  it('with DATABASE_URL no flag is needed, and migrate lists the migrations it applied to an empty database', async () => {
    if (!process.env.TEST_DATABASE_URL) return;
    const base = process.env.TEST_DATABASE_URL;
    const name = `store_api_test_${process.ppid}_migrate_${process.pid}`;
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(base);
    url.pathname = `/${name}`;
    try {
      const first = await run(['migrate'], { DATABASE_URL: url.toString(), DATA_DIR: join(parent, 'unused') });
      expect(first.code, first.stderr).toBe(0);
      expect(JSON.parse(first.stdout)).toMatchObject({
        msg: `Applied ${migrationNames().length} migrations: ${migrationNames().join(', ')}. Schema is current.`,
        applied: migrationNames(),
        pending: [],
      });
      const second = await run(['migrate'], { DATABASE_URL: url.toString() });
      expect(JSON.parse(second.stdout)).toMatchObject({ msg: 'Schema is current.', applied: [] });
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
    expect(existsSync(join(parent, 'unused'))).toBe(false);
  });
});

describe('the server roles list their environment variables in --help', () => {
  it.each(['all', 'serve', 'worker'])('%s --help names every variable of the configuration schema', async (role) => {
    const { code, stdout } = await run([role, '--help'], {});
    expect(code).toBe(0);
    const listed = [...stdout.matchAll(/^ {2}([A-Z][A-Z0-9_]+) /gm)].map((m) => m[1]);
    expect(listed).toEqual(Object.keys(EnvSchema.properties));
    expect(stdout).toMatch(/^ {2}DATA_DIR +Embedded \(PGlite\) data directory.*\(default \.\/data\)$/m);
  });
});

describe.each(backends)('tokens CLI (%s)', (backend) => {
  const store = cliStore(backend, 'store-api-cli-');

  it('creates a token shown once, lists it without the secret, revokes it', async () => {
    // The store is new: --create on the PGlite back end (a DATABASE_URL needs none).
    const created = await run(
      ['tokens', 'create', ...(backend === 'pglite' ? ['--create'] : []), '--name', 'erp', '--scopes', 'products:read,orders:read', '--json'],
      store.env,
    );
    expect(created.code, created.stderr).toBe(0);
    const token = JSON.parse(created.stdout) as { id: string; token: string; scopes: string[] };
    expect(token.token).toMatch(/^sia_[A-Za-z0-9_-]{43}$/);
    expect(token.scopes).toEqual(['products:read', 'orders:read']);

    const listed = await run(['tokens', 'list'], store.env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain('erp');
    expect(listed.stdout).toContain('made by the operator (CLI)');
    expect(listed.stdout).not.toContain(token.token);

    const revoked = await run(['tokens', 'revoke', token.id], store.env);
    expect(revoked.code).toBe(0);
    expect((await run(['tokens', 'list', '--json'], store.env)).stdout).toContain('"status":"revoked"');
    const again = await run(['tokens', 'revoke', token.id], store.env);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already revoked/);
  });

  it('rejects a bad scope plainly', async () => {
    const res = await run(['tokens', 'create', '--name', 'x', '--scopes', 'everything'], store.env);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/Unknown scope\(s\): everything/);
  });
});

describe('embedded data directory held by a running server', () => {
  let dataDir: string;
  let server: ChildProcess | undefined;
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-lock-'));
    server = await start(['serve'], { DATA_DIR: dataDir, PORT: '0', SEED_DEMO: 'false' }, /listening on/);
  });
  afterAll(async () => {
    if (server && server.exitCode === null) {
      const closed = new Promise((r) => server!.once('close', r));
      server.kill('SIGTERM');
      await closed;
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('makes the CLI say so and how to proceed, without hanging or touching the data', async () => {
    const res = await run(['tokens', 'create', '--name', 'blocked'], { DATA_DIR: dataDir });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`in use by another process (pid ${server!.pid})`);
    // One line, saying what to do instead while the server runs.
    expect(res.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(res.stderr).toContain(
      "Instead, create the key in the running server's dashboard (/admin, Integrations → API keys) or with POST /admin/api/v1/tokens",
    );
    expect(res.stdout).toBe('');
  });

  it('says in one line what to do instead for every command that needs the data directory', async () => {
    const cases: Array<[string[], string]> = [
      [['tokens', 'list'], 'GET /admin/api/v1/tokens'],
      [['tokens', 'revoke', 'sia_x'], 'POST /admin/api/v1/tokens/:id/revoke'],
      [['admin', 'create', '--email', 'a@example.com'], 'open the one-time setup link the server printed at start'],
      [['migrate'], 'the running server applied every migration'],
      [['admin', 'list'], 'Stop that process and run this again'],
    ];
    const answers = await Promise.all(cases.map(([args]) => run(args, { DATA_DIR: dataDir, ADMIN_PASSWORD: 'a long enough password' })));
    answers.forEach((res, i) => {
      expect(res.code).toBe(1);
      expect(res.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(res.stderr).toContain(cases[i]![1]);
      expect(res.stderr).toContain(`pid ${server!.pid}`);
    });
  });

  it('works again once the server has stopped', async () => {
    const closed = new Promise<number | null>((r) => server!.once('close', (code) => r(code)));
    server!.kill('SIGTERM');
    expect(await closed).toBe(0);
    const res = await run(['tokens', 'create', '--name', 'after', '--json'], { DATA_DIR: dataDir });
    expect(res.code, res.stderr).toBe(0);
  });
});

/** The JSON lines of a command's output (progress lines), skipping plain ones. */
function jsonLines(text: string): { task?: string; msg?: string; progress?: unknown }[] {
  return text.split('\n').flatMap((line) => {
    try {
      const value: unknown = JSON.parse(line);
      return value && typeof value === 'object' ? [value as { task?: string }] : [];
    } catch {
      return [];
    }
  });
}

describe('demo generate', () => {
  it('builds a store of the chosen size with a progress report', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'store-api-demo-'));
    try {
      const res = await run(['demo', 'generate', '--create', '--products', '60', '--orders', '20', '--customers', '10'], {
        DATA_DIR: dataDir,
        PROGRESS_LOG_INTERVAL_MS: '10',
      });
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toMatch(/Generated 60 products, 10 customers, \d+ orders/);
      // Not a terminal: progress as JSON lines on stderr, the last one saying it ended.
      const progress = jsonLines(res.stderr).filter((l) => l.task === 'demo generate');
      expect(progress.some((l) => typeof l.progress === 'object')).toBe(true);
      expect(progress.at(-1)?.msg).toMatch(/^demo generate: done in/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe.each(backends)('documents CLI (%s)', (backend) => {
  const store = cliStore(backend, 'store-api-cli-docs-');

  /** Writes one product's stored document behind the triggers' back, as a bug would. */
  async function corruptOneProduct(): Promise<string> {
    const handle = store.database ?? (await openDatabase({ dataDir: store.dataDir, template: false }));
    try {
      return await handle.db.transaction().execute(async (trx) => {
        await sql`SELECT set_config('store_api.rebuilding_documents', 'on', true)`.execute(trx);
        const { rows } = await sql<{ id: string }>`
          UPDATE products SET doc = '{"stale":true}' WHERE id = (SELECT id FROM products ORDER BY id LIMIT 1) RETURNING id::text AS id`.execute(trx);
        return rows[0]!.id;
      });
    } finally {
      if (!store.database) await handle.close();
    }
  }

  it('check passes on a generated store, names a record whose document differs (exit 1), and backfill --all repairs it', async () => {
    const generated = await run(['demo', 'generate', '--create', '--products', '30', '--orders', '10'], store.env);
    expect(generated.code, generated.stderr).toBe(0);
    const clean = await run(['documents', 'check'], store.env);
    expect(clean.code, clean.stderr + clean.stdout).toBe(0);

    const id = await corruptOneProduct();
    const dirty = await run(['documents', 'check'], store.env);
    expect(dirty.code).toBe(1);
    expect(dirty.stdout).toContain(`product ${id} differs`);
    expect(dirty.stdout).toContain('{"stale":true}');

    const backfill = await run(['documents', 'backfill', '--all'], { ...store.env, PROGRESS_LOG_INTERVAL_MS: '10' });
    expect(backfill.code, backfill.stderr).toBe(0);
    expect(backfill.stderr).toMatch(/products: \d+ rows/);
    expect(jsonLines(backfill.stderr).some((l) => l.task === 'documents backfill' && typeof l.progress === 'object')).toBe(true);
    const repaired = await run(['documents', 'check'], store.env);
    expect(repaired.code, repaired.stdout).toBe(0);
  });
});
