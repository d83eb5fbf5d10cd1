/**
 * verifyWebhook against the real service's signed deliveries (the worker POSTs to a local receiver):
 * every event type it receives verifies and comes back typed, a rotated secret (two signatures)
 * verifies with the old or the new secret, and a wrong secret, a stale or future timestamp, a changed
 * body or a missing header are refused with a WebhookVerificationError naming why.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { backends } from '../helpers/test-database.ts';
import { aCustomer, aProduct, anOrder } from '../helpers/store-fixtures.ts';
import { webhookTestKit, waitForAttempts, type WebhookTestKit } from '../webhooks/webhook-test-kit.ts';
import { WebhookReceiver, ok, type ReceivedRequest } from '../webhooks/webhook-receiver.ts';
import { generateSecret } from '../../src/webhooks/webhook-signing.ts';
import { verifyWebhook, WebhookVerificationError, type WebhookEvent } from '../../packages/client/src/index.ts';

function refusal(fn: () => unknown): WebhookVerificationError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(WebhookVerificationError);
    expect((error as Error).message.split('\n')).toHaveLength(1);
    return error as WebhookVerificationError;
  }
  throw new Error('expected verifyWebhook to throw');
}

/** What the event's record id is, per type, through the typed union (a compile-time check too). */
function recordId(event: WebhookEvent): string {
  switch (event.type) {
    case 'inventory.updated':
      return event.data.product_id;
    case 'ping':
      return event.data.endpoint_id;
    default:
      // Every other type carries a record keyed by `id` (a new type whose record is not fails to compile).
      return event.data.id;
  }
}

describe.each(backends)("verifyWebhook with the service's deliveries (%s)", (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  let endpoint: { id: string; secret: string };
  let deliveries: ReceivedRequest[];

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    receiver.respond = ok;
    kit = await webhookTestKit(backend);
    endpoint = await kit.createEndpoint(receiver.url);
    const db = kit.t.ctx.database.db;
    const product = await aProduct(db, { stock: 10 });
    await aCustomer(db);
    await anOrder(db, [{ product_id: product.id, quantity: 2 }]);
    // product.created, customer.created, order.created, and the sale's product/inventory/movement events.
    const types = ['product.created', 'customer.created', 'order.created', 'product.updated', 'inventory.updated', 'stock_movement.created'];
    for (const type of types) await receiver.waitFor((r) => r.json.type === type);
    deliveries = [...receiver.requests];
  }, 180_000);
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('verifies every delivery with the endpoint secret and returns the typed event', () => {
    expect(deliveries.length).toBeGreaterThanOrEqual(6);
    for (const delivery of deliveries) {
      const event = verifyWebhook(delivery.body, delivery.headers, endpoint.secret);
      expect(event.id).toBe(delivery.headers['webhook-id']);
      expect(event).toEqual(delivery.json);
      expect(recordId(event)).toMatch(/^[0-9a-f-]{36}$/);
    }
    // Raw bytes and fetch Headers are accepted as well.
    const [first] = deliveries;
    expect(verifyWebhook(Buffer.from(first!.body), new Headers(first!.headers), endpoint.secret).id).toBe(first!.json.id);
  });

  it('agrees with the standardwebhooks reference library', () => {
    const reference = new Webhook(endpoint.secret);
    for (const delivery of deliveries)
      expect(verifyWebhook(delivery.body, delivery.headers, endpoint.secret)).toEqual(reference.verify(delivery.body, delivery.headers));
  });

  it('refuses a wrong secret', () => {
    const e = refusal(() => verifyWebhook(deliveries[0]!.body, deliveries[0]!.headers, generateSecret()));
    expect(e.code).toBe('invalid_signature');
    expect(e.message).toMatch(/^No webhook signature matches the signing secret/);
  });

  it('refuses a body changed after signing, or a signature moved to another message', () => {
    const [a, b] = deliveries;
    const changed = a!.body.replace(/"data"\s*:\s*{/, '"data":{"x":1,');
    expect(changed).not.toBe(a!.body);
    expect(refusal(() => verifyWebhook(changed, a!.headers, endpoint.secret)).code).toBe('invalid_signature');
    expect(refusal(() => verifyWebhook(a!.body, { ...a!.headers, 'webhook-signature': b!.headers['webhook-signature']! }, endpoint.secret)).code).toBe(
      'invalid_signature',
    );
  });

  it('refuses a stale or future timestamp (5 minutes by default, configurable)', () => {
    const delivery = deliveries[0]!;
    const signedAt = Number(delivery.headers['webhook-timestamp']) * 1000;
    expect(verifyWebhook(delivery.body, delivery.headers, endpoint.secret, { now: signedAt + 299_000 }).id).toBe(delivery.json.id);
    const stale = refusal(() => verifyWebhook(delivery.body, delivery.headers, endpoint.secret, { now: signedAt + 301_000 }));
    expect(stale.code).toBe('stale_timestamp');
    expect(stale.message).toMatch(/301 s old \(tolerance 300 s\)/);
    expect(refusal(() => verifyWebhook(delivery.body, delivery.headers, endpoint.secret, { now: signedAt - 301_000 })).message).toMatch(/in the future/);
    expect(verifyWebhook(delivery.body, delivery.headers, endpoint.secret, { now: signedAt + 3_000_000, toleranceSeconds: 3_600 }).id).toBe(delivery.json.id);
  });

  it('refuses missing headers, a malformed timestamp and a missing or bad secret', () => {
    const { body, headers } = deliveries[0]!;
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
      const without = Object.fromEntries(Object.entries(headers).filter(([k]) => k !== name));
      const e = refusal(() => verifyWebhook(body, without, endpoint.secret));
      expect(e.code).toBe('missing_header');
      expect(e.message).toContain(name);
    }
    expect(refusal(() => verifyWebhook(body, { ...headers, 'webhook-timestamp': 'yesterday' }, endpoint.secret)).code).toBe('invalid_timestamp');
    expect(refusal(() => verifyWebhook(body, headers, [])).code).toBe('invalid_secret');
    expect(refusal(() => verifyWebhook(body, headers, 'whsec_')).code).toBe('invalid_secret');
  });

  it('after a rotation, deliveries carry two signatures and verify with the new, the old, or both secrets', async () => {
    const rotated = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/rotate-secret`)).body.data as { secret: string };
    const done = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    const ping = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data as { event_id: string };
    await done;
    const [delivery] = await receiver.waitFor((r) => r.json.id === ping.event_id);
    expect(delivery!.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    const event = verifyWebhook(delivery!.body, delivery!.headers, rotated.secret);
    expect(event.type).toBe('ping');
    if (event.type === 'ping') expect(event.data.endpoint_id).toBe(endpoint.id);
    expect(verifyWebhook(delivery!.body, delivery!.headers, endpoint.secret).id).toBe(ping.event_id);
    expect(verifyWebhook(delivery!.body, delivery!.headers, [generateSecret(), rotated.secret]).id).toBe(ping.event_id);
    // Deliveries signed before the rotation verify with the old secret only.
    expect(refusal(() => verifyWebhook(deliveries[0]!.body, deliveries[0]!.headers, rotated.secret)).code).toBe('invalid_signature');
  });
});
