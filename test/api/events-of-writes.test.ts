/**
 * The events of writes: each admin write appends its event in the same transaction, carrying the
 * record exactly as the read API returns it once the write is done — an order's `order.created`
 * with every item, a product's `product.updated` after an image is added or changed. Read back
 * through the events feed, no worker needed (test/webhooks/webhook-events.test.ts checks the same
 * payloads as a receiver gets them).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';

type FeedEvent = { id: string; type: string; created_at: string; data: Record<string, any> };

describe.each(backends)('events of admin writes (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };
  let reader: { authorization: string };

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    admin = await t.auth(['admin']);
    reader = await t.auth();
  });
  afterAll(async () => t?.close());

  const write = async (method: 'POST' | 'PATCH', url: string, payload: object) => {
    const res = await t.app.inject({ method, url: `/admin/api/v1${url}`, headers: admin, payload });
    expect(res.statusCode, res.body).toBeLessThan(300);
    return res.json().data;
  };
  const read = async (url: string) => {
    const res = await t.app.inject({ url: `/api/v1${url}`, headers: reader });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().data;
  };
  /** The events of `type` about record `id`, oldest first, from the events feed. */
  const eventsOf = async (type: string, id: string): Promise<FeedEvent[]> =>
    ((await read(`/events?type=${type}&limit=200`)) as FeedEvent[]).filter((e) => e.data.id === id);

  const aProduct = (n: number) =>
    write('POST', '/products', {
      name: `Events product ${n}`,
      product_type: 'physical',
      price: 10,
      sku: `EV-${process.pid}-${n}`,
      variants: [{ name: 'M', price: 10 + n, stock: 50, sku: `EV-${process.pid}-${n}-M`, attributes: { size: 'M' } }],
    });

  it('order.created carries the new order with all its items, as GET /orders/:id returns it', async () => {
    const [a, b] = [await aProduct(1), await aProduct(2)];
    const order = await write('POST', '/orders', {
      source: 'online',
      payment_method: 'card',
      customer_name: 'Events Buyer',
      items: [
        { product_id: a.id, variant_id: a.variants[0].id, quantity: 2 },
        { product_id: b.id, variant_id: b.variants[0].id, quantity: 1 },
      ],
    });
    const stored = await read(`/orders/${order.id}`);
    expect(stored.items).toHaveLength(2);
    const events = await eventsOf('order.created', order.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toEqual(stored);
  });

  it('product.updated after an image is added or changed carries the product with its images', async () => {
    const product = await aProduct(3);
    const added = await write('POST', `/products/${product.id}/images`, { image_url: 'https://cdn.example.com/a.jpg', is_primary: true });
    const withImage = await read(`/products/${product.id}`);
    expect(withImage.images).toHaveLength(1);
    expect((await eventsOf('product.updated', product.id)).at(-1)!.data).toEqual(withImage);

    const imageId = (added.images ?? withImage.images)[0].id;
    await write('PATCH', `/products/${product.id}/images/${imageId}`, { image_url: 'https://cdn.example.com/b.jpg' });
    const changed = await read(`/products/${product.id}`);
    expect(changed.images[0].image_url).toBe('https://cdn.example.com/b.jpg');
    expect((await eventsOf('product.updated', product.id)).at(-1)!.data).toEqual(changed);
  });
});
