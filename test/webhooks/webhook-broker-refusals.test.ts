/**
 * A broker that refuses a message is a refusal of that payload, as an HTTP 4xx (decision 0029): the
 * broker answered, so the endpoint is up. RabbitMQ here (the machine broker): the exchange routes
 * `customer.created` to a queue and nothing else, so a `customer.updated` message comes back
 * unroutable (basic.return) while created ones are confirmed. While the endpoint is paused, 10
 * healthy events are written, then 12 the broker refuses: the probe (the newest) is a refused one.
 * Its refusal closes the breaker, the healthy events go out with no further pause, each refused
 * payload gets one attempt and its retry schedule. A connection failure still counts as the
 * receiver down (test/webhooks/webhook-brokers.test.ts). Fan-out is driven by hand, then one worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { amqpConsumer, RABBITMQ } from './broker-kit.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import type { Database } from '../../src/db/schema.ts';
import { pollEvents } from '../../src/webhooks/event-poller.ts';
import { isoFromMillis } from '../../src/shared/time.ts';

const THRESHOLD = 10;
const PAUSE_MS = 600_000;
const HEALTHY = 10;
const REFUSED = THRESHOLD + 2;

describe.each(backends)('broker refusals and the breaker (%s)', (backend) => {
  let kit: WebhookTestKit;
  let db: Kysely<Database>;

  beforeAll(async () => {
    kit = await webhookTestKit(
      backend,
      {
        WEBHOOK_BREAKER_THRESHOLD: String(THRESHOLD),
        WEBHOOK_BREAKER_PAUSE_MS: String(PAUSE_MS),
        WEBHOOK_RETRY_SCHEDULE_MS: Array(5).fill(PAUSE_MS).join(','),
      },
      { worker: false },
    );
    db = kit.t.ctx.database.db;
  });
  afterAll(async () => {
    await kit?.close();
  });

  const fanOut = async (now: number) => {
    for (;;) if (!(await pollEvents(db, now)).more) return;
  };
  const endpointRow = async (id: string) =>
    (
      await sql<{ consecutive_failures: number; paused_until: string | null; recovered_at: string | null }>`
        SELECT consecutive_failures, paused_until, recovered_at FROM webhook_endpoints WHERE id = ${id}::uuid`.execute(db)
    ).rows[0]!;

  it('a probe the broker refuses (unroutable) closes the breaker; refused first attempts of the backlog do not pause the endpoint again', {
    timeout: 90_000,
  }, async () => {
    const exchange = `store-test-refusals-${randomUUID()}`;
    const amqp = await amqpConsumer(exchange);
    // A second exchange that routes only customer.created: updated messages come back unroutable.
    const picky = `${exchange}-created-only`;
    await amqp.channel.assertExchange(picky, 'topic', { durable: false, autoDelete: false });
    await amqp.channel.bindExchange(exchange, picky, 'customer.created');
    try {
      // Customers to update later, written before the endpoint exists (their created events are not its).
      const existing: string[] = [];
      for (let i = 0; i < REFUSED; i++) {
        const res = await kit.api('POST', '/customers', { name: `existing ${i}`, email: `existing-${i}@example.com` });
        existing.push(res.body.data.id);
      }
      await fanOut(Date.now());
      const endpoint = await kit.createEndpoint(`amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=${picky}`, {
        event_types: ['customer.created', 'customer.updated'],
      });
      await sql`UPDATE webhook_endpoints SET consecutive_failures = ${THRESHOLD}, paused_until = ${isoFromMillis(Date.now() + PAUSE_MS)}::timestamptz
        WHERE id = ${endpoint.id}::uuid`.execute(db);
      // Healthy first, refused after, each fanned out on its own a millisecond apart.
      const start = Date.now() - 1000;
      let i = 0;
      for (let n = 0; n < HEALTHY; n++) {
        expect((await kit.api('POST', '/customers', { name: `healthy ${n}`, email: `healthy-${n}@example.com` })).status).toBe(201);
        await fanOut(start + i++);
      }
      for (const id of existing) {
        expect((await kit.api('PATCH', `/customers/${id}`, { city: 'Porto' })).status).toBe(200);
        await fanOut(start + i++);
      }
      await sql`UPDATE webhook_endpoints SET paused_until = ${isoFromMillis(Date.now() - 1)}::timestamptz WHERE id = ${endpoint.id}::uuid`.execute(db);

      const worker = await kit.startWorker();
      const pausedAgain = new Promise<never>((_, reject) =>
        worker.events.on('attempt', (r) => {
          if (r.endpointId !== endpoint.id) return;
          void endpointRow(endpoint.id).then((row) => {
            if (row.paused_until !== null && Date.parse(row.paused_until) > Date.now())
              reject(new Error(`paused again after ${r.deliveryId} (${r.result.outcome}: ${r.result.error}): ${JSON.stringify(row)}`));
          });
        }),
      );
      pausedAgain.catch(() => {});
      const attempts = await Promise.race([waitForAttempts(worker, HEALTHY + REFUSED, (r) => r.endpointId === endpoint.id, 60_000), pausedAgain]);
      await worker.stop();

      // The probe: the newest event, an update the broker returned.
      expect(attempts[0]!.eventType).toBe('customer.updated');
      expect(attempts[0]!.result).toMatchObject({ outcome: 'broker_rejected', statusCode: null });
      expect(attempts[0]!.result.error).toMatch(/unroutable/);
      expect(attempts.filter((a) => a.result.outcome === 'success').map((a) => a.eventType)).toEqual(Array(HEALTHY).fill('customer.created'));
      expect(attempts.filter((a) => a.result.outcome === 'broker_rejected')).toHaveLength(REFUSED);
      await amqp.log.waitFor((l) => l.distinct().size >= HEALTHY);
      expect(amqp.log.messages.every((m) => m.address === 'customer.created')).toBe(true);
      const after = await endpointRow(endpoint.id);
      expect(after).toMatchObject({ consecutive_failures: 0, paused_until: null });
      // One recovery, the probe's: the breaker never opened again (a refused attempt in flight when
      // it did would close it again, a second recovery after the backlog had started).
      expect(after.recovered_at).not.toBeNull();
      expect(Date.parse(after.recovered_at!)).toBeLessThanOrEqual(attempts[1]!.startedAt);
      const { rows } = await sql<{ status: string; attempt_count: number }>`
        SELECT status, attempt_count FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}::uuid AND status <> 'succeeded'`.execute(db);
      expect(rows).toHaveLength(REFUSED);
      for (const r of rows) expect(r).toMatchObject({ status: 'failed', attempt_count: 1 });
    } finally {
      await amqp.channel.deleteExchange(picky);
      await amqp.close();
    }
  });
});
