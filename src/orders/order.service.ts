/**
 * Order writes: place an order (items priced from the catalog unless given, stock taken with `sale`
 * movements), move its status along the allowed transitions (cancel/refund restore stock with
 * `cancel`/`refund` movements) and move its payment status. Money is computed in cents by
 * newOrderRows (new-order.ts); the invariants item total = quantity × unit_price, subtotal = Σ items,
 * total = subtotal − discount + delivery_fee hold by construction and by CHECK constraints.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { runWrite, type WriteContext } from '../db/write-clock.ts';
import { ownStore, ownStoreIs } from '../db/store-scope.ts';
import { conflict, invalidParameter, notFound } from '../shared/problem.ts';
import { orderChanged } from './order-events.ts';
import { applyStockChanges, type StockChange } from '../inventory/stock.service.ts';
import {
  canMoveOrder,
  canMovePayment,
  ORDER_TRANSITIONS,
  PAYMENT_TRANSITIONS,
  restockReasonFor,
  type OrderStatus,
  type PaymentStatus,
} from './order-status.ts';
import { amountCents, newOrderRows, type PricedItem } from './new-order.ts';
import { recordById } from '../records/record-reads.ts';
import { type Order, orderResource } from './order.resource.ts';

export interface OrderItemInput {
  product_id: string;
  variant_id?: string | null;
  quantity: number;
  /** Defaults to the variant's (or product's) current price. */
  unit_price?: number;
}

export interface OrderInput {
  source: 'pos' | 'online';
  payment_method?: string | null;
  customer_id?: string | null;
  customer_name?: string | null;
  customer_phone?: string | null;
  discount?: number;
  delivery_fee?: number;
  items: OrderItemInput[];
}

export async function orderById(db: Kysely<Database>, id: string): Promise<Order> {
  return recordById(db, orderResource, id);
}

/** Places an order in status pending / payment pending; returns its JSON. */
export async function placeOrder(db: Kysely<Database>, input: OrderInput): Promise<Order> {
  if (input.items.length === 0) throw invalidParameter('body.items', 'must have at least one item');
  return runWrite(db, async (ctx) => {
    const { trx, stamp } = ctx;
    let customerName = input.customer_name ?? null;
    let customerPhone = input.customer_phone ?? null;
    if (input.customer_id) {
      const customer = await trx
        .selectFrom('customers')
        .select(['name', 'phone'])
        .where(ownStoreIs('store_id'))
        .where('id', '=', input.customer_id)
        .executeTakeFirst();
      if (!customer) throw invalidParameter('body.customer_id', `no customer with id '${input.customer_id}'`);
      customerName ??= customer.name;
      customerPhone ??= customer.phone;
    }
    const productIds = [...new Set(input.items.map((i) => i.product_id))];
    const products = await trx
      .selectFrom('products')
      .select(['id', 'name', 'price', 'is_active'])
      .where(ownStoreIs('store_id'))
      .where('id', 'in', productIds)
      .execute();
    const variantIds = input.items.flatMap((i) => (i.variant_id ? [i.variant_id] : []));
    const variants =
      variantIds.length === 0
        ? []
        : await trx
            .selectFrom('variants')
            .select(['id', 'product_id', 'name', 'price', 'is_active'])
            .where(ownStoreIs('store_id'))
            .where('id', 'in', variantIds)
            .execute();
    const withVariants = new Set(
      (
        await trx
          .selectFrom('variants')
          .select('product_id')
          .where(ownStoreIs('store_id'))
          .where('product_id', 'in', productIds)
          .where('is_active', '=', true)
          .execute()
      ).map((v) => v.product_id),
    );
    const productById = new Map(products.map((p) => [p.id, p]));
    const variantById = new Map(variants.map((v) => [v.id, v]));

    const orderId = randomUUID();
    const stock: StockChange[] = [];
    const priced: PricedItem[] = input.items.map((item, index) => {
      const param = `body.items[${index}]`;
      const product = productById.get(item.product_id);
      if (!product) throw invalidParameter(`${param}.product_id`, `no product with id '${item.product_id}'`);
      if (!product.is_active) throw conflict(`Product '${product.name}' is not active and cannot be ordered.`);
      let variant: (typeof variants)[number] | undefined;
      if (item.variant_id) {
        variant = variantById.get(item.variant_id);
        if (!variant || variant.product_id !== product.id || !variant.is_active)
          throw invalidParameter(`${param}.variant_id`, 'is not an active variant of the product');
      } else if (withVariants.has(product.id)) {
        throw invalidParameter(`${param}.variant_id`, 'is required: the product has variants');
      }
      const unitCents = amountCents(item.unit_price ?? Number(variant?.price ?? product.price), `${param}.unit_price`);
      stock.push({ productId: product.id, variantId: variant?.id ?? null, delta: -item.quantity, reason: 'sale', orderId });
      return {
        product_id: product.id,
        variant_id: variant?.id ?? null,
        product_name: product.name,
        variant_name: variant?.name ?? null,
        quantity: item.quantity,
        unitCents,
      };
    });
    const rows = newOrderRows({
      id: orderId,
      stamp,
      source: input.source,
      payment_method: input.payment_method ?? null,
      customer_id: input.customer_id ?? null,
      customer_name: customerName,
      customer_phone: customerPhone,
      discount: input.discount ?? 0,
      delivery_fee: input.delivery_fee ?? 0,
      items: priced,
    });
    await trx
      .insertInto('orders')
      .values({ ...rows.order, store_id: ownStore() })
      .execute();
    await trx
      .insertInto('order_items')
      .values(rows.items.map((item) => ({ ...item, store_id: ownStore() })))
      .execute();
    await orderChanged(ctx, orderId, true);
    await applyStockChanges(ctx, stock);
    return orderById(trx, orderId);
  });
}

