/**
 * The event poller against the write clock: it never passes an event whose transaction is still
 * open (a late commit is delivered, not skipped), and its fan-out and position move together, so a
 * failure in between neither drops nor double-queues an event.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely, type KyselyPlugin } from 'kysely';
import { randomUUID } from 'node:crypto';
import { backends } from '../helpers/test-database.ts';
import { runWrite } from '../../src/db/write-clock.ts';
import type { Database } from '../../src/db/schema.ts';
import { appendEvent, appendEventsInOrder } from '../../src/events/event-log.ts';
import { pendingQuery, pollEvents, pollPending } from '../../src/webhooks/event-poller.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import { signal } from '../helpers/signal.ts';

describe.each(backends)('event poller (%s)', (backend) => {
  let kit: WebhookTestKit;
  let endpointId: string;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, {}, { worker: false });
    endpointId = (await kit.createEndpoint('http://127.0.0.1:9/never-called')).id;
  });
  afterAll(async () => kit?.close());

  const db = () => kit.t.database.db;
  const deliveredEvents = async () =>
    (
      await sql<{ event_id: string }>`SELECT event_id FROM webhook_deliveries WHERE endpoint_id = ${endpointId}::uuid ORDER BY created_at, event_id`.execute(
        db(),
      )
    ).rows.map((r) => r.event_id);
  const drain = async () => {
    for (let i = 0; i < 100; i++) {
      const r = await pollEvents(db(), Date.now());
      if (!r.more) return;
    }
  };

  it.skipIf(backend === 'pglite')(
    'waits for a write that stamped early and commits late instead of skipping it (PostgreSQL; PGlite runs one transaction at a time)',
    async () => {
      await drain();
      const [isStamped, stamped] = signal();
      const [mayCommit, commit] = signal();
      const early = randomUUID();
      const slow = runWrite(db(), async (w) => {
        const id = await appendEvent(w, 'customer.created', early, { id: early });
        stamped();
        await mayCommit;
        return id;
      });
      await isStamped;
      const late = randomUUID();
      const fastId = await runWrite(db(), (w) => appendEvent(w, 'customer.created', late, { id: late }));

      // The fast write committed with a later stamp, but the slow one is still open: the poller must
      // not move past the slow one's stamp, so it takes neither yet.
      const first = await pollEvents(db(), Date.now());
      expect(first.events).toBe(0);
      commit();
      const slowId = await slow;
      await drain();
      const events = await deliveredEvents();
      expect(events).toContain(slowId);
      expect(events).toContain(fastId);
      expect(events.filter((e) => e === slowId || e === fastId)).toHaveLength(2);
    },
  );

  it('moves its position and the fan-out together: a failed fan-out is retried whole, never skipped or doubled', async () => {
    await drain();
    const before = await deliveredEvents();
    const ids = await runWrite(db(), async (w) => [
      await appendEvent(w, 'customer.updated', randomUUID(), { n: 1 }),
      await appendEvent(w, 'customer.updated', randomUUID(), { n: 2 }),
    ]);
    const { rows: position } = await sql<{ p: string }>`SELECT position_created_at::text || '/' || position_seq AS p FROM webhook_poller_state`.execute(db());
    // Make the fan-out fail inside the poller's transaction.
    await sql
      .raw(`
      CREATE FUNCTION fail_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'simulated crash'; END $$
    `)
      .execute(db());
    await sql.raw(`CREATE TRIGGER fail_fan_out BEFORE INSERT ON webhook_deliveries FOR EACH STATEMENT EXECUTE FUNCTION fail_fan_out()`).execute(db());
    await expect(pollEvents(db(), Date.now())).rejects.toThrow(/simulated crash/);
    const { rows: unchanged } = await sql<{ p: string }>`SELECT position_created_at::text || '/' || position_seq AS p FROM webhook_poller_state`.execute(db());
    expect(unchanged).toEqual(position);
    await sql.raw(`DROP TRIGGER fail_fan_out ON webhook_deliveries`).execute(db());
    await sql.raw(`DROP FUNCTION fail_fan_out()`).execute(db());

    await drain();
    await drain();
    const after = await deliveredEvents();
    expect(after.length - before.length).toBe(2);
    expect(after.filter((e) => ids.includes(e)).sort()).toEqual([...ids].sort());
  });

  /** `db` with a count of the poller's checks (its statement reads `AS pending`) run through it. */
  const countingChecks = (): { db: Kysely<Database>; checks: () => number } => {
    let checks = 0;
    const plugin: KyselyPlugin = {
      transformQuery(args) {
        if (args.node.kind === 'RawNode' && args.node.sqlFragments.join('').includes('AS pending')) checks++;
        return args.node;
      },
      transformResult: async (args) => args.result,
    };
    return { db: db().withPlugin(plugin), checks: () => checks };
  };

  it('goes straight to its transaction when told events wait (no check first), and fans them out', async () => {
    await drain();
    const spy = countingChecks();
    expect(await pollEvents(spy.db, Date.now())).toMatchObject({ polled: true, events: 0, more: false });
    expect(spy.checks()).toBe(1);
    const id = await runWrite(db(), (w) => appendEvent(w, 'customer.updated', randomUUID(), { n: 1 }));
    const known = await pollEvents(spy.db, Date.now(), 500, undefined, true);
    expect(spy.checks()).toBe(1);
    expect(known).toMatchObject({ polled: true, events: 1, deliveries: 1 });
    expect(await deliveredEvents()).toContain(id);
    // Told so with nothing waiting: one transaction that finds nothing, and still no check.
    expect(await pollEvents(spy.db, Date.now(), 500, undefined, true)).toMatchObject({ polled: true, events: 0, deliveries: 0 });
    expect(spy.checks()).toBe(1);
  });

  it.skipIf(backend === 'pglite')(
    "the check finds an event committed after a long write's uncommitted events without visiting them (PostgreSQL; PGlite runs one transaction at a time)",
    async () => {
      await drain();
      const [isStamped, stamped] = signal();
      const [mayCommit, commit] = signal();
      // An import's step: 20,000 events written, not committed.
      const slow = runWrite(db(), async (w) => {
        await appendEventsInOrder(w, [
          { type: 'customer.updated', source: sql`SELECT g::text AS resource_id, '{}'::json AS data FROM generate_series(1, 20000) g` },
        ]);
        stamped();
        await mayCommit;
      });
      try {
        await isStamped;
        expect(await pollPending(db())).toBe(false);
        // A change committed after the step began: found at the log's end, not after 20,000 entries.
        const id = await runWrite(db(), (w) => appendEvent(w, 'customer.updated', randomUUID(), { n: 2 }));
        expect(await pollPending(db())).toBe(true);
        const found = await checkBuffers(db());
        // Buffers the check touched: a forward probe visited a heap tuple per uncommitted event.
        expect(found).toBeLessThan(50);
        commit();
        await slow;
        await drain();
        expect(await deliveredEvents()).toContain(id);
      } finally {
        commit();
        await slow;
      }
    },
  );
});

/** Shared buffers (hit or read) the poller's check touches, by EXPLAIN (ANALYZE, BUFFERS). */
async function checkBuffers(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ 'QUERY PLAN': [{ Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }] }>`
    EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${pendingQuery()}`.execute(db);
  const plan = rows[0]!['QUERY PLAN'][0].Plan;
  return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
}
