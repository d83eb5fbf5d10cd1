/**
 * Example records for the OpenAPI document: one per resource, in the exact shape of the read API's
 * schemas (test/api/openapi-document.test.ts validates each against its schema), used as the example
 * payload of every webhook event type.
 */
import type { FeedEventType } from '../resources/registry.ts';

const productId = '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f60';
const variantId = '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f61';
const customerId = '0193a5c2-8a10-7c22-8e31-4d5e6f708192';
const orderId = '0193a5c3-0b12-7d34-a5b6-c7d8e9f0a1b2';

export const exampleProduct = {
  id: productId,
  name: 'Linen shirt',
  slug: 'linen-shirt',
  product_type: 'physical',
  barcode: null,
  sku: 'SHIRT-LIN',
  price: 49.9,
  cost_price: 21.5,
  stock: 12,
  category_id: 'shirts',
  thumbnail_url: 'https://cdn.example.com/linen-shirt.jpg',
  is_active: true,
  variants: [{ id: variantId, name: 'M / white', sku: 'SHIRT-LIN-M-W', price: 49.9, stock: 12, attributes: { size: 'M', color: 'white' } }],
  images: [{ id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f62', image_url: 'https://cdn.example.com/linen-shirt.jpg', is_primary: true }],
  created_at: '2026-11-20T09:12:44.120034Z',
  last_modified: '2026-11-21T14:05:30.770123Z',
};

export const exampleCustomer = {
  id: customerId,
  name: 'Amira Haddad',
  phone: '+33 6 12 34 56 78',
  email: 'amira@example.com',
  city: 'Lyon',
  is_active: true,
  created_at: '2026-11-19T17:40:02.000511Z',
  last_modified: '2026-11-21T14:05:30.770123Z',
};

export const exampleOrder = {
  id: orderId,
  source: 'pos',
  status: 'completed',
  payment_status: 'paid',
  payment_method: 'card',
  customer_id: customerId,
  customer_name: 'Amira Haddad',
  customer_phone: '+33 6 12 34 56 78',
  subtotal: 99.8,
  discount: 0,
  delivery_fee: 0,
  total: 99.8,
  items: [
    {
      id: '0193a5c3-0b12-7d34-a5b6-c7d8e9f0a1b3',
      product_id: productId,
      variant_id: variantId,
      product_name: 'Linen shirt',
      variant_name: 'M / white',
      quantity: 2,
      unit_price: 49.9,
      total: 99.8,
    },
  ],
  created_at: '2026-11-21T14:05:30.770123Z',
  last_modified: '2026-11-21T14:05:30.770123Z',
};

export const exampleInventoryRecord = {
  product_id: productId,
  product_name: 'Linen shirt',
  sku: 'SHIRT-LIN',
  stock: 12,
  is_active: true,
  variants: [{ variant_id: variantId, variant_name: 'M / white', sku: 'SHIRT-LIN-M-W', stock: 12 }],
  last_modified: '2026-11-21T14:05:30.770123Z',
};

export const exampleStockMovement = {
  id: '0193a5c3-0b12-7d34-a5b6-c7d8e9f0a1b4',
  product_id: productId,
  variant_id: variantId,
  sku: 'SHIRT-LIN-M-W',
  reason: 'sale',
  quantity_change: -2,
  stock_before: 14,
  stock_after: 12,
  order_id: orderId,
  note: null,
  created_at: '2026-11-21T14:05:30.770123Z',
  last_modified: '2026-11-21T14:05:30.770123Z',
};

const EXAMPLE_DATA: Readonly<Record<FeedEventType, unknown>> = {
  'product.created': exampleProduct,
  'product.updated': exampleProduct,
  'order.created': exampleOrder,
  'order.updated': exampleOrder,
  'customer.created': exampleCustomer,
  'customer.updated': exampleCustomer,
  'inventory.updated': exampleInventoryRecord,
  'stock_movement.created': exampleStockMovement,
};

/** The example body of a webhook (and events feed entry) of `type`. */
export function exampleEvent(type: FeedEventType | 'ping'): Record<string, unknown> {
  const base = { id: '0193a5c3-0b13-7e55-b6c7-d8e9f0a1b2c3', type, created_at: '2026-11-21T14:05:30.770123Z' };
  if (type === 'ping') {
    return { ...base, data: { endpoint_id: '0193a5c1-1111-7222-8333-444455556666', message: 'Test event sent on demand from the admin API' } };
  }
  return { ...base, data: EXAMPLE_DATA[type] };
}
