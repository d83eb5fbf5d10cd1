/** Small builders of store data through the real write services (so events and movements happen). */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { createProduct, type ProductInput } from '../../src/catalog/catalog.service.ts';
import { createCustomer } from '../../src/customers/customer.service.ts';
import { placeOrder } from '../../src/orders/order.service.ts';
import { createStore } from '../../src/stores/store.service.ts';
import { asPlatform } from '../../src/db/store-scope.ts';
import { isoFromMillis } from '../../src/shared/time.ts';

let counter = 0;
const next = () => ++counter;

export interface ProductJson {
  id: string;
  sku: string | null;
  stock: number;
  price: number;
  last_modified: string;
  variants: { id: string; sku: string | null; stock: number; price: number; attributes: Record<string, string> }[];
  images: { id: string; image_url: string; is_primary: boolean }[];
  is_active: boolean;
}

export async function aProduct(db: Kysely<Database>, overrides: Partial<ProductInput> = {}): Promise<ProductJson> {
  const n = next();
  return (await createProduct(db, {
    name: `Test product ${n}`,
    product_type: 'physical',
    sku: `T-${process.pid}-${n}`,
    price: 10,
    stock: 20,
    ...overrides,
  })) as ProductJson;
}

export async function aProductWithVariants(db: Kysely<Database>, stocks: number[] = [5, 7]): Promise<ProductJson> {
  const n = next();
  return (await createProduct(db, {
    name: `Variant product ${n}`,
    product_type: 'physical',
    sku: `TV-${process.pid}-${n}`,
    price: 25,
    variants: stocks.map((stock, i) => ({
      name: `Size ${i}`,
      sku: `TV-${process.pid}-${n}-${i}`,
      price: 25 + i,
      stock,
      attributes: { size: String(i), color: 'red' },
    })),
    images: [{ image_url: `https://img.example.com/${n}.jpg`, is_primary: true }],
  })) as ProductJson;
}

export async function aCustomer(db: Kysely<Database>) {
  const n = next();
  return (await createCustomer(db, { name: `Customer ${n}`, email: `c${n}@example.com`, city: 'Lisbon' })) as { id: string; last_modified: string };
}

export interface OrderJson {
  id: string;
  status: string;
  payment_status: string;
  subtotal: number;
  discount: number;
  delivery_fee: number;
  total: number;
  items: { product_id: string; variant_id: string | null; quantity: number; unit_price: number; total: number }[];
  last_modified: string;
  created_at: string;
}

export async function anOrder(
  db: Kysely<Database>,
  items: { product_id: string; variant_id?: string | null; quantity: number; unit_price?: number }[],
  extra: { discount?: number; delivery_fee?: number } = {},
) {
  return (await placeOrder(db, { source: 'online', payment_method: 'card', customer_name: 'Walk-in', items, ...extra })) as OrderJson;
}

/**
 * A new store (named `name` and a uuid) with one enabled endpoint (to a closed port), created a
 * minute ago: events of the store fan out to it.
 */
export async function aStoreWithEndpoint(db: Kysely<Database>, name: string): Promise<{ id: string; endpoint: string }> {
  const store = await createStore(db, { name: `${name} ${randomUUID()}` });
  const endpoint = randomUUID();
  await asPlatform(() =>
    sql`INSERT INTO webhook_endpoints (id, store_id, url, secret, created_at, updated_at)
      VALUES (${endpoint}, ${store.id}::uuid, ${`http://127.0.0.1:9/${name}`}, 'whsec_test', ${isoFromMillis(Date.now() - 60_000)}::timestamptz, now())`.execute(
      db,
    ),
  );
  return { id: store.id, endpoint };
}
