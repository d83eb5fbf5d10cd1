/**
 * Every kind of data change made through the admin API reaches a subscribed receiver as the right
 * event, with the full resource as `data` (exactly what the read API returns for it).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDeepStrictEqual } from 'node:util';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok, type ReceivedRequest } from './webhook-receiver.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

describe.each(backends)('data changes arrive as webhook events (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  let reader: { authorization: string };

  beforeAll(async () => {
    kit = await webhookTestKit(backend);
    receiver = await new WebhookReceiver().start();
    receiver.respond = ok;
    reader = await kit.t.auth();
    await kit.createEndpoint(receiver.url); // all event types
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
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
  /** Waits for one request of `type` whose data equals `data` exactly. */
  const arrives = async (type: string, data: unknown): Promise<ReceivedRequest[]> => {
    try {
      return await receiver.waitFor((r) => r.json.type === type && isDeepStrictEqual(r.json.data, data), 1, 20_000);
    } catch (error) {
      const sameType = receiver.requests.filter((r) => r.json.type === type).map((r) => r.json.data);
      expect(sameType, `no ${type} with the expected data (${(error as Error).message})`).toContainEqual(data);
      throw error;
    }
  };
  const movement = async (productId: string, reason: string) => {
    const movements = await read(`/inventory/movements?product_id=${productId}&order=desc&limit=1`);
    expect(movements[0].reason).toBe(reason);
    return movements[0];
  };
  const inventoryOf = async (productId: string) => (await read('/inventory?limit=200')).find((r: { product_id: string }) => r.product_id === productId);

  it('catalog, customers, orders, adjustments and CSV imports each arrive as their events with the full resource', async () => {
    // Product created with a variant (its initial stock is an adjustment movement).
    const product = await admin('POST', '/products', {
      name: 'Webhook Tee',
      product_type: 'physical',
      price: 10,
      sku: 'WH-TEE',
      variants: [{ name: 'M', price: 10, stock: 5, sku: 'WH-TEE-M', attributes: { size: 'M' } }],
    });
    const created = await read(`/products/${product.id}`);
    // product.created is appended after the initial stock is booked, so it carries the final product.
    await arrives('product.created', created);
    await arrives('stock_movement.created', await movement(product.id, 'adjustment'));

    // Product updated.
    const updated = await admin('PATCH', `/products/${product.id}`, { price: 12.5, name: 'Webhook Tee 2' });
    expect(updated.price).toBe(12.5);
    await arrives('product.updated', await read(`/products/${product.id}`));

    // Variant added, then updated.
    const variant = await admin('POST', `/products/${product.id}/variants`, { name: 'L', price: 13.99, stock: 4, sku: 'WH-TEE-L', attributes: { size: 'L' } });
    const withVariant = await read(`/products/${product.id}`);
    expect(withVariant.variants.map((v: { sku: string }) => v.sku)).toContain('WH-TEE-L');
    await arrives('product.updated', withVariant);
    await arrives('inventory.updated', await inventoryOf(product.id));
    const variantId = (variant.variants ?? withVariant.variants).find((v: { sku: string }) => v.sku === 'WH-TEE-L').id;
    await admin('PATCH', `/products/${product.id}/variants/${variantId}`, { price: 14.5 });
    await arrives('product.updated', await read(`/products/${product.id}`));

    // Image added.
    await admin('POST', `/products/${product.id}/images`, { image_url: 'https://cdn.example.com/tee.jpg', is_primary: true });
    const withImage = await read(`/products/${product.id}`);
    expect(withImage.images).toHaveLength(1);
    await arrives('product.updated', withImage);

    // Customer created and updated.
    const customer = await admin('POST', '/customers', { name: 'Ada Hook', email: 'ada@example.com' });
    await arrives('customer.created', await read(`/customers/${customer.id}`));
    await admin('PATCH', `/customers/${customer.id}`, { city: 'Lyon' });
    const movedCustomer = await read(`/customers/${customer.id}`);
    expect(movedCustomer.city).toBe('Lyon');
    await arrives('customer.updated', movedCustomer);

    // Order placed: order.created, a sale movement, the stock change.
    const order = await admin('POST', '/orders', {
      source: 'online',
      customer_id: customer.id,
      items: [{ product_id: product.id, variant_id: variantId, quantity: 2 }],
    });
    await arrives('order.created', await read(`/orders/${order.id}`));
    await arrives('stock_movement.created', await movement(product.id, 'sale'));
    await arrives('inventory.updated', await inventoryOf(product.id));

    // Status change and payment change.
    await admin('POST', `/orders/${order.id}/status`, { status: 'processing' });
    const processing = await read(`/orders/${order.id}`);
    expect(processing.status).toBe('processing');
    await arrives('order.updated', processing);
    await admin('POST', `/orders/${order.id}/payment-status`, { payment_status: 'paid' });
    const paid = await read(`/orders/${order.id}`);
    expect(paid.payment_status).toBe('paid');
    await arrives('order.updated', paid);

    // Manual adjustment.
    const adjusted = await admin('POST', '/inventory/adjustments', { product_id: product.id, variant_id: variantId, quantity_change: 7, note: 'recount' });
    const adjustment = await movement(product.id, 'adjustment');
    expect(adjustment.id).toBe(adjusted.movement_id);
    await arrives('stock_movement.created', adjustment);
    await arrives('inventory.updated', await inventoryOf(product.id));
    await arrives('product.updated', await read(`/products/${product.id}`));

    // CSV import.
    await admin('POST', '/inventory/import', 'sku,stock\nWH-TEE-L,40\n', 'text/csv');
    const imported = await movement(product.id, 'bulk_import');
    expect(imported.stock_after).toBe(40);
    await arrives('stock_movement.created', imported);
    const inventory = await inventoryOf(product.id);
    expect(inventory.variants.find((v: { sku: string }) => v.sku === 'WH-TEE-L').stock).toBe(40);
    await arrives('inventory.updated', inventory);

    // Every request is a well-formed, signed payload of an event type from the list.
    for (const r of receiver.requests) {
      // An *.updated event carries what changed too (decision 0057; test/webhooks/record-versions.test.ts checks its values).
      expect(Object.keys(r.json).sort()).toEqual(
        r.json.type.endsWith('.updated') ? ['created_at', 'data', 'id', 'previous', 'type'] : ['created_at', 'data', 'id', 'type'],
      );
      expect(r.headers['webhook-id']).toBe(r.json.id);
      expect(r.json.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    }
  }, 60_000);
});
