/**
 * The worker's claims and its `nextDueAt` read the delivery queue by its indexes however the
 * deliveries are spread over the stores (they read by index only, db/index-reads.ts),
 * as the poll's fan-out does (poller-skew.test.ts). With one store holding nearly every unfinished
 * delivery, the statistics say a store id matches nearly every row, and PostgreSQL planned the probes
 * of another store's endpoints as sequential scans of the whole table expected to stop at a first
 * match: the half-open endpoint's probe in every claim, the FIFO line's head in every `nextDueAt`
 * (2.5 ms over 20,000 rows, a scan for each store with a FIFO endpoint, against 0.02 ms by the
 * index), the probe delivery's event in the claim.
 *
 * Each statement's plan is read the way it runs: its statements are recorded, then the planner
 * settings they ran with and an EXPLAIN of each are run in one transaction.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { planAsRun, recordStatements, settingsOf, wholeReadsOf, type RecordedStatement } from '../helpers/plan-as-run.ts';
import type { Database } from '../../src/db/schema.ts';
import { createStore } from '../../src/stores/store.service.ts';
import { asPlatform } from '../../src/db/store-scope.ts';
import { claimDueDeliveries, claimFifoBatches, nextDueAt } from '../../src/webhooks/delivery-queue.ts';
import { isoFromMillis } from '../../src/shared/time.ts';

/** A's deliveries: enough that the planner picks sequential scans without the settings (seen failing so). */
const BACKLOG = 20_000;
const BREAKER = { threshold: 10, pauseMs: 60_000 };
const QUEUE = ['webhook_deliveries', 'events'];

describe.each(backends)('claims with one store holding nearly every delivery (%s)', (backend) => {
  let t: TestApp;
  let db: Kysely<Database>;
  const now = Date.now();
  let b: { unordered: string; fifo: string };

  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = t.database.db;
  });
  afterAll(async () => {
    await t?.close();
  });

  async function anEndpoint(store: string, order: 'unordered' | 'fifo', breaker: { failures: number; pausedUntil: number } | null = null) {
    const id = randomUUID();
    await asPlatform(() =>
      sql`INSERT INTO webhook_endpoints (id, store_id, url, secret, created_at, updated_at, delivery_order, consecutive_failures, paused_until)
        VALUES (${id}, ${store}::uuid, 'http://127.0.0.1:9/skew', 'whsec_test', ${isoFromMillis(now - 3_600_000)}::timestamptz, now(), ${order},
          ${breaker?.failures ?? 0}, ${breaker ? isoFromMillis(breaker.pausedUntil) : null}::timestamptz)`.execute(db),
    );
    return id;
  }

  /** `n` due deliveries to `endpoint` (first attempts and retries), each of its own event; `leased`: held by another worker. */
  async function dueDeliveries(store: string, endpoint: string, n: number, leased = false) {
    await asPlatform(async () => {
      await sql`INSERT INTO events (id, store_id, type, resource_type, resource_id, data, created_at)
        SELECT md5(${endpoint} || g)::uuid, ${store}::uuid, 'product.updated', 'product', g::text, '{}'::jsonb, ${isoFromMillis(now - 600_000)}::timestamptz
        FROM generate_series(1, ${n}) g`.execute(db);
      await sql`INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, attempt_count, next_attempt_at, created_at, updated_at,
          locked_by, locked_at, locked_until)
        SELECT gen_random_uuid(), ${store}::uuid, md5(${endpoint} || g)::uuid, 'product.updated', ${endpoint},
          CASE WHEN g % 2 = 0 THEN 'failed' ELSE 'pending' END, g % 2, ${isoFromMillis(now - 600_000)}::timestamptz, now(), now(),
          ${leased ? 'another worker' : null}, ${leased ? isoFromMillis(now - 1000) : null}::timestamptz, ${leased ? isoFromMillis(now + 60_000) : null}::timestamptz
        FROM generate_series(1, ${n}) g`.execute(db);
    });
  }

  /** The reads of `statements` (those over the queue) that go through a whole table or a bitmap. */
  async function wholeReads(statements: readonly RecordedStatement[]): Promise<string[]> {
    const settings = settingsOf(statements);
    expect(settings, 'the statements ran with the planner settings').toBeTruthy();
    const found: string[] = [];
    for (const statement of statements.filter((s) => s !== settings && /webhook_deliveries/.test(s.sql))) {
      for (const read of wholeReadsOf(await planAsRun(db, settings, statement), QUEUE)) found.push(`${read} in ${statement.sql.trim().slice(0, 40)}…`);
    }
    return found;
  }

  beforeAll(async () => {
    // Store A: a half-open endpoint (its breaker's pause over) and one whose rows another worker
    // holds, half the backlog each. Store B: one due delivery to an endpoint, one to a FIFO one.
    const a = await createStore(db, { name: `a ${randomUUID()}` });
    const store = await createStore(db, { name: `b ${randomUUID()}` });
    const halfOpen = await anEndpoint(a.id, 'unordered', { failures: BREAKER.threshold, pausedUntil: now - 1000 });
    const held = await anEndpoint(a.id, 'unordered');
    await dueDeliveries(a.id, halfOpen, BACKLOG / 2);
    await dueDeliveries(a.id, held, BACKLOG / 2, true);
    b = { unordered: await anEndpoint(store.id, 'unordered'), fifo: await anEndpoint(store.id, 'fifo') };
    await dueDeliveries(store.id, b.unordered, 1);
    await dueDeliveries(store.id, b.fifo, 1);
    // Outside any store's scope: as the tables' owner (a store's role may not analyse them).
    await sql`ANALYZE webhook_deliveries`.execute(db);
    await sql`ANALYZE events`.execute(db);
    await sql`ANALYZE webhook_endpoints`.execute(db);
  });

  it("nextDueAt reads each endpoint's due rows by the index", async () => {
    const { result, statements } = await recordStatements(() => nextDueAt(db, now));
    expect(result).toBeLessThanOrEqual(now);
    expect(await wholeReads(statements)).toEqual([]);
  });

  it("a claim probes every store's endpoints by the index, the half-open one's probe included", async () => {
    const { result, statements } = await recordStatements(() =>
      claimDueDeliveries(db, { workerId: 'skew', now, leaseMs: 60_000, limit: 64, freeSlots: new Map(), endpointCapacity: 8, breaker: BREAKER }),
    );
    expect(result.filter((d) => d.endpointId === b.unordered)).toHaveLength(1);
    expect(await wholeReads(statements)).toEqual([]);
  });

  it("a FIFO claim reads each line's rows by the index", async () => {
    const { result, statements } = await recordStatements(() =>
      claimFifoBatches(db, { workerId: 'skew', now, leaseMs: 60_000, limit: 8, holding: [], breaker: BREAKER }),
    );
    expect(result.map((batch) => batch.endpointId)).toEqual([b.fifo]);
    expect(await wholeReads(statements)).toEqual([]);
  });
});
