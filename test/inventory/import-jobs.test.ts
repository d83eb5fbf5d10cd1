/**
 * Decision 0060: a stock import over IMPORT_JOB_ROWS rows is answered 202 with a job, run in the
 * background one job at a time per store, polled for its progress; the rest of a store's jobs wait
 * visibly, past IMPORT_JOB_QUEUE they are refused 429 with Retry-After; a write during a job is not
 * held behind it; a job whose process stopped mid-run is resumed after its last committed step and
 * says so; a bad row fails the job naming its line with nothing written; a keyed retry answers the
 * same job; a job is its store's. Thresholds and intervals are shrunk through configuration.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import pg from 'pg';
import {
  restAfterStep,
  setImportJobRestHook,
  setImportJobStepHook,
  startImportJobRunner,
  type ImportJobRunner,
} from '../../src/inventory/import-job-runner.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { createStore, setStoreStatus } from '../../src/stores/store.service.ts';
import { claimJob } from '../../src/inventory/import-job.repository.ts';
import { asPlatform, inStore } from '../../src/db/store-scope.ts';

const WAIT = { timeout: 60_000, interval: 20 };

/** Latches not yet opened: opened after each test, so a failed test leaves no job held. */
const latches: (() => void)[] = [];

/** A latch a test holds a job at and lets go of. */
function latch() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  latches.push(open);
  return { opened, open };
}

