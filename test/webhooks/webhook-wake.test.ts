/**
 * A change is sent at once, not at the next poll: with the poll interval set to an hour, a write
 * made through the admin API still reaches the receiver (in-process commit signal on PGlite and in
 * the `all` role; NOTIFY on PostgreSQL).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

describe.each(backends)('writes wake the event poller (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    kit = await webhookTestKit(backend, { WEBHOOK_POLL_INTERVAL_MS: '3600000' });
    receiver = await new WebhookReceiver().start();
    receiver.respond = ok;
    await kit.createEndpoint(receiver.url, { event_types: ['customer.created'] });
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('delivers a change long before the next poll is due', async () => {
    const res = await kit.api('POST', '/customers', { name: 'Wake me' });
    expect(res.status).toBe(201);
    const [request] = await receiver.waitFor((r) => r.json.type === 'customer.created', 1, 20_000);
    expect(request!.json.data).toEqual(res.body.data);
  });
});
