/**
 * Exactly-once keyed writes and an audit entry for every committed admin write (decision 0027), on the embedded default and PostgreSQL, at each step of a write (claimed, handled,
 * audited, answer_stored, committed; src/admin/admin-write-transaction.ts):
 *  - the process is SIGKILLed at the step (a child running the service, killing itself through the
 *    step hook): the retry with the same Idempotency-Key on a restarted service, at once (no lease to
 *    wait for), either runs the write once (killed before the commit) or replays the stored answer
 *    (killed after it);
 *  - the write's connection is terminated at the step (PostgreSQL: `pg_terminate_backend` of the
 *    request transaction's backend; embedded: the step fails with the error a lost connection gives,
 *    57P01): the request is answered 503 before the commit and the retry writes once; after the
 *    commit the answer is the write's;
 *  - the same without a key: a write is either absent or present with its audit entry.
 * Every case ends with exactly one record per key and exactly one audit entry per committed record.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { resolve } from 'node:path';
import { request } from 'undici';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { openDatabase } from '../../src/db/database.ts';
import type { Database } from '../../src/db/schema.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { setAdminWriteStepHook, type AdminWriteStep } from '../../src/admin/admin-write-transaction.ts';
import { backends, type TestDatabase, drainDeadConnections } from '../helpers/test-database.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';
import { listeningUrl, PROJECT_ROOT, storeForProcesses } from './process-helpers.ts';

const STEPS: AdminWriteStep[] = ['claimed', 'handled', 'audited', 'answer_stored', 'committed'];
const KILL_POINT_SERVER = ['--import', 'tsx', resolve(PROJECT_ROOT, 'test/production/serve-with-kill-point.ts')];

/** Customers named `name`, and the audit entries whose target is each of them. */
async function recordsAndAudit(db: Kysely<Database>, name: string): Promise<{ customers: number; audited: number[] }> {
  const { rows } = await sql<{ id: string; audited: number }>`
    SELECT c.id, (SELECT count(*)::int FROM admin_audit_log a WHERE a.target_id = c.id::text) AS audited
    FROM customers c WHERE c.name = ${name}`.execute(db);
  return { customers: rows.length, audited: rows.map((r) => r.audited) };
}

describe.each(backends)('a keyed write killed at each step (%s)', (backend) => {
  const store = storeForProcesses(backend, 'exactly-once', async (db) => (await createToken(db, { name: 'pos', scopes: ['admin'] })).token);
  const start = (extra: Record<string, string> = {}) => store.start(['serve'], extra, { name: `serve (${backend})`, entry: KILL_POINT_SERVER });
  const createCustomer = (base: string, step: AdminWriteStep) =>
    request(`${base}/admin/api/v1/customers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${store.prepared}`, 'content-type': 'application/json', 'idempotency-key': `kill-${backend}-${step}` },
      body: JSON.stringify({ name: `killed at ${step}` }),
    });

  // Six starts of the service: bounded generously for a loaded machine, never waited on for a guess.
  it('the retry runs the write once or replays its answer, never twice, with its audit entry', { timeout: 600_000 }, async () => {
    // One process per step, each killed by its first keyed write at that step: the client gets no answer.
    for (const step of STEPS) {
      const proc = start({ KILL_AT_ADMIN_WRITE_STEP: step });
      const base = await listeningUrl(proc);
      await expect(createCustomer(base, step)).rejects.toThrow();
      expect(await proc.exited).toBe('SIGKILL');
      expect(proc.output()).toContain(`killing myself at ${step}`);
    }

    // A restarted service: every retry is answered at once (no claim left behind to wait for).
    const proc = start();
    const base = await listeningUrl(proc);
    const answers = new Map<AdminWriteStep, { status: number; replayed: unknown; id: string }>();
    for (const step of STEPS) {
      const res = await createCustomer(base, step);
      const body = (await res.body.json()) as { data: { id: string; name: string } };
      answers.set(step, { status: res.statusCode, replayed: res.headers['idempotent-replayed'], id: body.data.id });
      expect(body.data.name).toBe(`killed at ${step}`);
    }
    // Killed before the commit: nothing was written, the retry ran it. After: the stored answer.
    for (const step of STEPS) {
      expect(answers.get(step), step).toMatchObject({ status: 201, replayed: step === 'committed' ? 'true' : undefined });
    }
    expect(await proc.stop('SIGTERM')).toBe(0);

    await store.withDatabase(async (db) => {
      for (const step of STEPS) {
        expect(await recordsAndAudit(db, `killed at ${step}`), step).toEqual({ customers: 1, audited: [1] });
      }
    });
  });
});