describe.each(backends)('import jobs (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };
  const runners: ImportJobRunner[] = [];
  const env = {
    ...UNLIMITED,
    IMPORT_JOB_ROWS: '3',
    STOCK_IMPORT_STEP_ROWS: '2',
    IMPORT_JOB_POLL_MS: '20',
    IMPORT_JOB_LEASE_MS: '1500',
    IMPORT_JOB_QUEUE: '3',
    // Off by default; on here, so its rests are seen (and a few ms of rest between the other tests' steps on PostgreSQL).
    IMPORT_JOB_REST_PERCENT: '100',
  };

  beforeAll(async () => {
    t = await buildTestApp(backend, env);
    admin = await t.auth(['admin']);
  });
  afterEach(async () => {
    setImportJobStepHook(undefined);
    setImportJobRestHook(undefined);
    for (const open of latches.splice(0)) open();
    await Promise.all(runners.splice(0).map((r) => r.stop()));
  });
  afterAll(async () => t?.close());

  const db = () => t.ctx.database.db;
  const count = async (table: string) => (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(db())).rows[0]!.n;
  const stockOf = async (id: string) => (await sql<{ stock: number }>`SELECT stock FROM products WHERE id = ${id}::uuid`.execute(db())).rows[0]!.stock;
  const runner = () => {
    const r = startImportJobRunner(t.ctx);
    runners.push(r);
    return r;
  };
  const submit = (csv: string, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url: '/admin/api/v1/inventory/import', headers: { ...admin, 'content-type': 'text/csv', ...headers }, payload: csv });
  const job = async (id: string, auth = admin) => {
    const answer = await t.app.inject({ method: 'GET', url: `/admin/api/v1/inventory/import-jobs/${id}`, headers: auth });
    expect(answer.statusCode, answer.body).toBe(200);
    return answer.json().data;
  };
  const ended = async (id: string) => {
    let last: any;
    await vi.waitFor(async () => {
      last = await job(id);
      expect(['succeeded', 'failed']).toContain(last.status);
    }, WAIT);
    return last;
  };
  /** `n` products and a CSV setting each one's stock to 100 + its index. */
  const productsAndCsv = async (n: number) => {
    const products = [];
    for (let i = 0; i < n; i++) products.push(await aProduct(db(), { stock: 1 }));
    const csv = `sku,stock\n${products.map((p, i) => `${p.sku},${100 + i}`).join('\n')}\n`;
    return { products, csv };
  };

  it('answers a large import 202 with a job that reaches succeeded with its counts and the data in place; a small one stays synchronous', async () => {
    const { products, csv } = await productsAndCsv(7);
    const movements = await count('stock_movements');
    const accepted = await submit(csv);
    expect(accepted.statusCode, accepted.body).toBe(202);
    const queued = accepted.json().data;
    expect(queued).toMatchObject({ status: 'queued', rows_total: 7, rows_done: 0, result: null, queue_position: 0, created_by: { name: 'test' } });
    expect(accepted.headers.location).toBe(`/admin/api/v1/inventory/import-jobs/${queued.id}`);
    // Nothing runs it until a runner does: the request did not import.
    expect(await count('stock_movements')).toBe(movements);
    runner();
    const done = await ended(queued.id);
    expect(done).toMatchObject({ status: 'succeeded', rows_total: 7, rows_done: 7, result: { rows: 7, movements: 7, products: 7 }, error: null, attempts: 1 });
    // Times as every answer of the API gives them: UTC with microseconds and a Z.
    for (const key of ['created_at', 'started_at', 'finished_at', 'updated_at']) expect(done[key], key).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    for (const [i, p] of products.entries()) expect(await stockOf(p.id)).toBe(100 + i);
    expect(await count('stock_movements')).toBe(movements + 7);
    // The CSV is not kept once the job ended.
    expect((await sql<{ body: string | null }>`SELECT body FROM import_jobs WHERE id = ${queued.id}::uuid`.execute(db())).rows[0]!.body).toBeNull();
    const small = await submit(`sku,stock\n${products[0]!.sku},5\n`);
    expect(small.statusCode, small.body).toBe(201);
    expect(small.json().data).toEqual({ rows: 1, movements: 1, products: 1 });
  });

  it('queues the jobs submitted while one runs, visibly and in order, and refuses one past IMPORT_JOB_QUEUE with 429 and Retry-After', async () => {
    const held = latch();
    const reached = latch();
    setImportJobStepHook(async () => {
      reached.open();
      await held.opened;
    });
    const imports = await Promise.all([productsAndCsv(4), productsAndCsv(4), productsAndCsv(4), productsAndCsv(4)]);
    runner();
    const first = (await submit(imports[0]!.csv)).json().data;
    await reached.opened;
    const second = await submit(imports[1]!.csv);
    const third = await submit(imports[2]!.csv);
    expect([second.statusCode, third.statusCode]).toEqual([202, 202]);
    expect((await job(first.id)).status).toBe('running');
    expect(await job(second.json().data.id)).toMatchObject({ status: 'queued', queue_position: 1 });
    expect(await job(third.json().data.id)).toMatchObject({ status: 'queued', queue_position: 2 });
    const list = await t.app.inject({ method: 'GET', url: '/admin/api/v1/inventory/import-jobs?status=waiting', headers: admin });
    expect(list.json().data.map((j: { id: string; status: string }) => [j.id, j.status])).toEqual([
      [third.json().data.id, 'queued'],
      [second.json().data.id, 'queued'],
      [first.id, 'running'],
    ]);
    const jobs = await count('import_jobs');
    const refused = await submit(imports[3]!.csv);
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.headers['retry-after']).toBe('60');
    expect(refused.json().detail).toContain('IMPORT_JOB_QUEUE');
    expect(await count('import_jobs')).toBe(jobs);
    held.open();
    for (const id of [first.id, second.json().data.id, third.json().data.id]) expect((await ended(id)).status).toBe('succeeded');
    for (const { products } of imports.slice(0, 3)) for (const [i, p] of products.entries()) expect(await stockOf(p.id)).toBe(100 + i);
  });

  it('answers a small write on a product of the import while the job is still running', async () => {
    const held = latch();
    const reached = latch();
    setImportJobStepHook(async () => {
      reached.open();
      await held.opened;
    });
    const { products, csv } = await productsAndCsv(6);
    runner();
    const submitted = (await submit(csv)).json().data;
    await reached.opened;
    // A product of the step just committed: neither its row nor the embedded database's one
    // connection is held by the job between its steps.
    const first = products[0]!;
    const adjustment = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/inventory/adjustments',
      headers: admin,
      payload: { product_id: first.id, quantity_change: 3 },
    });
    expect(adjustment.statusCode, adjustment.body).toBe(201);
    const during = await job(submitted.id);
    expect(during.status).toBe('running');
    expect(during.rows_done).toBeLessThan(during.rows_total);
    held.open();
    expect((await ended(submitted.id)).status).toBe('succeeded');
    // The adjustment came after the first step had set that product's level.
    expect(await stockOf(first.id)).toBe(103);
    for (const [i, p] of products.slice(1).entries()) expect(await stockOf(p.id)).toBe(101 + i);
  });

  it('resumes a job whose process stopped mid-run after its last committed step, and says so', async () => {
    const held = latch();
    const reached = latch();
    let steps = 0;
    setImportJobStepHook(async () => {
      steps += 1;
      if (steps === 1) {
        reached.open();
        await held.opened;
      }
    });
    const { products, csv } = await productsAndCsv(6);
    const movements = await count('stock_movements');
    const killed = startImportJobRunner(t.ctx);
    const submitted = (await submit(csv)).json().data;
    await reached.opened;
    // As a killed process: its hold is no longer renewed, nothing more is written by it.
    killed.abandon();
    expect(await job(submitted.id)).toMatchObject({ status: 'running', rows_done: 2 });
    // A sale after the first step committed: a resumed job leaves that product alone (a job run
    // again from its first row would set it back to the CSV's level).
    const sold = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/inventory/adjustments',
      headers: admin,
      payload: { product_id: products[0]!.id, quantity_change: -3 },
    });
    expect(sold.statusCode, sold.body).toBe(201);
    runner();
    await vi.waitFor(async () => expect((await job(submitted.id)).attempts).toBe(2), WAIT);
    held.open();
    const done = await ended(submitted.id);
    expect(done).toMatchObject({ status: 'succeeded', rows_done: 6, attempts: 2, result: { rows: 6, movements: 6, products: 6 } });
    expect(done.notes).toHaveLength(1);
    expect(done.notes[0]).toContain('stopped (killed or cut off from the database) after 2 of 6 rows');
    expect(done.notes[0]).toContain('the job resumes after them');
    // Every row applied once: the resumed run skipped the step already committed.
    expect(await count('stock_movements')).toBe(movements + 6 + 1);
    expect(await stockOf(products[0]!.id)).toBe(97);
    for (const [i, p] of products.slice(1).entries()) expect(await stockOf(p.id)).toBe(101 + i);
  });

  it('fails a job with a bad row naming its line, nothing written; a bad header is refused 400 before any job', async () => {
    const { products, csv } = await productsAndCsv(5);
    const movements = await count('stock_movements');
    runner();
    const bad = `${csv}${products[0]!.sku},-4\nNO-SUCH-SKU,3\n`;
    const submitted = (await submit(bad)).json().data;
    const failed = await ended(submitted.id);
    expect(failed).toMatchObject({ status: 'failed', rows_done: 0, result: null });
    expect(failed.error.code).toBe('invalid_parameter');
    expect(failed.error.detail).toContain('Nothing was imported.');
    expect(failed.error.errors).toEqual([{ param: 'line 7', message: 'stock must be a non-negative whole number' }]);
    expect(await count('stock_movements')).toBe(movements);
    for (const p of products) expect(await stockOf(p.id)).toBe(1);
    const unknown = (await submit(`${csv}NO-SUCH-SKU,3\n`)).json().data;
    const refused = await ended(unknown.id);
    expect(refused.error.errors).toEqual([{ param: 'line 7', message: "unknown sku 'NO-SUCH-SKU'" }]);
    expect(await count('stock_movements')).toBe(movements);

    const jobs = await count('import_jobs');
    const header = await submit('sku,price\nA,1\nB,2\nC,3\nD,4\n');
    expect(header.statusCode).toBe(400);
    expect(header.json().errors).toEqual([{ param: 'body', message: expect.stringContaining('`sku` and exactly one of `stock` or `quantity_change`') }]);
    expect(await count('import_jobs')).toBe(jobs);
  });

  it('answers the same Idempotency-Key with the same job, stored once', async () => {
    const { csv } = await productsAndCsv(4);
    const jobs = await count('import_jobs');
    const first = await submit(csv, { 'idempotency-key': `import-job-${backend}` });
    const again = await submit(csv, { 'idempotency-key': `import-job-${backend}` });
    expect(first.statusCode).toBe(202);
    expect(again.statusCode).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().data.id).toBe(first.json().data.id);
    expect(await count('import_jobs')).toBe(jobs + 1);
    runner();
    expect((await ended(first.json().data.id)).status).toBe('succeeded');
  });

  it('queues a small import behind the jobs waiting, so imports apply in the order sent', async () => {
    const { products, csv } = await productsAndCsv(4);
    const held = latch();
    const reached = latch();
    setImportJobStepHook(async () => {
      reached.open();
      await held.opened;
    });
    runner();
    const first = (await submit(csv)).json().data;
    await reached.opened;
    // Its first step (products 0 and 1) is committed; products 2 and 3 are still to come.
    const small = await submit(`sku,stock\n${products[3]!.sku},7\n`);
    expect(small.statusCode, small.body).toBe(202);
    expect(small.json().data).toMatchObject({ status: 'queued', rows_total: 1, queue_position: 1 });
    expect(await stockOf(products[3]!.id)).toBe(1);
    held.open();
    expect((await ended(first.id)).status).toBe('succeeded');
    expect((await ended(small.json().data.id)).status).toBe('succeeded');
    // Sent last, applied last: the large import's later step did not set it back.
    expect(await Promise.all(products.map((p) => stockOf(p.id)))).toEqual([100, 101, 102, 7]);
  });

  it('waits while its store is suspended: the next step is refused and the job queued with a note, not started again until the store is resumed', async () => {
    const { products, csv } = await productsAndCsv(6);
    const held = latch();
    const reached = latch();
    let steps = 0;
    setImportJobStepHook(async () => {
      steps += 1;
      if (steps > 1) return;
      reached.open();
      await held.opened;
    });
    runner();
    const submitted = (await submit(csv)).json().data;
    await reached.opened;
    // The first step (2 rows) is committed; the platform suspends the store before the second.
    const row = async () =>
      (
        await sql<{ store_id: string; status: string; rows_done: number; notes: string[]; attempts: number }>`
        SELECT store_id::text, status, rows_done, notes, attempts FROM import_jobs WHERE id = ${submitted.id}::uuid`.execute(db())
      ).rows[0]!;
    const store = (await row()).store_id;
    await setStoreStatus(db(), store, 'suspended');
    try {
      held.open();
      await vi.waitFor(async () => expect((await row()).status).toBe('queued'), WAIT);
      const paused = await row();
      expect(paused.rows_done).toBe(2);
      expect(paused.notes.join('\n')).toMatch(/Paused after 2 of 6 rows: the store was suspended/);
      // The refused step wrote nothing: only the first step's rows moved.
      expect(await Promise.all(products.map((p) => stockOf(p.id)))).toEqual([100, 101, 1, 1, 1, 1]);
      // No runner may start a suspended store's job (the claim skips it).
      expect(await asPlatform(() => claimJob(db(), 'a probe', store))).toBeUndefined();
    } finally {
      await setStoreStatus(db(), store, 'active');
    }
    const done = await ended(submitted.id);
    expect(done).toMatchObject({ status: 'succeeded', rows_done: 6, attempts: 2 });
    expect(await Promise.all(products.map((p) => stockOf(p.id)))).toEqual([100, 101, 102, 103, 104, 105]);
  });

  it('rests between steps while another session of the database is busy, as long as the step took (PostgreSQL); the embedded database never rests', async () => {
    const rests: number[] = [];
    setImportJobRestHook((ms) => rests.push(ms));
    const { products, csv } = await productsAndCsv(8);
    // Another session busy for the whole job: a statement that sleeps until it is cancelled.
    const other = backend === 'postgres' ? new pg.Client({ connectionString: t.database.url }) : undefined;
    let otherPid = 0;
    if (other) {
      await other.connect();
      otherPid = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      void other.query('SELECT pg_sleep(600)').catch(() => {});
      await vi.waitFor(async () => {
        const { rows } = await sql<{ state: string }>`SELECT state FROM pg_stat_activity WHERE pid = ${otherPid}`.execute(db());
        expect(rows[0]?.state).toBe('active');
      }, WAIT);
    }
    try {
      const submitted = (await submit(csv)).json().data;
      runner();
      expect(await ended(submitted.id)).toMatchObject({ status: 'succeeded', rows_done: 8 });
    } finally {
      if (other) {
        await sql`SELECT pg_cancel_backend(${otherPid})`.execute(db());
        await other.end();
      }
    }
    expect(await Promise.all(products.map((p) => stockOf(p.id)))).toEqual([100, 101, 102, 103, 104, 105, 106, 107]);
    // Four steps of two rows: a rest after each but the last, while the other session was busy.
    if (backend === 'postgres') {
      expect(rests).toHaveLength(3);
      for (const ms of rests) expect(ms).toBeGreaterThan(0);
    } else expect(rests).toEqual([]);
  });

  it('rests IMPORT_JOB_REST_PERCENT of the step, at most a second, only when others are busy', () => {
    expect(restAfterStep(80, 100, true)).toBe(80);
    expect(restAfterStep(80, 50, true)).toBe(40);
    expect(restAfterStep(80, 100, false)).toBe(0);
    expect(restAfterStep(80, 0, true)).toBe(0);
    expect(restAfterStep(5000, 100, true)).toBe(1000);
  });

  it("is its store's: another store's key gets 404 and does not list it", async () => {
    const { csv } = await productsAndCsv(4);
    const mine = (await submit(csv)).json().data;
    runner();
    await ended(mine.id);
    const other = (await createStore(db(), { name: `Other ${backend}` })).id;
    const theirs = { authorization: `Bearer ${(await inStore(other, () => createToken(db(), { name: 'other', scopes: ['admin'] }))).token}` };
    const get = await t.app.inject({ method: 'GET', url: `/admin/api/v1/inventory/import-jobs/${mine.id}`, headers: theirs });
    expect(get.statusCode).toBe(404);
    const list = await t.app.inject({ method: 'GET', url: '/admin/api/v1/inventory/import-jobs', headers: theirs });
    expect(list.statusCode).toBe(200);
    expect(list.json().data).toEqual([]);
  });
});
