/**
 * The CLI as an operator runs it: real processes on a real data directory (PGlite) or database
 * (PostgreSQL). Tokens are created, listed and revoked; a data directory held by a running server is
 * refused with a plain message and nothing changes.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { openDatabase } from '../../src/db/database.ts';

// Each CLI run is a fresh process (TypeScript loader, PGlite start, migration check): seconds each,
// more on a busy machine. Generous per-test time; no assertion on speed.
vi.setConfig({ testTimeout: 240_000 });

const BIN = join(import.meta.dirname, '../../bin/store-api.js');

function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

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

describe.each(backends)('tokens CLI (%s)', (backend) => {
  const store = cliStore(backend, 'store-api-cli-');

  it('creates a token shown once, lists it without the secret, revokes it', async () => {
    const created = await run(['tokens', 'create', '--name', 'erp', '--scopes', 'products:read,orders:read', '--json'], store.env);
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

describe('demo generate', () => {
  it('builds a store of the chosen size with a progress report', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'store-api-demo-'));
    try {
      const res = await run(['demo', 'generate', '--products', '60', '--orders', '20', '--customers', '10'], { DATA_DIR: dataDir });
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toMatch(/Generated 60 products, 10 customers, \d+ orders/);
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
    const generated = await run(['demo', 'generate', '--products', '30', '--orders', '10'], store.env);
    expect(generated.code, generated.stderr).toBe(0);
    const clean = await run(['documents', 'check'], store.env);
    expect(clean.code, clean.stderr + clean.stdout).toBe(0);

    const id = await corruptOneProduct();
    const dirty = await run(['documents', 'check'], store.env);
    expect(dirty.code).toBe(1);
    expect(dirty.stdout).toContain(`product ${id} differs`);
    expect(dirty.stdout).toContain('{"stale":true}');

    const backfill = await run(['documents', 'backfill', '--all'], store.env);
    expect(backfill.code, backfill.stderr).toBe(0);
    expect(backfill.stderr).toMatch(/products: \d+ rows/);
    const repaired = await run(['documents', 'check'], store.env);
    expect(repaired.code, repaired.stdout).toBe(0);
  });
});