/** The two state machines of an order: which column, its transitions, and how the 409 names it. */
const MACHINES = {
  status: { column: 'status', transitions: ORDER_TRANSITIONS, canMove: canMoveOrder, noun: 'An order' },
  payment_status: { column: 'payment_status', transitions: PAYMENT_TRANSITIONS, canMove: canMovePayment, noun: 'A payment' },
} as const;
type Machine = keyof typeof MACHINES;
type StateOf<M extends Machine> = M extends 'status' ? OrderStatus : PaymentStatus;

/**
 * Moves one of the order's state machines to `to` inside `ctx`: locks the order, 404 when there is
 * none, 409 naming the allowed moves when the transition is not one, stamps the order and appends
 * `order.updated`.
 */
async function moveOrder<M extends Machine>(ctx: WriteContext, id: string, machine: M, to: StateOf<M>): Promise<void> {
  const { column, transitions, canMove, noun } = MACHINES[machine];
  const order = await ctx.trx
    .selectFrom('orders')
    .select(['id', column])
    .where(ownStoreIs('store_id'))
    .where('id', '=', id)
    .forNoKeyUpdate()
    .executeTakeFirst();
  if (!order) throw notFound('order', id);
  const from = (order as Record<string, unknown>)[column] as StateOf<M>;
  if (!(canMove as (from: StateOf<M>, to: StateOf<M>) => boolean)(from, to)) {
    const allowed: readonly string[] = (transitions as Readonly<Record<string, readonly string[]>>)[from]!;
    throw conflict(`${noun} cannot move from '${from}' to '${to}'. Allowed from '${from}': ${allowed.length ? allowed.join(', ') : 'none (final state)'}.`);
  }
  await ctx.trx
    .updateTable('orders')
    .set({ [column]: to, last_modified: ctx.stamp })
    .where(ownStoreIs('store_id'))
    .where('id', '=', id)
    .execute();
  await orderChanged(ctx, id);
}

/** Moves an order's status; 409 when the transition is not allowed; cancel and refund restock. Returns its JSON. */
export async function changeOrderStatus(db: Kysely<Database>, id: string, to: OrderStatus, note?: string | null): Promise<Order> {
  return runWrite(db, async (ctx) => {
    await moveOrder(ctx, id, 'status', to);
    const reason = restockReasonFor(to);
    if (reason) {
      const items = await ctx.trx
        .selectFrom('order_items')
        .select(['product_id', 'variant_id', 'quantity'])
        .where(ownStoreIs('store_id'))
        .where('order_id', '=', id)
        .orderBy('position')
        .execute();
      await applyStockChanges(
        ctx,
        items
          .filter((i) => i.product_id)
          .map((i) => ({
            productId: i.product_id!,
            variantId: i.variant_id,
            delta: i.quantity,
            reason,
            orderId: id,
            note: note ?? null,
          })),
      );
    }
    return orderById(ctx.trx, id);
  });
}

/** Moves an order's payment status; 409 when the transition is not allowed. Returns its JSON. */
export async function changePaymentStatus(db: Kysely<Database>, id: string, to: PaymentStatus): Promise<Order> {
  return runWrite(db, async (ctx) => {
    await moveOrder(ctx, id, 'payment_status', to);
    return orderById(ctx.trx, id);
  });
}
