/**
 * The HTTP client is loaded when first needed (decision 0048), but before an HTTP endpoint's first
 * delivery: at the worker's start when the store has one, and when one is created, given a URL or
 * enabled through this process. A store with only broker endpoints, or none, never loads it.
 */
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

describe.each(backends)('the HTTP client is ready before the first delivery (%s)', (backend) => {
  let kit: WebhookTestKit | undefined;
  afterEach(async () => {
    await kit?.close();
    kit = undefined;
  });

  it('is not loaded with no endpoint, and is loaded once an endpoint is created here, before any delivery', async () => {
    kit = await webhookTestKit(backend);
    expect(kit.worker.httpClientLoaded).toBe(false);
    let attempts = 0;
    kit.worker.events.on('attempt', () => attempts++);
    const ready = once(kit.worker.events, 'httpReady');
    await kit.createEndpoint('http://127.0.0.1:9/hook', { event_types: ['customer.created'] });
    await ready;
    expect(kit.worker.httpClientLoaded).toBe(true);
    expect(attempts).toBe(0);
  });

  it('is loaded by the start of a worker on a store that has an HTTP endpoint, and not for a broker endpoint alone', async () => {
    kit = await webhookTestKit(backend, {}, { worker: false });
    await kit.createEndpoint('amqp://guest:guest@127.0.0.1:5672/%2F?exchange=store-events', { event_types: ['customer.created'] });
    const brokersOnly = await kit.startWorker();
    expect(brokersOnly.httpClientLoaded).toBe(false);
    const { id } = await kit.createEndpoint('http://127.0.0.1:9/hook', { event_types: ['customer.created'], enabled: false });
    expect((await kit.startWorker()).httpClientLoaded).toBe(false);
    expect((await kit.api('PATCH', `/webhooks/endpoints/${id}`, { enabled: true })).status).toBe(200);
    const started = await kit.startWorker();
    expect(started.httpClientLoaded).toBe(true);
  });
});
