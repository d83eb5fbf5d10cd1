/**
 * A FIFO endpoint whose receiver answers 410 Gone is disabled, and the worker says so in its log
 * once, as for an unordered endpoint (the FIFO settle shares the unordered attempt's bookkeeping:
 * metrics, the 410 line, the `attempt` event).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { createCustomer } from '../../src/customers/customer.service.ts';
import { WebhookReceiver } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

describe.each(backends)('FIFO endpoint answered 410 (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  const logLines: string[] = [];

  beforeAll(async () => {
    kit = await webhookTestKit(backend, { LOG_LEVEL: 'warn' }, { logLines });
    receiver = await new WebhookReceiver().start();
    receiver.respond = (_req, _n, res) => res.writeHead(410).end('gone');
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('disables the endpoint and logs it once', async () => {
    const endpoint = await kit.createEndpoint(receiver.url, { event_types: ['customer.created'], delivery_order: 'fifo', batch_size: 3 });
    const attempts = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    await createCustomer(kit.t.database.db, { name: 'Gone', email: 'gone@example.com' });
    const [attempt] = await attempts;
    expect(attempt).toMatchObject({ endpointDisabled: true, result: { statusCode: 410 } });
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data).toMatchObject({ enabled: false });
    const gone = logLines.map((l) => JSON.parse(l) as { msg: string; endpointId?: string }).filter((l) => l.msg.includes('410 Gone'));
    expect(gone).toEqual([expect.objectContaining({ endpointId: endpoint.id, msg: 'webhook endpoint answered 410 Gone; disabled' })]);
  });
});
