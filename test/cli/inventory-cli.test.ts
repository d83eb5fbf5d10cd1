/**
 * `store-api inventory import` and `inventory job` (decision 0060) as an operator runs them: real
 * processes on a real data directory (PGlite) or database (PostgreSQL). Waiting, the command runs the
 * job and shows its progress (JSON progress lines on stderr, not a terminal here); `--no-wait` only
 * queues it, and `inventory job <id> --wait` runs and follows it; a bad row fails the job naming its
 * line, with exit 1.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { runCli } from '../helpers/cli-process.ts';
import { openDatabase } from '../../src/db/database.ts';

// Each CLI run is a fresh process: seconds each, more on a busy machine. No assertion on speed.
vi.setConfig({ testTimeout: 240_000 });

describe.each(backends)('inventory CLI (%s)', (backend) => {
  let dir: string;
  let database: TestDatabase | undefined;
  let env: Record<string, string>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'store-api-cli-import-'));
    if (backend === 'pglite') env = { DATA_DIR: join(dir, 'data') };
    else {
      database = await openTestDatabase('postgres', { poolSize: 1 });
      env = { DATABASE_URL: database.url! };
    }
    env = { ...env, STOCK_IMPORT_STEP_ROWS: '2', PROGRESS_LOG_INTERVAL_MS: '10', IMPORT_JOB_POLL_MS: '20' };
    const generated = await runCli(['demo', 'generate', '--create', '--products', '20', '--orders', '1'], env);
    expect(generated.code, generated.stderr).toBe(0);
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await database?.close();
  });

  /** Reads with a connection of the test's own (the CLI's processes have ended). */
  async function query<T>(statement: ReturnType<typeof sql<T>>): Promise<T[]> {
    const handle = database ?? (await openDatabase({ dataDir: env.DATA_DIR, template: false }));
    try {
      return (await statement.execute(handle.db)).rows;
    } finally {
      if (!database) await handle.close();
    }
  }
  const skus = async () =>
    (
      await query(sql<{ sku: string }>`
        SELECT v.sku FROM variants v JOIN products p ON p.id = v.product_id AND p.store_id = v.store_id
        WHERE v.sku IS NOT NULL AND p.product_type = 'physical' ORDER BY v.sku LIMIT 8`)
    ).map((r) => r.sku);
  const levels = async () =>
    Object.fromEntries((await query(sql<{ sku: string; stock: number }>`SELECT sku, stock FROM variants WHERE sku IS NOT NULL`)).map((r) => [r.sku, r.stock]));
  const jsonLines = (text: string) =>
    text.split('\n').flatMap((line) => {
      try {
        return [JSON.parse(line) as { task?: string; progress?: { done: number; total: number } }];
      } catch {
        return [];
      }
    });

  it('imports a CSV as a job with its progress, exit 0, the levels in place', async () => {
    const some = await skus();
    expect(some.length).toBe(8);
    const file = join(dir, 'levels.csv');
    writeFileSync(file, `sku,stock\n${some.map((s, i) => `${s},${300 + i}`).join('\n')}\n`);
    const res = await runCli(['inventory', 'import', file], env);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/^Imported 8 rows: 8 stock movements, \d+ products changed \(job [0-9a-f-]{36}\)\.\n$/);
    const progress = jsonLines(res.stderr).filter((l) => l.task === 'stock import job');
    expect(progress.some((l) => typeof l.progress?.total === 'number')).toBe(true);
    const now = await levels();
    for (const [i, s] of some.entries()) expect(now[s]).toBe(300 + i);
  });

  it('--no-wait queues the job; inventory job shows it and --wait runs it to its end', async () => {
    const some = await skus();
    const file = join(dir, 'later.csv');
    writeFileSync(file, `sku,stock\n${some.map((s, i) => `${s},${400 + i}`).join('\n')}\n`);
    const queued = await runCli(['inventory', 'import', file, '--no-wait'], env);
    expect(queued.code, queued.stderr).toBe(0);
    const id = /Import job ([0-9a-f-]{36}) queued \(8 rows\)/.exec(queued.stdout)?.[1];
    expect(id, queued.stdout).toBeDefined();
    expect((await levels())[some[0]!]).toBe(300);
    const shown = await runCli(['inventory', 'job', id!], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ id, status: 'queued', rows_total: 8, created_by: { kind: 'cli' } });
    const waited = await runCli(['inventory', 'job', id!, '--wait'], env);
    expect(waited.code, waited.stderr).toBe(0);
    expect(waited.stdout).toContain(`Imported 8 rows: 8 stock movements`);
    expect((await levels())[some[0]!]).toBe(400);
  });

  it('a bad row fails the job naming its line, exit 1, nothing written', async () => {
    const some = await skus();
    const before = await levels();
    const file = join(dir, 'bad.csv');
    writeFileSync(file, `sku,stock\n${some[0]},1\n${some[1]},-1\nNO-SUCH-SKU,2\n`);
    const res = await runCli(['inventory', 'import', file], env);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('failed: 1 invalid row(s) in the CSV. Nothing was imported.');
    expect(res.stderr).toContain('  line 3: stock must be a non-negative whole number');
    expect(await levels()).toEqual(before);
  });
});