describe.each(backends)('a write whose connection is lost at each step (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };
  let killer: pg.Client | undefined;
  let checker: Kysely<Database>;
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    admin = await t.auth(['admin']);
    if (backend === 'postgres') {
      killer = new pg.Client({ connectionString: (t.ctx.database as TestDatabase).url });
      await killer.connect();
      checker = (await openDatabase({ databaseUrl: (t.ctx.database as TestDatabase).url, poolSize: 1 })).db;
    }
  });
  afterEach(() => setAdminWriteStepHook(undefined));
  afterAll(async () => {
    await killer?.end();
    if (killer) await checker.destroy();
    if (t) await drainDeadConnections(t.ctx.database.db);
    await t?.close();
  });

  /** At `step`, the write's connection goes: terminated on PostgreSQL, the step failing as a lost connection would on PGlite. */
  const loseConnectionAt = (at: AdminWriteStep) => {
    let lost = false;
    let pid: number | undefined;
    setAdminWriteStepHook(async (step, transaction) => {
      // The request transaction's backend, seen while it is open (after the commit it is back in the pool).
      pid = (await transaction.backendPid()) ?? pid;
      if (step !== at || lost) return;
      lost = true;
      if (killer) {
        const { rows } = await killer.query<{ done: boolean }>('SELECT pg_terminate_backend($1) AS done', [pid]);
        expect(rows[0]!.done).toBe(true);
      } else if (step !== 'committed') {
        throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
      }
    });
  };
  const createCustomer = (name: string, key?: string) =>
    t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/customers',
      headers: { ...admin, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      payload: { name },
    });
  /** What a client does: retries a 503 with the same key (a terminated connection may still sit in the pool once). */
  const retryUntilAnswered = async (name: string, key: string) => {
    for (let attempt = 1; ; attempt++) {
      const res = await createCustomer(name, key);
      if (res.statusCode !== 503 || attempt === 5) return res;
    }
  };
  /** Read on a connection of the test's own (the pool may hold the terminated one). */
  const records = (name: string) => recordsAndAudit(killer ? checker : t.ctx.database.db, name);

  for (const step of STEPS) {
    it(`lost at ${step}: ${step === 'committed' ? 'the answer is the write, the retry replays it' : '503, and the retry writes once'}`, async () => {
      const name = `lost at ${step}`;
      const key = `lost-${backend}-${step}`;
      loseConnectionAt(step);
      const first = await createCustomer(name, key);
      if (step === 'committed') {
        expect(first.statusCode).toBe(201);
      } else {
        expect(first.statusCode).toBe(503);
        expect(first.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(first.headers['retry-after']).toBeDefined();
        expect(await records(name)).toEqual({ customers: 0, audited: [] });
      }
      setAdminWriteStepHook(undefined);
      const retry = await retryUntilAnswered(name, key);
      expect(retry.statusCode).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe(step === 'committed' ? 'true' : undefined);
      if (step === 'committed') expect(retry.body).toBe(first.body);
      expect(await records(name)).toEqual({ customers: 1, audited: [1] });
    });
  }

  it('without a key, a write lost before its audit entry is not committed: every committed write is audited', async () => {
    for (const step of ['handled', 'audited'] as const) {
      const name = `unkeyed, lost at ${step}`;
      loseConnectionAt(step);
      expect((await createCustomer(name)).statusCode).toBe(503);
      expect(await records(name)).toEqual({ customers: 0, audited: [] });
    }
    setAdminWriteStepHook(undefined);
    // Over every admin write of this file, no committed customer lacks its entry.
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM customers c
      WHERE NOT EXISTS (SELECT 1 FROM admin_audit_log a WHERE a.target_id = c.id::text)`.execute(killer ? checker : t.ctx.database.db);
    expect(rows[0]!.n).toBe(0);
  });
});
