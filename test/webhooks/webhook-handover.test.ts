/**
 * Fresh deliveries handed from the fan-out to the polling worker (event-poller.ts `handover`): leased
 * in the fan-out statement, never more than the worker's room nor an endpoint's free slots, only to
 * endpoints a claim would take from and that have no older first attempt waiting (oldest first
 * holds), each sent with the same body a claim gives; and a worker never holds more deliveries than
 * its claim room, however large the backlog (docs/decisions/0015-webhook-delivery-speed.md).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { runWrite } from '../../src/db/write-clock.ts';
import { appendEvent } from '../../src/events/event-log.ts';
import { pollEvents, type Handover } from '../../src/webhooks/event-poller.ts';
import { claimDueDeliveries, nextDueAt } from '../../src/webhooks/delivery-queue.ts';
import { CLAIM_AHEAD_ROUNDS } from '../../src/webhooks/endpoint-concurrency.ts';
import { WebhookReceiver } from './webhook-receiver.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const BREAKER = { threshold: 10, pauseMs: 60_000 };

describe.each(backends)('fan-out handed to the polling worker (%s)', (backend) => {
  let kit: WebhookTestKit;
  beforeAll(async () => {
    kit = await webhookTestKit(backend, { WEBHOOK_CONCURRENCY: '2' }, { worker: false });
  });
  afterAll(async () => kit?.close());

  const db = () => kit.t.database.db;
  const append = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      await runWrite(db(), (w) => appendEvent(w, 'customer.created', id, { id }));
    }
  };
  const drain = async (handover?: Handover) => {
    const handed = [];
    let deliveries = 0;
    for (let i = 0; i < 100; i++) {
      const r = await pollEvents(db(), Date.now(), 500, () => handover);
      handed.push(...r.handedOver);
      deliveries += r.deliveries;
      if (!r.more) break;
    }
    return { handed, deliveries };
  };
  const handover = (workerId: string, limit: number, endpointCapacity: number): Handover => ({
    workerId,
    leaseMs: 60_000,
    limit,
    freeSlots: new Map(),
    held: new Map(),
    endpointCapacity,
    breaker: BREAKER,
  });
  const leasedTo = async (workerId: string) =>
    (await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE locked_by = ${workerId}`.execute(db())).rows[0]!.n;
  const disable = async (...ids: string[]) => {
    for (const id of ids) await kit.api('PATCH', `/webhooks/endpoints/${id}`, { enabled: false });
  };

  it('hands over the oldest fresh deliveries, leased, up to the room and each endpoint’s slots; the rest wait for any claim', async () => {
    await drain();
    const a = await kit.createEndpoint('http://127.0.0.1:9/a');
    const b = await kit.createEndpoint('http://127.0.0.1:9/b');
    await append(6);
    const { handed, deliveries } = await drain(handover('w1', 5, 2));
    expect(deliveries).toBe(12);
    // Two slots each (below the room of 5), the oldest events first, with their envelopes.
    expect(handed).toHaveLength(4);
    expect(handed.filter((d) => d.endpointId === a.id)).toHaveLength(2);
    expect(handed.every((d) => d.attemptNumber === 1 && JSON.parse(d.body).id === d.event.id)).toBe(true);
    expect(await leasedTo('w1')).toBe(4);
    const { rows: order } = await sql<{ event_id: string; locked_by: string | null }>`
      SELECT d.event_id, d.locked_by FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id
      WHERE d.endpoint_id = ${a.id}::uuid ORDER BY ev.created_at, ev.seq
    `.execute(db());
    expect(order.map((r) => r.locked_by)).toEqual(['w1', 'w1', null, null, null, null]);
    // Whatever was not handed over is an ordinary due row: another worker claims it.
    const claimed = await claimDueDeliveries(db(), {
      workerId: 'w2',
      now: Date.now(),
      leaseMs: 60_000,
      limit: 100,
      freeSlots: new Map(),
      endpointCapacity: 100,
      breaker: BREAKER,
    });
    expect(claimed).toHaveLength(8);
    await disable(a.id, b.id);
  });

  it('an endpoint with an older first attempt waiting gets no fresh delivery handed over, nor one whose breaker is open', async () => {
    await drain();
    const backlog = await kit.createEndpoint('http://127.0.0.1:9/backlog');
    const open = await kit.createEndpoint('http://127.0.0.1:9/open');
    const idle = await kit.createEndpoint('http://127.0.0.1:9/idle');
    await append(2);
    await drain(); // queued, nobody holds them
    await disable(idle.id);
    const idle2 = await kit.createEndpoint('http://127.0.0.1:9/idle2');
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${BREAKER.threshold} WHERE id = ${open.id}::uuid`.execute(db());
    await append(3);
    const { handed } = await drain(handover('w3', 100, 100));
    expect(new Set(handed.map((d) => d.endpointId))).toEqual(new Set([idle2.id]));
    expect(handed).toHaveLength(3);
    await disable(backlog.id, open.id, idle2.id);
  });

  it('counts the deliveries it queued for an endpoint its breaker paused (no claim is woken for those)', async () => {
    await drain();
    const paused = await kit.createEndpoint('http://127.0.0.1:9/paused');
    const halfOpen = await kit.createEndpoint('http://127.0.0.1:9/half-open');
    const healthy = await kit.createEndpoint('http://127.0.0.1:9/healthy');
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${BREAKER.threshold}, paused_until = now() + interval '1 minute' WHERE id = ${paused.id}::uuid`.execute(
      db(),
    );
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${BREAKER.threshold}, paused_until = now() - interval '1 second' WHERE id = ${halfOpen.id}::uuid`.execute(
      db(),
    );
    await append(3);
    let deliveries = 0;
    let pausedCount = 0;
    let handed = 0;
    for (let i = 0; i < 100; i++) {
      const r = await pollEvents(db(), Date.now(), 500, () => handover('w5', 100, 100));
      deliveries += r.deliveries;
      pausedCount += r.paused;
      handed += r.handedOver.length;
      if (!r.more) break;
    }
    expect(deliveries).toBe(9);
    expect(pausedCount).toBe(3);
    // The healthy endpoint's handed over; the half-open one's wait for a claim (its probe).
    expect(handed).toBe(3);
    await disable(paused.id, halfOpen.id, healthy.id);
  });

  it('nextDueAt reads none of the backlog of an endpoint its breaker paused', async () => {
    await drain();
    const paused = await kit.createEndpoint('http://127.0.0.1:9/paused-backlog');
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${BREAKER.threshold}, paused_until = now() + interval '1 minute' WHERE id = ${paused.id}::uuid`.execute(
      db(),
    );
    // 3,000 due deliveries to it, written set-based as a fan-out writes them.
    await sql`
      WITH ev AS (
        INSERT INTO events (id, store_id, type, resource_type, resource_id, data, created_at)
        SELECT gen_random_uuid(), e.store_id, 'customer.updated', 'customer', g::text, '{}'::json, now()
        FROM webhook_endpoints e CROSS JOIN generate_series(1, 3000) g WHERE e.id = ${paused.id}::uuid
        RETURNING id, store_id, type
      )
      INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at)
      SELECT gen_random_uuid(), ev.store_id, ev.id, ev.type, ${paused.id}::uuid, 'pending', now() - interval '1 second', now(), now() FROM ev
    `.execute(db());
    await sql`ANALYZE webhook_deliveries`.execute(db());
    await sql`UPDATE webhook_poller_state SET position_created_at = (SELECT max(created_at) FROM events), position_seq = (SELECT max(seq) FROM events)`.execute(
      db(),
    );
    const { due, read } = await db()
      .transaction()
      .execute(async (trx) => {
        const rowsRead = async () =>
          (
            await sql<{ n: number }>`
              SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0)::int AS n FROM pg_stat_xact_user_tables WHERE relname = 'webhook_deliveries'`.execute(
              trx,
            )
          ).rows[0]!.n;
        const before = await rowsRead();
        const due = await nextDueAt(trx, Date.now());
        return { due, read: (await rowsRead()) - before };
      });
    // Due when the pause ends, found without reading the 3,000 rows behind it. (At this scale the
    // planner joined from the endpoints before too; on the bench's database it read every
    // unfinished delivery: docs/decisions/0070.)
    expect(due).toBeGreaterThan(Date.now());
    expect(read).toBeLessThan(100);
    await sql`DELETE FROM webhook_deliveries WHERE endpoint_id = ${paused.id}::uuid`.execute(db());
    await disable(paused.id);
  });

  it('a worker never holds more deliveries than its claim room, however large the backlog', async () => {
    await drain();
    const receiver = await new WebhookReceiver().start();
    const hanging: ServerResponse[] = [];
    receiver.respond = (_req, _n, res) => void hanging.push(res);
    // 20 endpoints, 30 events: 600 deliveries, far more than the room of 64 × 2 = 128.
    const endpoints = [];
    for (let i = 0; i < 20; i++) endpoints.push(await kit.createEndpoint(`${receiver.url}?e=${i}`));
    const room = CLAIM_AHEAD_ROUNDS * 2;
    await append(30);
    const worker = await kit.startWorker();
    let held = 0;
    let most = 0;
    worker.events.on('claimed', (rows) => {
      held += rows.length;
      most = Math.max(most, held);
    });
    // Counted in the table, not from the worker's events: its first polls can come before a listener
    // registered after startWorker() (a loaded machine), and would be missed.
    const ids = endpoints.map((e) => e.id);
    const queued = async () =>
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = ANY(${ids}::uuid[])`.execute(db())).rows[0]!.n;
    // Every event fanned out (the poller read them all), and the worker holds deliveries.
    await vi.waitFor(async () => expect(await queued()).toBe(600), { timeout: 45_000, interval: 50 });
    await receiver.waitForRequests(2);
    // More events arrive: the poll that fans them out finds the worker full.
    await append(5);
    await vi.waitFor(async () => expect(await queued()).toBe(700), { timeout: 45_000, interval: 50 });
    expect(most).toBeLessThanOrEqual(room);
    expect(await leasedTo(worker.id)).toBeLessThanOrEqual(room);
    const stopping = worker.stop();
    for (const r of hanging.splice(0)) r.writeHead(200).end('ok');
    await stopping;
    await disable(...endpoints.map((e) => e.id));
    await receiver.close();
  }, 120_000);
});
