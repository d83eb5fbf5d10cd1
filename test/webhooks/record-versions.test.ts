/**
 * Record versions and what changed (decision 0057), on both back ends, for every resource: a record
 * is version 1 when created and one more with every write that changes it (its variants, images or
 * items included; a write of several statements counts once), the read API, the export, the events
 * feed and every event's `data` give the same version, an `*.updated` event's `previous` holds exactly
 * the fields the write changed with their values before it (a child array whole), and the very same
 * payloads reach an HTTP endpoint, RabbitMQ, Mosquitto and NATS JetStream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import { amqpConsumer, mqttConsumer, natsConsumer, MOSQUITTO, NATS, RABBITMQ } from './broker-kit.ts';

type Envelope = { id: string; type: string; created_at: string; data: Record<string, any>; previous?: Record<string, unknown> };

describe.each(backends)('record versions and what changed (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  let reader: { authorization: string };
  let amqp: Awaited<ReturnType<typeof amqpConsumer>>;
  let mqtt: Awaited<ReturnType<typeof mqttConsumer>>;
  let nats: Awaited<ReturnType<typeof natsConsumer>>;
  /** Ids of the records this file wrote: their events are the ones every destination must carry. */
  const written = new Set<string>();
  let httpEndpoint: string;
  let amqpEndpoint: string;

  beforeAll(async () => {
    kit = await webhookTestKit(backend);
    receiver = await new WebhookReceiver().start();
    receiver.respond = ok;
    reader = await kit.t.auth();
    amqp = await amqpConsumer();
    mqtt = await mqttConsumer();
    nats = await natsConsumer();
    // Every event type to each destination.
    httpEndpoint = (await kit.createEndpoint(receiver.url)).id;
    amqpEndpoint = (await kit.createEndpoint(`amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=${amqp.exchange}`)).id;
    await kit.createEndpoint(`mqtt://${MOSQUITTO.host}:${MOSQUITTO.port}/${mqtt.prefix}`);
    await kit.createEndpoint(`nats://${NATS.host}:${NATS.port}/${nats.prefix}`);
  }, 60_000);
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
    await amqp?.close();
    await mqtt?.close();
    await nats?.close();
  });

  const admin = async (method: 'POST' | 'PATCH', url: string, payload: unknown, contentType?: string) => {
    const res = await kit.t.app.inject({
      method,
      url: `/admin/api/v1${url}`,
      headers: { ...kit.admin, ...(contentType ? { 'content-type': contentType } : {}) },
      payload: payload as string,
    });
    expect(res.statusCode, res.body).toBeLessThan(300);
    return res.json().data;
  };
  const read = async (url: string) => {
    const res = await kit.t.app.inject({ url: `/api/v1${url}`, headers: reader });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().data;
  };
  /** The record as the NDJSON export gives it. */
  const exported = async (path: string, key: string, id: string) => {
    const res = await kit.t.app.inject({ url: `/api/v1/${path}/export`, headers: reader });
    expect(res.statusCode, res.body).toBe(200);
    return res.body
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line))
      .find((r) => r[key] === id);
  };
  /** Every event of the feed about record `id` (by its key), oldest first. */
  const eventsOf = async (id: string): Promise<Envelope[]> => {
    const all: Envelope[] = [];
    let cursor: string | null = null;
    for (;;) {
      const res: { statusCode: number; body: string; json(): unknown } = await kit.t.app.inject({
        url: `/api/v1/events?limit=200${cursor ? `&cursor=${cursor}` : ''}`,
        headers: reader,
      });
      expect(res.statusCode, res.body).toBe(200);
      const page = res.json() as { data: Envelope[]; pagination: { has_more: boolean; next_cursor: string | null } };
      all.push(...page.data);
      if (!page.pagination.has_more) break;
      cursor = page.pagination.next_cursor;
    }
    return all.filter((e) => (e.data.id ?? e.data.product_id) === id);
  };
  const ofType = (events: Envelope[], type: string) => events.filter((e) => e.type === type);
  const inventoryOf = async (productId: string) => (await read('/inventory?limit=200')).find((r: { product_id: string }) => r.product_id === productId);

  it('customers: 1 when created, 2 and 3 after two updates, in the API, the export and the events; previous holds the old values', async () => {
    const customer = await admin('POST', '/customers', { name: 'Vera Version', email: 'vera@example.com' });
    written.add(customer.id);
    expect(customer.version).toBe(1);
    expect((await read(`/customers/${customer.id}`)).version).toBe(1);

    await admin('PATCH', `/customers/${customer.id}`, { name: 'Vera Versioned' });
    expect((await read(`/customers/${customer.id}`)).version).toBe(2);
    await admin('PATCH', `/customers/${customer.id}`, { city: 'Lyon', email: 'vera@lyon.example' });
    const now = await read(`/customers/${customer.id}`);
    expect(now.version).toBe(3);
    expect(await exported('customers', 'id', customer.id)).toEqual(now);

    const events = await eventsOf(customer.id);
    expect(events.map((e) => [e.type, e.data.version])).toEqual([
      ['customer.created', 1],
      ['customer.updated', 2],
      ['customer.updated', 3],
    ]);
    expect(events[0]).not.toHaveProperty('previous');
    expect(events[1]!.previous).toEqual({ name: 'Vera Version' });
    expect(events[2]!.previous).toEqual({ email: 'vera@example.com', city: null });
    expect(events[2]!.data).toEqual(now);
  });

  it('products and their inventory records: one version per write, children included; previous names the changed fields and whole child arrays', async () => {
    // Created with a variant and its initial stock (an adjustment movement), in one write: version 1.
    const product = await admin('POST', '/products', {
      name: 'Version Tee',
      product_type: 'physical',
      price: 10,
      sku: `VER-${backend}`,
      variants: [{ name: 'M', price: 10, stock: 5, sku: `VER-${backend}-M`, attributes: { size: 'M' } }],
    });
    written.add(product.id);
    const v1 = await read(`/products/${product.id}`);
    expect(v1.version).toBe(1);
    expect((await inventoryOf(product.id)).version).toBe(1);

    await admin('PATCH', `/products/${product.id}`, { price: 12.5 });
    const v2 = await read(`/products/${product.id}`);
    expect(v2.version).toBe(2);

    const variantId = v1.variants[0].id;
    await admin('PATCH', `/products/${product.id}/variants/${variantId}`, { name: 'Medium' });
    const v3 = await read(`/products/${product.id}`);
    expect(v3.version).toBe(3);
    const inventory3 = await inventoryOf(product.id);
    expect(inventory3.version).toBe(3);
    expect(await exported('products', 'id', product.id)).toEqual(v3);
    expect(await exported('inventory', 'product_id', product.id)).toEqual(inventory3);

    let events = await eventsOf(product.id);
    expect(ofType(events, 'product.created').map((e) => e.data.version)).toEqual([1]);
    const updates = ofType(events, 'product.updated');
    expect(updates.map((e) => e.data.version)).toEqual([2, 3]);
    expect(updates[0]!.previous).toEqual({ price: 10 });
    expect(updates[1]!.previous).toEqual({ variants: v2.variants });
    expect(updates[1]!.data).toEqual(v3);
    // The inventory record shares its product's version; its previous lists its own fields.
    const inventoryUpdates = ofType(events, 'inventory.updated');
    expect(inventoryUpdates.at(-1)!.data).toEqual(inventory3);
    expect(inventoryUpdates.at(-1)!.previous).toEqual({ variants: [{ ...inventory3.variants[0], variant_name: 'M' }] });

    // A stock adjustment (its own statements, documents built in the stock write): version 4.
    const inventoryBefore = inventory3;
    await admin('POST', '/inventory/adjustments', { product_id: product.id, variant_id: variantId, quantity_change: 7, note: 'recount' });
    const v4 = await read(`/products/${product.id}`);
    expect(v4.version).toBe(4);
    expect(v4.stock).toBe(12);
    events = await eventsOf(product.id);
    expect(ofType(events, 'product.updated').at(-1)).toMatchObject({ data: v4, previous: { stock: 5, variants: v3.variants } });
    const inventory4 = await inventoryOf(product.id);
    expect(inventory4.version).toBe(4);
    expect(ofType(events, 'inventory.updated').at(-1)).toMatchObject({
      data: inventory4,
      previous: { stock: 5, variants: inventoryBefore.variants },
    });
    expect(Object.keys(ofType(events, 'inventory.updated').at(-1)!.previous!)).toEqual(['stock', 'variants']);
    // Movements never change: version 1, created only, no previous.
    const movements = await read(`/inventory/movements?product_id=${product.id}`);
    expect(movements.map((m: { version: number }) => m.version)).toEqual(movements.map(() => 1));
    const movementEvents = ofType(await eventsOf(movements.at(-1).id), 'stock_movement.created');
    expect(movementEvents).toHaveLength(1);
    expect(movementEvents[0]!.data.version).toBe(1);
    expect(movementEvents[0]).not.toHaveProperty('previous');

    // A CSV import (the bulk path, documents built by the import's own statement): version 5.
    await admin('POST', '/inventory/import', `sku,stock\nVER-${backend}-M,40\n`, 'text/csv');
    const v5 = await read(`/products/${product.id}`);
    expect(v5.version).toBe(5);
    events = await eventsOf(product.id);
    const inventory5 = await inventoryOf(product.id);
    expect(inventory5.version).toBe(5);
    expect(ofType(events, 'inventory.updated').at(-1)).toEqual(
      expect.objectContaining({ data: inventory5, previous: { stock: 12, variants: inventory4.variants } }),
    );
  });

  it('orders: placed with its items is 1, a status and a payment status change are 2 and 3; previous holds the old statuses', async () => {
    const product = await admin('POST', '/products', {
      name: 'Version Mug',
      product_type: 'physical',
      price: 8,
      sku: `VER-MUG-${backend}`,
      variants: [{ name: 'One', price: 8, stock: 50, sku: `VER-MUG-${backend}-1`, attributes: {} }],
    });
    written.add(product.id);
    const order = await admin('POST', '/orders', {
      source: 'online',
      payment_method: 'card',
      customer_name: 'Otto Order',
      items: [{ product_id: product.id, variant_id: product.variants[0].id, quantity: 2 }],
    });
    written.add(order.id);
    expect((await read(`/orders/${order.id}`)).version).toBe(1);
    await admin('POST', `/orders/${order.id}/status`, { status: 'processing' });
    expect((await read(`/orders/${order.id}`)).version).toBe(2);
    await admin('POST', `/orders/${order.id}/payment-status`, { payment_status: 'paid' });
    const now = await read(`/orders/${order.id}`);
    expect(now.version).toBe(3);
    expect(await exported('orders', 'id', order.id)).toEqual(now);

    const events = await eventsOf(order.id);
    expect(events.map((e) => [e.type, e.data.version])).toEqual([
      ['order.created', 1],
      ['order.updated', 2],
      ['order.updated', 3],
    ]);
    expect(events[0]!.data.items).toHaveLength(1);
    expect(events[1]!.previous).toEqual({ status: 'pending' });
    expect(events[2]!.previous).toEqual({ payment_status: 'pending' });
  });

  it('every destination receives the very payloads of the feed: HTTP, RabbitMQ, Mosquitto and NATS JetStream', { timeout: 120_000 }, async () => {
    const feed = new Map<string, Envelope>();
    for (const id of written) for (const e of await eventsOf(id)) feed.set(e.id, e);
    // The movements of the written products too.
    for (const e of (await read('/events?limit=200&type=stock_movement.created')) as Envelope[]) if (written.has(e.data.product_id)) feed.set(e.id, e);
    expect(feed.size).toBeGreaterThan(5);
    const has = (bodies: string[]) => {
      const seen = new Map(bodies.map((b) => [JSON.parse(b).id as string, JSON.parse(b)]));
      return [...feed.keys()].every((id) => seen.has(id));
    };
    for (const id of feed.keys()) await receiver.waitFor((r) => r.json.id === id, 1, 90_000);
    await amqp.log.waitFor((l) => has(l.messages.map((m) => m.body)), 90_000, 'RabbitMQ messages');
    await mqtt.log.waitFor((l) => has(l.messages.map((m) => m.body)), 90_000, 'Mosquitto messages');
    for (let round = 0; ; round++) {
      await nats.readAll();
      if (has(nats.log.messages.map((m) => m.body))) break;
      expect(round, 'NATS JetStream received every event').toBeLessThan(600);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const [name, bodies] of [
      ['http', receiver.requests.map((r) => r.body)],
      ['amqp', amqp.log.messages.map((m) => m.body)],
      ['mqtt', mqtt.log.messages.map((m) => m.body)],
      ['nats', nats.log.messages.map((m) => m.body)],
    ] as const) {
      const received = new Map(bodies.map((b) => [JSON.parse(b).id as string, JSON.parse(b) as Envelope]));
      for (const [id, event] of feed) expect(received.get(id), `${name}: ${event.type} v${event.data.version}`).toEqual(event);
    }

    // The admin API's delivery detail shows the event as delivered, previous included, and each
    // attempt's headers: the HTTP request's and answer's, the broker message's (no answer).
    const updated = [...feed.values()].find((e) => e.type === 'customer.updated' && e.previous !== undefined)!;
    const created = [...feed.values()].find((e) => e.type === 'customer.created')!;
    for (const [endpoint, answered] of [
      [httpEndpoint, true],
      [amqpEndpoint, false],
    ] as const) {
      for (const event of [updated, created]) {
        const page = (await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint}&id=${event.id}`)).body.data as { id: string }[];
        expect(page).toHaveLength(1);
        const detail = (await kit.api('GET', `/webhooks/deliveries/${page[0]!.id}`)).body.data;
        expect(detail.event).toEqual(event);
        const attempt = detail.attempts.at(-1);
        expect(attempt.outcome).toBe('success');
        expect(attempt.request_headers).toMatchObject({ 'webhook-id': event.id, 'webhook-signature': expect.stringMatching(/^v1,/) });
        if (answered) expect(attempt.response_headers).toMatchObject({ date: expect.any(String) });
        else expect(attempt.response_headers).toBeNull();
      }
    }
  });
});
