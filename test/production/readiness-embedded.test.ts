/**
 * /readyz on the embedded database tells busy from gone: during a large import it
 * answered 503 "The database is unreachable." to 34 of 37 polls, its check queued behind the
 * import's steps for more than its 2 s, and an orchestrator would have restarted a healthy service.
 * The database is held here the way an import holds it, deterministically: a transaction keeps its
 * one connection while /readyz is asked. Busy with a thread that lives and made progress within
 * READINESS_BUSY_MS is ready (200); held past READINESS_BUSY_MS (shrunk below the check's 2 s, so no
 * timing is assumed) or a thread that has stopped is 503. Embedded only: PostgreSQL has a pool, and
 * a server that does not answer there is unreachable as before (database-faults.test.ts).
 */
import type { Worker } from 'node:worker_threads';
import { sql, type Kysely } from 'kysely';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/schema.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

// Every worker thread started (the embedded database's among them), so one can be stopped from
// outside as a crash would stop it: the same Worker class, only recorded.
const workers = vi.hoisted(() => [] as { worker: Worker; module: string }[]);
vi.mock('node:worker_threads', async (importOriginal) => {
  const original = await importOriginal<typeof import('node:worker_threads')>();
  class RecordedWorker extends original.Worker {
    constructor(...args: ConstructorParameters<typeof original.Worker>) {
      super(...args);
      workers.push({ worker: this, module: String(args[0]) });
    }
  }
  return { ...original, default: { ...original, Worker: RecordedWorker }, Worker: RecordedWorker };
});

/** Runs `during` while a transaction holds the embedded database's one connection. */
async function whileHeld<T>(db: Kysely<Database>, during: () => Promise<T>): Promise<T> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const transaction = db.transaction().execute(async (trx) => {
    await sql`SELECT 1`.execute(trx);
    held();
    await released;
  });
  await holding;
  try {
    return await during();
  } finally {
    release();
    await transaction;
  }
}

describe('/readyz on the embedded database', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('is ready while other work holds the database and its thread makes progress', async () => {
    t = await buildTestApp('pglite');
    const app = t.app;
    const during = await whileHeld(t.database.db, () => app.inject({ method: 'GET', url: '/readyz' }));
    expect(during.statusCode, during.body).toBe(200);
    expect(during.json()).toEqual({ status: 'ready', database: 'ok', migrations: 'current' });
    const after = await app.inject({ method: 'GET', url: '/readyz' });
    expect(after.statusCode).toBe(200);
  });

  it('is 503 once the database has answered nothing for READINESS_BUSY_MS', async () => {
    t = await buildTestApp('pglite', { READINESS_BUSY_MS: '1000' });
    const app = t.app;
    const during = await whileHeld(t.database.db, () => app.inject({ method: 'GET', url: '/readyz' }));
    expect(during.statusCode).toBe(503);
    expect(during.headers['retry-after']).toBe('2');
    expect(during.json().detail).toMatch(/^The embedded database has answered no statement for \d+\.\d s \(READINESS_BUSY_MS=1000\)\.$/);
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
  });

  it('is 503 once the database thread has stopped', async () => {
    const built = await buildTestApp('pglite');
    try {
      expect((await built.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
      const stopped = new Promise<string>((resolve) => built.database.storage.onFatal(resolve));
      const thread = workers.filter(({ module }) => /pglite-worker\.[jt]s$/.test(module)).at(-1)!;
      await thread.worker.terminate();
      expect(await stopped).toMatch(/the embedded database's thread exited/);
      const response = await built.app.inject({ method: 'GET', url: '/readyz' });
      expect(response.statusCode).toBe(503);
      expect(response.json().detail).toMatch(/the embedded database's thread exited/);
      expect(built.database.activity!()).toMatchObject({ alive: false });
    } finally {
      // Not built.close(): its documents check needs the database that was just stopped.
      await built.app.close();
      await built.database.close();
    }
  });
});
