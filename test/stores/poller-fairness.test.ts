/**
 * The event poller is fair across stores (decision 0051, migration 0034): each store is
 * fanned out from its own position, the stores behind in rounds, so store B's next event goes out in
 * the next poll while store A still has thousands of events to fan out — with one position for the
 * whole deployment, B's event waited behind every one of A's. Still: every event of each store
 * once, in its store's (created_at, seq) order, none of another store's endpoints; the scan's position
 * ends at the last event; a new store starts at the scan's position, not at its first event ever.
 * A store with a few events goes in a poll of its own, before a busy store's share (decision 0065).
 * Driven poll by poll (no worker).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aStoreWithEndpoint } from '../helpers/store-fixtures.ts';
import type { Database } from '../../src/db/schema.ts';
import { createStore } from '../../src/stores/store.service.ts';
import { asPlatform, inStore } from '../../src/db/store-scope.ts';
import { readHorizon, runWrite } from '../../src/db/write-clock.ts';
import { appendEvent, appendEventsInOrder } from '../../src/events/event-log.ts';
import { pollEvents, type PollResult } from '../../src/webhooks/event-poller.ts';

const BATCH = 100;

describe.each(backends)('the event poller across stores (%s)', (backend) => {
  let t: TestApp;
  let db: Kysely<Database>;

  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = t.database.db;
  });
  afterAll(async () => {
    await t?.close();
  });

  const poll = (): Promise<PollResult> => asPlatform(() => pollEvents(db, Date.now(), BATCH));
  const drain = async (): Promise<PollResult[]> => {
    const polls: PollResult[] = [];
    for (let i = 0; i < 1000; i++) {
      const r = await poll();
      polls.push(r);
      if (!r.more) return polls;
    }
    throw new Error('the poller did not drain in 1000 polls');
  };

  /** A new store with one enabled endpoint that wants every event. */
  const aStore = (name: string) => aStoreWithEndpoint(db, name);

  /** `n` product.updated events of `store` in one write (one stamp). */
  const many = (store: string, n: number) =>
    inStore(store, () =>
      runWrite(db, (w) =>
        appendEventsInOrder(w, [
          {
            type: 'product.updated',
            source: sql`SELECT gen_random_uuid()::text AS resource_id, json_build_object('n', g) AS data FROM generate_series(1, ${n}) g`,
          },
        ]),
      ),
    );
  const one = (store: string) => inStore(store, () => runWrite(db, (w) => appendEvent(w, 'customer.updated', randomUUID(), { one: true })));

  /** The events delivered to `endpoint`, in the order their deliveries were queued for it. */
  const deliveredTo = (endpoint: string) =>
    asPlatform(
      async () =>
        (
          await sql<{ event_id: string; store_id: string }>`
          SELECT d.event_id, ev.store_id FROM webhook_deliveries d JOIN events ev ON ev.store_id = d.store_id AND ev.id = d.event_id
          WHERE d.endpoint_id = ${endpoint}::uuid ORDER BY ev.created_at, ev.seq`.execute(db)
        ).rows,
    );
  const eventsOf = (store: string) =>
    asPlatform(async () =>
      (await sql<{ id: string }>`SELECT id FROM events WHERE store_id = ${store}::uuid ORDER BY created_at, seq`.execute(db)).rows.map((r) => r.id),
    );

  it("fans out store B's next event in the next poll while store A has thousands to go, and each store's events once, in order", async () => {
    await drain();
    const a = await aStore('alpha');
    const b = await aStore('bravo');
    await many(a.id, 3000);
    const first = await poll();
    // A's backlog: one poll fans out a batch of it, and more remain.
    expect(first.more).toBe(true);
    expect((await deliveredTo(a.endpoint)).length).toBeLessThan(3000);

    const bEvent = await one(b.id);
    await poll();
    // With one position for the deployment, this took 30 polls (A's 3,000 events first).
    expect((await deliveredTo(b.endpoint)).map((r) => r.event_id)).toEqual([bEvent]);
    expect((await deliveredTo(a.endpoint)).length).toBeLessThan(3000);

    const polls = await drain();
    expect(polls.length).toBeGreaterThan(1);
    // Every event of each store once, in its own order, and only to its own store's endpoint.
    const toA = await deliveredTo(a.endpoint);
    expect(toA.map((r) => r.event_id)).toEqual(await eventsOf(a.id));
    expect(new Set(toA.map((r) => r.store_id))).toEqual(new Set([a.id]));
    expect((await deliveredTo(b.endpoint)).map((r) => r.event_id)).toEqual(await eventsOf(b.id));
    // Nothing more to do: the scan is at the last event, no store is behind.
    expect(await poll()).toMatchObject({ events: 0, deliveries: 0, more: false });
    const { rows } = await asPlatform(() =>
      sql<{ at_last: boolean; behind: number }>`
        SELECT (p.position_created_at, p.position_seq) = (SELECT created_at, seq FROM events ORDER BY created_at DESC, seq DESC LIMIT 1) AS at_last,
          (SELECT count(*)::int FROM webhook_store_positions sp WHERE (sp.position_created_at, sp.position_seq) < (sp.target_created_at, sp.target_seq)) AS behind
        FROM webhook_poller_state p`.execute(db),
    );
    expect(rows).toEqual([{ at_last: true, behind: 0 }]);
  });

  it("a store with a few events to fan out goes in a poll of its own, without a share of a busy store's", async () => {
    await drain();
    const a = await aStore('busy');
    const b = await aStore('quiet');
    await many(a.id, 3000);
    await poll();
    const aBefore = (await deliveredTo(a.endpoint)).length;
    expect(aBefore).toBeGreaterThan(0);
    expect(aBefore).toBeLessThan(3000);
    const bEvent = await one(b.id);
    // B's one event and A's share are read together; only B's delivery is written (and committed).
    expect(await poll()).toMatchObject({ events: 1, deliveries: 1, more: true });
    expect((await deliveredTo(b.endpoint)).map((r) => r.event_id)).toEqual([bEvent]);
    expect(await deliveredTo(a.endpoint)).toHaveLength(aBefore);
    // A's share goes in the next poll, even with another event of B behind: A, put off once, is now
    // the least recently served.
    const bNext = await one(b.id);
    await poll();
    expect((await deliveredTo(a.endpoint)).length).toBeGreaterThan(aBefore);
    expect((await deliveredTo(b.endpoint)).map((r) => r.event_id)).toEqual([bEvent, bNext]);
    await drain();
    expect((await deliveredTo(a.endpoint)).map((r) => r.event_id)).toEqual(await eventsOf(a.id));
  });

  it('serves every store behind within a poll or two when many are, however large one backlog', async () => {
    await drain();
    const big = await aStore('big');
    const small = await Promise.all(Array.from({ length: 12 }, (_, i) => aStore(`small-${i}`)));
    await many(big.id, 2000);
    for (const s of small) await one(s.id);
    await poll();
    await poll();
    for (const s of small) expect(await deliveredTo(s.endpoint)).toHaveLength(1);
    expect((await deliveredTo(big.endpoint)).length).toBeLessThan(2000);
    await drain();
    expect(await deliveredTo(big.endpoint)).toHaveLength(2000);
  });

  it.skipIf(backend === 'pglite')(
    "one store's open write holds back its own horizon and fan-out only: another store's event goes out meanwhile (PostgreSQL; PGlite runs one transaction at a time)",
    async () => {
      await drain();
      const a = await aStore('long-writer');
      const b = await aStore('meanwhile');
      let stamped!: (stamp: string) => void;
      const isStamped = new Promise<string>((resolve) => {
        stamped = resolve;
      });
      let commit!: () => void;
      const mayCommit = new Promise<void>((resolve) => {
        commit = resolve;
      });
      const slow = inStore(a.id, () =>
        runWrite(db, async (w) => {
          const id = await appendEvent(w, 'customer.created', randomUUID(), { slow: true });
          stamped(w.stamp);
          await mayCommit;
          return id;
        }),
      );
      const aStamp = await isStamped;
      const bEvent = await one(b.id);
      const later = (x: string, y: string) =>
        asPlatform(async () => (await sql<{ later: boolean }>`SELECT ${x}::timestamptz > ${y}::timestamptz AS later`.execute(db)).rows[0]!.later);
      // B's horizon passes A's open write; A's own, and the deployment's, stay before it.
      expect(await later(await inStore(b.id, () => readHorizon(db)), aStamp)).toBe(true);
      expect(await later(await inStore(a.id, () => readHorizon(db)), aStamp)).toBe(false);
      expect(await later(await asPlatform(() => readHorizon(db)), aStamp)).toBe(false);
      await poll();
      expect((await deliveredTo(b.endpoint)).map((r) => r.event_id)).toEqual([bEvent]);
      expect(await deliveredTo(a.endpoint)).toEqual([]);
      commit();
      const aEvent = await slow;
      await drain();
      expect((await deliveredTo(a.endpoint)).map((r) => r.event_id)).toEqual([aEvent]);
      expect((await deliveredTo(b.endpoint)).map((r) => r.event_id)).toEqual([bEvent]);
    },
  );

  it('a store with no enabled endpoint moves with the scan; one registered later gets only what is written after it', async () => {
    await drain();
    const store = await createStore(db, { name: `quiet ${randomUUID()}` });
    await many(store.id, 500);
    const polls = await drain();
    expect(polls).toHaveLength(1);
    const { rows } = await asPlatform(() =>
      sql<{ behind: boolean }>`
        SELECT (position_created_at, position_seq) < (target_created_at, target_seq) AS behind FROM webhook_store_positions WHERE store_id = ${store.id}::uuid`.execute(
        db,
      ),
    );
    expect(rows).toEqual([{ behind: false }]);
    const endpoint = randomUUID();
    await asPlatform(() =>
      sql`INSERT INTO webhook_endpoints (id, store_id, url, secret, created_at, updated_at)
        VALUES (${endpoint}, ${store.id}::uuid, 'http://127.0.0.1:9/quiet', 'whsec_test', clock_timestamp(), now())`.execute(db),
    );
    const later = await one(store.id);
    await drain();
    expect((await deliveredTo(endpoint)).map((r) => r.event_id)).toEqual([later]);
  });
});
