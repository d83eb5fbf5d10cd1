/**
 * Claims are fair across stores (decision 0051): a claim takes due deliveries in rounds
 * across stores before it takes them in rounds across one store's endpoints, so a store with one due
 * delivery is in the next claim whatever another store's backlog, and another store's retries never
 * go before a store's first attempt. Driven statement by statement (no worker, no clock but the
 * rows' own): each case fails with claims taken oldest first over every store.
 * A claim and `nextDueAt` follow the work due (decision 0065): they read no endpoint of a store
 * without unfinished deliveries, and when more stores than a claim's limit have due work, the
 * claim serves the stores after its starting point, round to the lowest.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import type { Database } from '../../src/db/schema.ts';
import { createStore } from '../../src/stores/store.service.ts';
import { asPlatform } from '../../src/db/store-scope.ts';
import { claimDueDeliveries, nextDueAt, type ClaimOptions } from '../../src/webhooks/delivery-queue.ts';
import { isoFromMillis } from '../../src/shared/time.ts';

const BREAKER = { threshold: 10, pauseMs: 60_000 };

/** Instants a second apart from `start` on, each call the next. */
function clockFrom(start: number): () => number {
  let at = start;
  return () => {
    at += 1000;
    return at;
  };
}

describe.each(backends)('fair claims across stores (%s)', (backend) => {
  let t: TestApp;
  let db: Kysely<Database>;
  const now = Date.now();

  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = t.database.db;
  });
  afterAll(async () => {
    await t?.close();
  });

  const platform = <T>(statement: () => Promise<T>): Promise<T> => asPlatform(statement);

  /** A new store with `endpoints` enabled endpoints (those of earlier cases stop competing). */
  async function aStore(name: string, endpoints: number): Promise<{ id: string; endpoints: string[] }> {
    const store = await createStore(db, { name: `${name} ${randomUUID()}` });
    const ids: string[] = [];
    await platform(async () => {
      for (let i = 0; i < endpoints; i++) {
        const id = randomUUID();
        await sql`INSERT INTO webhook_endpoints (id, store_id, url, secret, created_at, updated_at)
          VALUES (${id}, ${store.id}::uuid, ${`http://127.0.0.1:9/${name}/${i}`}, 'whsec_test', ${isoFromMillis(now - 3_600_000)}::timestamptz, now())`.execute(
          db,
        );
        ids.push(id);
      }
    });
    return { id: store.id, endpoints: ids };
  }

  /** A due delivery to `endpoint` of `store`, due since `dueAt` (a first attempt, or a retry after `failures`). */
  async function aDelivery(store: string, endpoint: string, dueAt: number, failures = 0): Promise<string> {
    const id = randomUUID();
    const eventId = randomUUID();
    await platform(async () => {
      await sql`INSERT INTO events (id, store_id, type, resource_type, resource_id, data, created_at)
        VALUES (${eventId}, ${store}::uuid, 'product.updated', 'product', ${randomUUID()}, '{}'::jsonb, ${isoFromMillis(dueAt)}::timestamptz)`.execute(db);
      await sql`INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, attempt_count, next_attempt_at, created_at, updated_at)
        VALUES (${id}, ${store}::uuid, ${eventId}, 'product.updated', ${endpoint}, ${failures > 0 ? 'failed' : 'pending'}, ${failures},
          ${isoFromMillis(dueAt)}::timestamptz, ${isoFromMillis(dueAt)}::timestamptz, ${isoFromMillis(dueAt)}::timestamptz)`.execute(db);
    });
    return id;
  }

  const claim = (limit: number, extra: Partial<ClaimOptions> = {}) =>
    platform(() =>
      claimDueDeliveries(db, {
        workerId: 'worker',
        now,
        leaseMs: 60_000,
        limit,
        freeSlots: new Map(),
        endpointCapacity: 50,
        breaker: BREAKER,
        ...extra,
      }),
    );

  beforeAll(async () => {
    await platform(() => sql`UPDATE webhook_endpoints SET enabled = false WHERE store_id IS NOT NULL`.execute(db));
  });

  it("a store with one due delivery is in the next claim, whatever another store's backlog and number of endpoints", async () => {
    // Store A: 6 endpoints × 5 due deliveries, all older than store B's one, created last.
    const a = await aStore('A', 6);
    const ofA = new Set<string>();
    const later = clockFrom(now - 600_000);
    for (let k = 0; k < 5; k++) for (const endpoint of a.endpoints) ofA.add(await aDelivery(a.id, endpoint, later()));
    const b = await aStore('B', 1);
    const ofB = await aDelivery(b.id, b.endpoints[0]!, now - 1000);

    // A claim of 4, smaller than A's backlog and than its endpoints' first round (6 rows, all older).
    const first = await claim(4);
    expect(first.map((d) => d.id)).toContain(ofB);
    expect(first.filter((d) => ofA.has(d.id))).toHaveLength(3);
    expect(first.find((d) => d.id === ofB)).toMatchObject({ storeId: b.id, endpointId: b.endpoints[0] });
    // A's rows still go in the order they had: its endpoints' first round, oldest first.
    expect(first.filter((d) => ofA.has(d.id)).map((d) => d.endpointId)).toEqual(a.endpoints.slice(0, 3));
    // The rest of A's backlog follows in later claims.
    const rest = await claim(100);
    expect(rest).toHaveLength(ofA.size - 3);
    expect(rest.every((d) => ofA.has(d.id))).toBe(true);
  });

  it("another store's retries never go before a store's first attempt, however old they are", async () => {
    // Store A: its endpoints keep failing; their retries are due, long before B's first attempt.
    const a = await aStore('A retries', 6);
    const later = clockFrom(now - 600_000);
    for (const endpoint of a.endpoints) for (let k = 0; k < 3; k++) await aDelivery(a.id, endpoint, later(), 2);
    const b = await aStore('B first', 1);
    const ofB = await aDelivery(b.id, b.endpoints[0]!, now - 1000);

    const [only, ...none] = await claim(1);
    expect(none).toEqual([]);
    expect(only?.id).toBe(ofB);
    // A's retries come next, one store round at a time.
    const next = await claim(100);
    expect(next).toHaveLength(18);
  });

  it('the rounds count what each store already has in this worker', async () => {
    // Both stores have due work; C already holds 3 deliveries in this worker, D none: D's first
    // three go before C's first.
    const c = await aStore('C', 1);
    const d = await aStore('D', 3);
    const later = clockFrom(now - 600_000);
    const ofC = [await aDelivery(c.id, c.endpoints[0]!, later()), await aDelivery(c.id, c.endpoints[0]!, later())];
    const ofD: string[] = [];
    for (const endpoint of d.endpoints) ofD.push(await aDelivery(d.id, endpoint, later()));
    const claimed = await claim(3, { held: new Map([[c.endpoints[0]!, 3]]), heldByStore: new Map([[c.id, 3]]) });
    expect(new Set(claimed.map((x) => x.id))).toEqual(new Set(ofD));
    expect((await claim(100)).map((x) => x.id)).toEqual(ofC);
  });

  it('a claim and the next due time read no endpoint of the stores without unfinished deliveries', async () => {
    /**
     * Rows of webhook_endpoints read by `statement`: the session's counts not yet reported, before
     * and after it, in one transaction (they are reported only between transactions).
     */
    const endpointRowsRead = (statement: (trx: Kysely<Database>) => Promise<unknown>) =>
      platform(() =>
        db.transaction().execute(async (trx) => {
          const count = async () =>
            (
              await sql<{ read: number }>`
              SELECT (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int AS read FROM pg_stat_xact_user_tables WHERE relname = 'webhook_endpoints'`.execute(
                trx,
              )
            ).rows[0]?.read ?? 0;
          const before = await count();
          await statement(trx);
          return (await count()) - before;
        }),
      );
    const claimOne = (trx: Kysely<Database>) =>
      // One starting point for both: the walk then crosses the same stores (those of the earlier
      // cases, whose deliveries are leased) before it finds this one.
      claimDueDeliveries(trx, {
        workerId: 'worker',
        now,
        leaseMs: 60_000,
        limit: 1,
        freeSlots: new Map(),
        endpointCapacity: 50,
        breaker: BREAKER,
        startAfter: busy.id,
      });
    const busy = await aStore('busy', 1);
    const later = clockFrom(now - 600_000);
    const first = await aDelivery(busy.id, busy.endpoints[0]!, later());
    const second = await aDelivery(busy.id, busy.endpoints[0]!, later());
    let claimed: string[] = [];
    const nextDueBefore = await endpointRowsRead((trx) => nextDueAt(trx, now));
    const claimBefore = await endpointRowsRead(async (trx) => {
      claimed = (await claimOne(trx)).map((d) => d.id);
    });
    expect(claimed).toEqual([first]);
    // 40 more stores, each with an enabled endpoint and nothing to deliver: walking every enabled
    // endpoint would read 40 more rows.
    for (let i = 0; i < 40; i++) await aStore(`idle ${i}`, 1);
    const nextDueAfter = await endpointRowsRead((trx) => nextDueAt(trx, now));
    const claimAfter = await endpointRowsRead(async (trx) => {
      claimed = (await claimOne(trx)).map((d) => d.id);
    });
    expect(claimed).toEqual([second]);
    expect(nextDueAfter - nextDueBefore).toBeLessThan(10);
    expect(claimAfter - claimBefore).toBeLessThan(10);
  });

  it('when more stores than the limit have due work, a claim serves those after its starting point, round to the lowest', async () => {
    // Three stores with one due first attempt each, the lowest id's the oldest.
    const stores = (await Promise.all([aStore('R1', 1), aStore('R2', 1), aStore('R3', 1)])).sort((x, y) => (x.id < y.id ? -1 : 1));
    const later = clockFrom(now - 600_000);
    const ofStore = new Map<string, string>();
    for (const store of stores) ofStore.set(store.id, await aDelivery(store.id, store.endpoints[0]!, later()));
    const [s1, s2, s3] = stores.map((x) => x.id) as [string, string, string];
    // After s1: s2's (not s1's, the oldest); after s3: round to the lowest, s1's; then s3's.
    expect((await claim(1, { startAfter: s1 })).map((d) => d.storeId)).toEqual([s2]);
    expect((await claim(1, { startAfter: s3 })).map((d) => d.storeId)).toEqual([s1]);
    expect((await claim(1, { startAfter: s1 })).map((d) => d.storeId)).toEqual([s3]);
    expect(await claim(1, { startAfter: s1 })).toEqual([]);
  });
});
