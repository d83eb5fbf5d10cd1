/**
 * Demo store generator: a realistic store of a chosen size — every product type, variants with
 * attributes, images, customers, orders in every status and payment status, and the stock movements
 * those imply. Deterministic for a given seed.
 *
 * Products, customers and orders are written in batches (set-based inserts, one write transaction
 * per batch) so tens of thousands take seconds. Orders are priced by the order service's own rules
 * (newOrderRows) and written at their final status; their stock moves through applyStockChanges
 * (sales, then the cancel/refund restocks a cancelled or refunded order made on its way). Every
 * batch appends its events like any other write.
 */
import { randomUUID } from 'node:crypto';
import type { Insertable, Kysely } from 'kysely';
import type { Database, OrderItemTable, OrderTable, ProductTable } from '../db/schema.ts';
import { runWrite } from '../db/write-clock.ts';
import { OWNER_SCOPE, ownStore, ownStoreIs, runInScope } from '../db/store-scope.ts';
import { PRODUCT_TYPES, isStockTracked, type ProductType } from '../catalog/product.json-sql.ts';
import { slugify } from '../catalog/catalog.service.ts';
import { productsChanged } from '../catalog/product-events.ts';
import { customersChanged } from '../customers/customer-events.ts';
import { inventoryChanged } from '../inventory/stock-events.ts';
import { ordersChanged } from '../orders/order-events.ts';
import { applyStockChanges, refreshProducts, type StockChange } from '../inventory/stock.service.ts';
import { amountCents, newOrderRows } from '../orders/new-order.ts';
import { ORDER_STATUSES, restockReasonFor, type PaymentStatus } from '../orders/order-status.ts';
import { chunks } from '../shared/chunks.ts';
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
  const orderCount = demoOrderCount(productCount, options.orders);
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
        const type: ProductType =
          n < PRODUCT_TYPES.length
            ? PRODUCT_TYPES[n]!
            : rnd.pick(['physical', 'physical', 'physical', 'food', 'food', 'digital', 'digital_card', 'service', 'bundle'] as const);
        const name = `${rnd.pick(ADJECTIVES)} ${rnd.pick(NOUNS[type])} ${n + 1}`;
        const price = rnd.money(2, 250);
        const withVariants = (type === 'physical' || type === 'food') && rnd.next() < 0.6;
        products.push({
          id,
          name,
          slug: `${slugify(name)}-${id.slice(0, 8)}`,
          product_type: type,
          barcode: type === 'physical' || type === 'food' ? String(4000000000000 + n) : null,
          sku: `SKU-${String(n + 1).padStart(6, '0')}`,
          price,
          cost_price: Math.round(price * 55) / 100,
          own_stock: 0,
          stock: 0,
          category_id: `cat-${rnd.int(1, 12)}`,
          thumbnail_url: `https://images.example.com/products/${id}/thumb.jpg`,
          is_active: rnd.next() > 0.05,
          created_at: ctx.stamp,
          last_modified: ctx.stamp,
        });
        if (withVariants) {
          const options =
            type === 'food'
              ? WEIGHTS.map((w) => ({ weight: w }))
              : COLORS.slice(0, rnd.int(1, 3)).flatMap((c) => SIZES.slice(0, rnd.int(2, 4)).map((s) => ({ color: c, size: s })));
          options.forEach((attributes, position) => {
            const variantId = randomUUID();
            variants.push({
              id: variantId,
              store_id: ownStore(),
              product_id: id,
              name: Object.values(attributes).join(' / '),
              sku: `SKU-${String(n + 1).padStart(6, '0')}-${position + 1}`,
              price: Math.round((price + position) * 100) / 100,
              stock: 0,
              attributes: JSON.stringify(attributes),
              position,
              is_active: true,
              created_at: ctx.stamp,
            });
            stock.push({ productId: id, variantId, delta: rnd.int(5, 200), reason: 'adjustment', note: 'initial stock' });
            orderable.push({ productId: id, variantId });
          });
        } else {
          if (isStockTracked(type)) stock.push({ productId: id, variantId: null, delta: rnd.int(5, 500), reason: 'adjustment', note: 'initial stock' });
          orderable.push({ productId: id, variantId: null });
        }
        for (let k = 0; k < rnd.int(1, 3); k++) {
          images.push({
            id: randomUUID(),
            store_id: ownStore(),
            product_id: id,
            image_url: `https://images.example.com/products/${id}/${k + 1}.jpg`,
            is_primary: k === 0,
            position: k,
            is_active: true,
            created_at: ctx.stamp,
          });
        }
      }
      await ctx.trx
        .insertInto('products')
        .values(products.map((product) => ({ ...product, store_id: ownStore() })))
        .execute();
      for (let i = 0; i < variants.length; i += 1000)
        await ctx.trx
          .insertInto('variants')
          .values(variants.slice(i, i + 1000) as never)
          .execute();
      await ctx.trx
        .insertInto('images')
        .values(images as never)
        .execute();
      const ids = products.map((p) => p.id);
      await refreshProducts(ctx, ids);
      const { productIds: stocked } = await applyStockChanges(ctx, stock, { announceProducts: false });
      const stockedSet = new Set(stocked);
      await inventoryChanged(
        ctx,
        ids.filter((id) => !stockedSet.has(id)),
      );
      await productsChanged(ctx, ids, true);
    });
    tick(size, 'products');
  }

  // ---- customers ------------------------------------------------------------------------------
  const customerIds: string[] = [];
  const customerById = new Map<string, { id: string; name: string; phone: string }>();
  for (let start = 0; start < customerCount; start += batch) {
    const size = Math.min(batch, customerCount - start);
    await runWrite(db, async (ctx) => {
      const rows = Array.from({ length: size }, (_, i) => {
        const first = rnd.pick(FIRST),
          last = rnd.pick(LAST);
        const id = randomUUID();
        customerIds.push(id);
        return {
          id,
          store_id: ownStore(),
          name: `${first} ${last}`,
          phone: `+49${rnd.int(150000000, 179999999)}`,
          email: `${first}.${last}.${start + i + 1}@example.com`.toLowerCase(),
          city: rnd.pick(CITIES),
          is_active: rnd.next() > 0.03,
          created_at: ctx.stamp,
          last_modified: ctx.stamp,
        };
      });
      await ctx.trx.insertInto('customers').values(rows).execute();
      for (const row of rows) customerById.set(row.id, row);
      await customersChanged(
        ctx,
        rows.map((r) => r.id),
        true,
      );
    });
    tick(size, 'customers');
  }

  // ---- orders: every status and every payment status ---------------------------------------------
  // Written set-based, one write transaction per batch of orders, each order directly at its final
  // status and payment status (as if it had walked pathTo('pending', status)): the orders, their
  // items, one applyStockChanges with the sales and then the cancel/refund restocks, and one
  // order.created per order carrying its final state. Stock is tracked here so no order asks for
  // more than is left: a sold-out line is passed over for the next one in stock, and a quantity is
  // cut to what is left, so no order is refused while anything can be sold.
  const lines = new Map(
    (
      await db
        .selectFrom('products as p')
        .leftJoin('variants as v', (join) => join.onRef('v.store_id', '=', 'p.store_id').onRef('v.product_id', '=', 'p.id').on('v.is_active', '=', true))
        .select([
          'p.id as productId',
          'v.id as variantId',
          'p.name as productName',
          'v.name as variantName',
          'p.price as productPrice',
          'v.price as variantPrice',
          'p.product_type as type',
          'p.own_stock as ownStock',
          'v.stock as variantStock',
        ])
        .where(ownStoreIs('p.store_id'))
        .where('p.is_active', '=', true)
        .execute()
    ).map((r) => [`${r.productId}:${r.variantId}`, r]),
  );
  const candidates = orderable.filter((o) => lines.has(`${o.productId}:${o.variantId}`));
  const available = new Map([...lines].flatMap(([key, l]) => (isStockTracked(l.type) ? [[key, l.variantId ? l.variantStock! : l.ownStock] as const] : [])));
  /** The first orderable line from candidates[from] on with stock left, at most `quantity` of it. */
  const pickInStock = (from: number, quantity: number) => {
    for (let k = 0; k < candidates.length; k++) {
      const c = candidates[(from + k) % candidates.length]!;
      const key = `${c.productId}:${c.variantId}`;
      const left = available.get(key) ?? Infinity; // not stock-tracked: always available
      if (left > 0) return { key, quantity: Math.min(quantity, left) };
    }
    return undefined; // the whole store is sold out
  };
  const paymentTargets: PaymentStatus[] = ['pending', 'paid', 'failed', 'expired'];
  let placed = 0;
  for (let start = 0; start < orderCount && candidates.length > 0; start += batch) {
    const size = Math.min(batch, orderCount - start);
    await runWrite(db, async (ctx) => {
      const orders: Insertable<OrderTable>[] = [];
      const items: Insertable<OrderItemTable>[] = [];
      const sales: StockChange[] = [];
      const restocks: StockChange[] = [];
      for (let i = 0; i < size; i++) {
        const picks = Array.from({ length: rnd.int(1, 4) }, () => pickInStock(rnd.int(0, candidates.length - 1), rnd.int(1, 3)));
        const unique = [...new Map(picks.flatMap((p) => (p ? [[p.key, p] as const] : []))).entries()];
        const online = rnd.next() < 0.6;
        const customer = online && customerIds.length > 0 ? customerById.get(rnd.pick(customerIds))! : null;
        const paymentMethod = rnd.pick(PAYMENT_METHODS);
        const posName = customer ? null : `${rnd.pick(FIRST)} ${rnd.pick(LAST)}`;
        const discount = rnd.next() < 0.2 ? rnd.money(1, 5) : 0;
        const deliveryFee = online ? rnd.pick([0, 2.99, 4.99]) : 0;
        if (unique.length === 0) continue; // the whole store is sold out
        const status = ORDER_STATUSES[placed % ORDER_STATUSES.length]!;
        const payment = paymentTargets[placed % paymentTargets.length]!;
        // What the order service would end at: shipping and beyond need the payment.
        const paymentStatus: PaymentStatus = ['shipped', 'delivered', 'completed', 'refunded'].includes(status) ? 'paid' : payment;
        const restock = restockReasonFor(status); // cancelled and refunded are final: the only restock on the way
        const orderId = randomUUID();
        const priced = unique.map(([key, p]) => {
          const line = lines.get(key)!;
          if (available.has(key)) available.set(key, available.get(key)! - p.quantity);
          sales.push({ productId: line.productId, variantId: line.variantId, delta: -p.quantity, reason: 'sale', orderId });
          if (restock) restocks.push({ productId: line.productId, variantId: line.variantId, delta: p.quantity, reason: restock, orderId });
          return {
            product_id: line.productId,
            variant_id: line.variantId,
            product_name: line.productName,
            variant_name: line.variantName,
            quantity: p.quantity,
            unitCents: amountCents(Number(line.variantPrice ?? line.productPrice), 'unit_price'),
          };
        });
        const subtotalCents = priced.reduce((sum, p) => sum + p.unitCents * p.quantity, 0);
        const rows = newOrderRows({
          id: orderId,
          stamp: ctx.stamp,
          source: online ? 'online' : 'pos',
          status,
          payment_status: paymentStatus,
          payment_method: paymentMethod,
          customer_id: customer?.id ?? null,
          customer_name: customer?.name ?? posName,
          customer_phone: customer?.phone ?? null,
          // A discount never exceeds what is charged (placeOrder refuses that).
          discount: Math.min(discount, (subtotalCents + Math.round(deliveryFee * 100)) / 100),
          delivery_fee: deliveryFee,
          items: priced,
        });
        orders.push(rows.order);
        items.push(...rows.items);
        placed++;
      }
      for (const part of chunks(orders, 500))
        await ctx.trx
          .insertInto('orders')
          .values(part.map((order) => ({ ...order, store_id: ownStore() })))
          .execute();
      for (const part of chunks(items, 500))
        await ctx.trx
          .insertInto('order_items')
          .values(part.map((item) => ({ ...item, store_id: ownStore() })))
          .execute();
      await ordersChanged(
        ctx,
        orders.map((o) => o.id),
        true,
      );
      await applyStockChanges(ctx, [...sales, ...restocks]);
      for (const r of restocks) {
        const key = `${r.productId}:${r.variantId}`;
        if (available.has(key)) available.set(key, available.get(key)! + r.delta);
      }
    });
    tick(size, 'orders');
  }
  // Fresh planner statistics: without them a just-filled PostgreSQL plans the JSON sub-selects badly
  // (a 200-product page measured 36 ms before ANALYZE, 8 ms after) until autovacuum gets to it.
  // Only the tables written here: a bare ANALYZE also walks every system catalog (0.48 s of a
  // 300-product first start on PGlite, against 0.06 s for these tables).
  // VACUUM too (decision 0066): each product, variant, customer and order is written, then
  // rewritten as its children, stock and documents are added, leaving ~4.6 dead versions per live
  // product until autovacuum comes by; a 200-product list page then walked ~1,000 buffers of the
  // index's dead entries and their heap pages instead of ~180. As the tables' owner: a store's role
  // may neither vacuum nor analyze them (PostgreSQL skips them with a warning).
  await runInScope(OWNER_SCOPE, () => sql`VACUUM (ANALYZE) products, variants, images, customers, orders, order_items, stock_movements, events`.execute(db));
  return { products: productCount, customers: customerCount, orders: placed };
}

/** True when the store has no products yet. */
export async function storeIsEmpty(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ any: boolean }>`SELECT EXISTS (SELECT 1 FROM products WHERE ${ownStoreIs('store_id')}) AS any`.execute(db);
  return !rows[0]!.any;
}

/** The orders `demo generate` writes for `products` products: `orders` when given, else products / 2 within [4 per status, 2000]. */
export function demoOrderCount(products: number, orders?: number): number {
  return orders ?? Math.max(ORDER_STATUSES.length * 4, Math.min(2000, Math.round(products / 2)));
}
