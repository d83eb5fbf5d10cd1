/**
 * Fan-out: every enabled endpoint subscribed to an event's type gets one delivery of it, for every
 * event written since the endpoint was registered — several endpoints on one type each get theirs,
 * the older one included, whether the poller fans the events out one by one or all in one batch.
 * Driven by hand (pollEvents), no worker: the deliveries queued are the whole answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { pollEvents } from '../../src/webhooks/event-poller.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

describe.each(backends)('fan-out to several endpoints of one event type (%s)', (backend) => {
  let kit: WebhookTestKit;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, {}, { worker: false });
  });
  afterAll(async () => kit?.close());

  const db = () => kit.t.database.db;
  const drain = async () => {
    for (let i = 0; i < 100; i++) if (!(await pollEvents(db(), Date.now())).more) return;
    throw new Error('the poller did not drain in 100 polls');
  };
  /** Creates a customer; returns the id of its customer.created event. */
  const customerCreated = async (name: string) => {
    const res = await kit.api('POST', '/customers', { name, email: `${name}@example.com` });
    expect(res.status).toBe(201);
    const { rows } = await sql<{ id: string }>`
      SELECT id FROM events WHERE type = 'customer.created' AND resource_id = ${res.body.data.id}`.execute(db());
    expect(rows).toHaveLength(1);
    return rows[0]!.id;
  };
  const deliveredTo = async (endpointId: string) =>
    (
      await sql<{ event_id: string }>`
        SELECT d.event_id FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id
        WHERE d.endpoint_id = ${endpointId}::uuid ORDER BY ev.created_at, ev.seq`.execute(db())
    ).rows.map((r) => r.event_id);
  const endpointOf = (types: string[]) => kit.createEndpoint(`http://127.0.0.1:9/${Math.random()}`, { event_types: types });

  for (const mode of ['one batch after every write', 'a poll after each write'] as const) {
    it(`two endpoints on one type, registered at different times, each get every event since they were registered (${mode})`, async () => {
      await drain();
      const older = await endpointOf(['customer.created']);
      const first = await customerCreated(`first-${mode.length}`);
      if (mode === 'a poll after each write') await drain();
      const newer = await endpointOf(['customer.created', 'customer.updated']);
      const second = await customerCreated(`second-${mode.length}`);
      if (mode === 'a poll after each write') await drain();
      const third = await customerCreated(`third-${mode.length}`);
      await drain();

      expect(await deliveredTo(older.id)).toEqual([first, second, third]);
      expect(await deliveredTo(newer.id)).toEqual([second, third]);
      // Nothing twice.
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id IN (${older.id}::uuid, ${newer.id}::uuid)`.execute(db());
      expect(rows[0]!.n).toBe(5);
      // The next round starts from endpoints of its own (an endpoint of every type would want every
      // event and hide what the subscribed ones miss).
      await sql`UPDATE webhook_endpoints SET enabled = false`.execute(db());
    });
  }
});
