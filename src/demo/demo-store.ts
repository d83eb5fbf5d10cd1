/**
 * Demo store generator: a realistic store of a chosen size — every product type, variants with
 * attributes, images, customers, orders in every status and payment status, and the stock movements
 * those imply. Deterministic for a given seed.
 *
 * Products and customers are written in batches (set-based inserts, one write transaction per
 * batch) so tens of thousands take seconds; orders go through the order service one by one so they
 * follow the real transitions and stock rules. Every batch appends its events like any other write.
 */
import { randomUUID } from 'node:crypto';
import type { Insertable, Kysely } from 'kysely';
import type { Database, ProductTable } from '../db/schema.ts';
import { runWrite } from '../db/write-clock.ts';
import { PRODUCT_TYPES, isStockTracked, type ProductType } from '../catalog/product.json-sql.ts';
import { slugify } from '../catalog/catalog.service.ts';
import { customerChanged, inventoryChanged, productsChanged } from '../events/resource-events.ts';
import { applyStockChanges, refreshProducts, type StockChange } from '../inventory/stock.service.ts';
import { changeOrderStatus, changePaymentStatus, placeOrder } from '../orders/order.service.ts';
import { ORDER_STATUSES, pathTo, type PaymentStatus } from '../orders/order-status.ts';
import { sql } from 'kysely';

export interface DemoOptions {
  products: number;
  customers?: number;
  orders?: number;
  seed?: number;
  batchSize?: number;
  /** Called as work advances: (done, total, phase). */
  onProgress?: (done: number, total: number, phase: string) => void;
}

export interface DemoSummary {
  products: number;
  customers: number;
  orders: number;
}

/** Small deterministic PRNG (mulberry32). */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min: number, max: number) => min + Math.floor(next() * (max - min + 1)),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
    money: (min: number, max: number) => Math.round((min + next() * (max - min)) * 100) / 100,
  };
}

const ADJECTIVES = ['Classic', 'Organic', 'Premium', 'Everyday', 'Vintage', 'Compact', 'Deluxe', 'Handmade', 'Eco', 'Urban'];
const NOUNS: Record<ProductType, readonly string[]> = {
  physical: ['T-Shirt', 'Backpack', 'Mug', 'Sneakers', 'Desk Lamp', 'Water Bottle', 'Hoodie', 'Notebook'],
  food: ['Coffee Beans', 'Granola', 'Olive Oil', 'Pizza Margherita', 'Green Tea', 'Chocolate Bar'],
  digital: ['E-Book', 'Font Pack', 'Photo Preset', 'Course Video'],
  digital_card: ['Gift Card', 'Game Key', 'Software License'],
  service: ['Gift Wrapping', 'Installation', 'Consultation', 'Repair'],
  bundle: ['Starter Kit', 'Holiday Box', 'Tasting Set'],
};
const COLORS = ['Black', 'White', 'Navy', 'Red', 'Olive'];
const SIZES = ['S', 'M', 'L', 'XL'];
const WEIGHTS = ['250g', '500g', '1kg'];
const FIRST = ['Amina', 'Lukas', 'Sofia', 'Omar', 'Mei', 'Jonas', 'Lea', 'Yusuf', 'Chloe', 'Ivan', 'Nora', 'Tariq'];
const LAST = ['Novak', 'Haddad', 'Schmidt', 'Rossi', 'Kim', 'Okafor', 'Silva', 'Dubois', 'Larsen', 'Patel'];
const CITIES = ['Berlin', 'Lisbon', 'Casablanca', 'Oslo', 'Seoul', 'Lagos', 'Lyon', 'Porto'];
const PAYMENT_METHODS = ['card', 'cash', 'bank_transfer', 'wallet'];

