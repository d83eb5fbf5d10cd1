/**
 * The event poller across events nobody subscribed to: it reads only the events some
 * enabled endpoint wants and moves its position past the others in the same transaction, so a run of
 * unwanted events costs one poll, not one per batch — and an endpoint still gets every event of its
 * types, in order, when they are interleaved with many unwanted ones across batch boundaries and
 * write-clock stamps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { randomUUID } from 'node:crypto';
import { backends } from '../helpers/test-database.ts';
import { runWrite } from '../../src/db/write-clock.ts';
import { appendEvent, appendEventsInOrder } from '../../src/events/event-log.ts';
import type { EventType } from '../../src/resources/event-types.ts';
import { pollEvents, type PollResult } from '../../src/webhooks/event-poller.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import { signal } from '../helpers/signal.ts';

/** Small batches, so a few hundred events cross many batch boundaries. */
const BATCH = 7;

describe.each(backends)('event poller across unsubscribed events (%s)', (backend) => {
  let kit: WebhookTestKit;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, {}, { worker: false });
  });
  afterAll(async () => kit?.close());

  const db = () => kit.t.database.db;
  const drain = async (): Promise<PollResult[]> => {
    const polls: PollResult[] = [];
    for (let i = 0; i < 1000; i++) {
      const r = await pollEvents(db(), Date.now(), BATCH);
      polls.push(r);
      if (!r.more) return polls;
    }
    throw new Error('the poller did not drain in 1000 polls');
  };
  const position = async () =>
    (await sql<{ p: string }>`SELECT position_created_at::text || '/' || position_seq AS p FROM webhook_poller_state`.execute(db())).rows[0]!.p;
  const lastEvent = async () =>
    (await sql<{ p: string }>`SELECT created_at::text || '/' || seq AS p FROM events ORDER BY created_at DESC, seq DESC LIMIT 1`.execute(db())).rows[0]!.p;
  const deliveredTo = async (endpointId: string) =>
    (
      await sql<{ event_id: string }>`
        SELECT d.event_id FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id
        WHERE d.endpoint_id = ${endpointId}::uuid ORDER BY ev.created_at, ev.seq`.execute(db())
    ).rows.map((r) => r.event_id);
  /** `n` events of `type` in one statement (one stamp with the rest of `w`'s). */
  const many = (w: Parameters<Parameters<typeof runWrite>[1]>[0], type: EventType, n: number) =>
    appendEventsInOrder(w, [
      { type, source: sql`SELECT gen_random_uuid()::text AS resource_id, json_build_object('n', g) AS data FROM generate_series(1, ${n}) g` },
    ]);

  it('crosses a run of events nobody subscribed to in one poll, and an endpoint then gets only what is written after it', async () => {
    await drain();
    // Nothing enabled wants product events: 200 of them, more than 28 batches.
    const subscriber = await kit.createEndpoint('http://127.0.0.1:9/customers', { event_types: ['customer.updated'] });
    await runWrite(db(), (w) => many(w, 'product.updated', 200));
    const polls = await drain();
    expect(polls).toHaveLength(1);
    expect(polls[0]).toMatchObject({ polled: true, events: 0, deliveries: 0, more: false });
    expect(await position()).toBe(await lastEvent());
    expect(await deliveredTo(subscriber.id)).toEqual([]);
  });

  it('delivers every subscribed event interleaved with many unsubscribed ones across batches and stamps, and ends past the unsubscribed ones', async () => {
    await drain();
    const subscriber = await kit.createEndpoint('http://127.0.0.1:9/orders', { event_types: ['order.updated'] });
    const wanted: string[] = [];
    // Three write transactions (three stamps); in each, runs of 0–30 unsubscribed events between
    // subscribed ones, so batches of 7 start and end at every kind of place.
    for (let write = 0; write < 3; write++) {
      await runWrite(db(), async (w) => {
        for (let i = 0; i < 12; i++) {
          await many(w, 'product.updated', (i * 7 + write * 5) % 31);
          const count = 1 + ((i + write) % 3);
          for (let k = 0; k < count; k++) wanted.push(await appendEvent(w, 'order.updated', randomUUID(), { i, k }));
        }
        // Unsubscribed events after the last subscribed one: the position must pass them too.
        await many(w, 'stock_movement.created', 40);
      });
    }
    const polls = await drain();

    expect(await deliveredTo(subscriber.id)).toEqual(wanted);
    expect(await position()).toBe(await lastEvent());
    // Only the subscribed events were read: full batches of them, then one that passes the rest.
    expect(polls.reduce((sum, p) => sum + p.events, 0)).toBe(wanted.length);
    expect(polls).toHaveLength(Math.floor(wanted.length / BATCH) + 1);
    // Nothing more to do, and nothing queued twice.
    const again = await pollEvents(db(), Date.now(), BATCH);
    expect(again).toMatchObject({ events: 0, deliveries: 0, more: false });
    expect(await deliveredTo(subscriber.id)).toEqual(wanted);
  });

  it.skipIf(backend === 'pglite')(
    'never skips past a subscribed event still being written while later unsubscribed ones are final (PostgreSQL; PGlite runs one transaction at a time)',
    async () => {
      await drain();
      const subscriber = await kit.createEndpoint('http://127.0.0.1:9/late', { event_types: ['customer.created'] });
      const [isStamped, stamped] = signal();
      const [mayCommit, commit] = signal();
      const slow = runWrite(db(), async (w) => {
        const id = await appendEvent(w, 'customer.created', randomUUID(), { slow: true });
        stamped();
        await mayCommit;
        return id;
      });
      await isStamped;
      // Later-stamped unsubscribed events, committed while the subscribed one is still open.
      await runWrite(db(), (w) => many(w, 'product.updated', 30));
      await drain();
      // The position stayed before the open write's event (the horizon held it back).
      const {
        rows: [held],
      } = await sql<{ c: string; s: number }>`SELECT position_created_at::text AS c, position_seq AS s FROM webhook_poller_state`.execute(db());
      commit();
      const slowId = await slow;
      await drain();
      expect(await deliveredTo(subscriber.id)).toEqual([slowId]);
      const { rows: behind } = await sql<{ behind: boolean }>`
        SELECT (${held!.c}::timestamptz, ${held!.s}::bigint) < (created_at, seq) AS behind FROM events WHERE id = ${slowId}::uuid`.execute(db());
      expect(behind).toEqual([{ behind: true }]);
      expect(await position()).toBe(await lastEvent());
    },
  );

  it('an endpoint with no event types still gets every event, next to one subscribed to a single type', async () => {
    await drain();
    const everything = await kit.createEndpoint('http://127.0.0.1:9/everything');
    const customers = await kit.createEndpoint('http://127.0.0.1:9/customers-only', { event_types: ['customer.created'] });
    const all: string[] = [];
    const customerEvents: string[] = [];
    await runWrite(db(), async (w) => {
      for (let i = 0; i < 10; i++) {
        all.push(await appendEvent(w, 'product.updated', randomUUID(), { i }));
        const id = await appendEvent(w, 'customer.created', randomUUID(), { i });
        all.push(id);
        customerEvents.push(id);
      }
    });
    await drain();
    expect(await deliveredTo(everything.id)).toEqual(all);
    expect(await deliveredTo(customers.id)).toEqual(customerEvents);
    expect(await position()).toBe(await lastEvent());
  });

  it('two endpoints with no event types registered at different times: the events between them, still unpolled, reach the older one', async () => {
    await drain();
    // Only the two below listen (a catch-all of an earlier case would cover the older one's events).
    await sql`UPDATE webhook_endpoints SET enabled = false`.execute(db());
    const older = await kit.createEndpoint('http://127.0.0.1:9/older');
    const between: string[] = [];
    await runWrite(db(), async (w) => {
      for (let i = 0; i < 5; i++) between.push(await appendEvent(w, 'product.updated', randomUUID(), { i }));
    });
    const newer = await kit.createEndpoint('http://127.0.0.1:9/newer');
    const after: string[] = [];
    await runWrite(db(), async (w) => {
      for (let i = 0; i < 5; i++) after.push(await appendEvent(w, 'product.updated', randomUUID(), { i }));
    });
    // Nothing polled since the older endpoint was registered: one fan-out sees both endpoints.
    await drain();
    expect(await deliveredTo(older.id)).toEqual([...between, ...after]);
    expect(await deliveredTo(newer.id)).toEqual(after);
    expect(await position()).toBe(await lastEvent());
  });
});