/** Generates a demo store into `db`. */
export async function generateDemoStore(db: Kysely<Database>, options: DemoOptions): Promise<DemoSummary> {
  const rnd = prng(options.seed ?? 42);
  const productCount = options.products;
  const customerCount = options.customers ?? Math.max(20, Math.round(productCount / 3));
  const orderCount = options.orders ?? Math.max(ORDER_STATUSES.length * 4, Math.min(2000, Math.round(productCount / 2)));
  const batch = options.batchSize ?? 250;
  const total = productCount + customerCount + orderCount;
  let done = 0;
  const tick = (n: number, phase: string) => {
    done += n;
    options.onProgress?.(done, total, phase);
  };

  // ---- products -------------------------------------------------------------------------------
  const orderable: { productId: string; variantId: string | null }[] = [];
  for (let start = 0; start < productCount; start += batch) {
    const size = Math.min(batch, productCount - start);
    await runWrite(db, async (ctx) => {
      const products: Insertable<ProductTable>[] = [];
      const variants: Record<string, unknown>[] = [];
      const images: Record<string, unknown>[] = [];
      const stock: StockChange[] = [];
      for (let i = 0; i < size; i++) {
        const n = start + i;
        const id = randomUUID();
        // Every type appears; physical and food dominate like in a real shop.
        const type: ProductType = n < PRODUCT_TYPES.length ? PRODUCT_TYPES[n]! : rnd.pick(['physical', 'physical', 'physical', 'food', 'food', 'digital', 'digital_card', 'service', 'bundle'] as const);
        const name = `${rnd.pick(ADJECTIVES)} ${rnd.pick(NOUNS[type])} ${n + 1}`;
        const price = rnd.money(2, 250);
        const withVariants = (type === 'physical' || type === 'food') && rnd.next() < 0.6;
        products.push({
          id, name, slug: `${slugify(name)}-${id.slice(0, 8)}`, product_type: type,
          barcode: type === 'physical' || type === 'food' ? String(4000000000000 + n) : null,
          sku: `SKU-${String(n + 1).padStart(6, '0')}`,
          price, cost_price: Math.round(price * 55) / 100, own_stock: 0, stock: 0,
          category_id: `cat-${rnd.int(1, 12)}`,
          thumbnail_url: `https://images.example.com/products/${id}/thumb.jpg`,
          is_active: rnd.next() > 0.05,
          created_at: ctx.stamp, last_modified: ctx.stamp,
        });
        if (withVariants) {
          const options = type === 'food' ? WEIGHTS.map((w) => ({ weight: w })) : COLORS.slice(0, rnd.int(1, 3)).flatMap((c) => SIZES.slice(0, rnd.int(2, 4)).map((s) => ({ color: c, size: s })));
          options.forEach((attributes, position) => {
            const variantId = randomUUID();
            variants.push({
              id: variantId, product_id: id, name: Object.values(attributes).join(' / '),
              sku: `SKU-${String(n + 1).padStart(6, '0')}-${position + 1}`,
              price: Math.round((price + position) * 100) / 100, stock: 0,
              attributes: JSON.stringify(attributes), position, is_active: true, created_at: ctx.stamp,
            });
            stock.push({ productId: id, variantId, delta: rnd.int(5, 200), reason: 'adjustment', note: 'initial stock' });
            orderable.push({ productId: id, variantId });
          });
        } else {
          if (isStockTracked(type)) stock.push({ productId: id, variantId: null, delta: rnd.int(5, 500), reason: 'adjustment', note: 'initial stock' });
          orderable.push({ productId: id, variantId: null });
        }
        for (let k = 0; k < rnd.int(1, 3); k++) {
          images.push({ id: randomUUID(), product_id: id, image_url: `https://images.example.com/products/${id}/${k + 1}.jpg`, is_primary: k === 0, position: k, is_active: true, created_at: ctx.stamp });
        }
      }
      await ctx.trx.insertInto('products').values(products).execute();
      for (let i = 0; i < variants.length; i += 1000) await ctx.trx.insertInto('variants').values(variants.slice(i, i + 1000) as never).execute();
      await ctx.trx.insertInto('images').values(images as never).execute();
      const ids = products.map((p) => p.id);
      await refreshProducts(ctx, ids);
      const { productIds: stocked } = await applyStockChanges(ctx, stock, { announceProducts: false });
      const stockedSet = new Set(stocked);
      await inventoryChanged(ctx, ids.filter((id) => !stockedSet.has(id)));
      await productsChanged(ctx, ids, true);
    });
    tick(size, 'products');
  }

  // ---- customers ------------------------------------------------------------------------------
  const customerIds: string[] = [];
  for (let start = 0; start < customerCount; start += batch) {
    const size = Math.min(batch, customerCount - start);
    await runWrite(db, async (ctx) => {
      const rows = Array.from({ length: size }, (_, i) => {
        const first = rnd.pick(FIRST), last = rnd.pick(LAST);
        const id = randomUUID();
        customerIds.push(id);
        return {
          id, name: `${first} ${last}`, phone: `+49${rnd.int(150000000, 179999999)}`,
          email: `${first}.${last}.${start + i + 1}@example.com`.toLowerCase(), city: rnd.pick(CITIES),
          is_active: rnd.next() > 0.03, created_at: ctx.stamp, last_modified: ctx.stamp,
        };
      });
      await ctx.trx.insertInto('customers').values(rows).execute();
      for (const row of rows) await customerChanged(ctx, row.id, true);
    });
    tick(size, 'customers');
  }

  // ---- orders: every status and every payment status ---------------------------------------------
  const active = new Set((await db.selectFrom('products').select('id').where('is_active', '=', true).execute()).map((r) => r.id));
  const candidates = orderable.filter((o) => active.has(o.productId));
  const paymentTargets: PaymentStatus[] = ['pending', 'paid', 'failed', 'expired'];
  let placed = 0;
  for (let n = 0; n < orderCount && candidates.length > 0; n++) {
    const items = Array.from({ length: rnd.int(1, 4) }, () => {
      const c = rnd.pick(candidates);
      return { product_id: c.productId, variant_id: c.variantId, quantity: rnd.int(1, 3) };
    });
    const unique = [...new Map(items.map((i) => [`${i.product_id}:${i.variant_id}`, i])).values()];
    const online = rnd.next() < 0.6;
    const customerId = online && customerIds.length > 0 ? rnd.pick(customerIds) : null;
    let order: { id: string };
    try {
      order = (await placeOrder(db, {
        source: online ? 'online' : 'pos',
        payment_method: rnd.pick(PAYMENT_METHODS),
        customer_id: customerId,
        customer_name: customerId ? null : `${rnd.pick(FIRST)} ${rnd.pick(LAST)}`,
        discount: rnd.next() < 0.2 ? rnd.money(1, 5) : 0,
        delivery_fee: online ? rnd.pick([0, 2.99, 4.99]) : 0,
        items: unique,
      })) as { id: string };
    } catch {
      tick(1, 'orders'); // out of stock: a real shop refuses such an order too
      continue;
    }
    placed++;
    const target = ORDER_STATUSES[n % ORDER_STATUSES.length]!;
    const payment = paymentTargets[n % paymentTargets.length]!;
    const paid = payment === 'paid' || ['shipped', 'delivered', 'completed', 'refunded'].includes(target);
    if (paid) await changePaymentStatus(db, order.id, 'paid');
    else if (payment !== 'pending') await changePaymentStatus(db, order.id, payment);
    for (const status of pathTo('pending', target) ?? []) await changeOrderStatus(db, order.id, status);
    tick(1, 'orders');
  }
  // Fresh planner statistics: without them a just-filled PostgreSQL plans the JSON sub-selects badly
  // (a 200-product page measured 36 ms before ANALYZE, 8 ms after) until autovacuum gets to it.
  await sql`ANALYZE`.execute(db);
  return { products: productCount, customers: customerCount, orders: placed };
}

/** True when the store has no products yet. */
export async function storeIsEmpty(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ any: boolean }>`SELECT EXISTS (SELECT 1 FROM products) AS any`.execute(db);
  return !rows[0]!.any;
}
