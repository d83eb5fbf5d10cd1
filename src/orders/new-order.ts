/**
 * The rows of a new order from its priced items: the one place that computes an order's money
 * (item total = quantity × unit_price, subtotal = Σ items, total = subtotal − discount +
 * delivery_fee, all in cents) and refuses amounts a numeric(14,2) cannot hold. Used by placeOrder
 * (one order from the API) and by the demo store generator (orders in bulk), so both write orders
 * by the same rules. Pure: no I/O.
 */
import type { Insertable } from 'kysely';
import { randomUUID } from 'node:crypto';
import { invalidParameter } from '../shared/problem.ts';
import { centsToDecimal, MAX_MONEY, storableCents, toCents } from '../shared/money.ts';
import type { OrderItemTable, OrderTable } from '../db/schema.ts';
import type { OrderStatus, PaymentStatus } from './order-status.ts';

/** Cents of a non-negative amount with at most 2 decimals; 400 naming `param` otherwise. */
export function amountCents(value: number, param: string): number {
  const c = toCents(value);
  if (c === undefined || c < 0) throw invalidParameter(param, 'must be a non-negative amount with at most 2 decimals');
  return c;
}

/** An item whose product, variant and unit price are already resolved. */
export interface PricedItem {
  product_id: string;
  variant_id: string | null;
  product_name: string;
  variant_name: string | null;
  quantity: number;
  unitCents: number;
}

export interface NewOrder {
  id: string;
  /** The write transaction's stamp: created_at and last_modified. */
  stamp: string;
  source: 'pos' | 'online';
  /** Default pending / pending (what the API places); the demo generator writes final states. */
  status?: OrderStatus;
  payment_status?: PaymentStatus;
  payment_method: string | null;
  customer_id: string | null;
  customer_name: string | null;
  customer_phone: string | null;
  /** Amounts as given (validated here). */
  discount: number;
  delivery_fee: number;
  items: readonly PricedItem[];
}

/**
 * The orders row and its order_items rows; throws 400 (naming the body field) when an amount or
 * a sum does not fit a money column or the discount exceeds subtotal + delivery_fee.
 */
export function newOrderRows(order: NewOrder): { order: Insertable<OrderTable>; items: Insertable<OrderItemTable>[] } {
  const items = order.items.map((item, index) => {
    const totalCents = storableCents(item.unitCents * item.quantity);
    if (totalCents === undefined) throw invalidParameter(`body.items[${index}].quantity`, `quantity × unit_price must not exceed ${MAX_MONEY}`);
    return {
      id: randomUUID(),
      order_id: order.id,
      product_id: item.product_id,
      variant_id: item.variant_id,
      product_name: item.product_name,
      variant_name: item.variant_name,
      quantity: item.quantity,
      unit_price: centsToDecimal(item.unitCents),
      total: centsToDecimal(totalCents),
      position: index,
      totalCents,
    };
  });
  const subtotal = items.reduce((sum, i) => sum + i.totalCents, 0);
  const discount = amountCents(order.discount, 'body.discount');
  const deliveryFee = amountCents(order.delivery_fee, 'body.delivery_fee');
  if (discount > subtotal + deliveryFee) throw invalidParameter('body.discount', 'must not exceed subtotal + delivery_fee');
  // Every amount fits numeric(14,2) on its own; their sums may not.
  if (storableCents(subtotal) === undefined) throw invalidParameter('body.items', `the items' totals must not add up to more than ${MAX_MONEY}`);
  if (storableCents(subtotal - discount + deliveryFee) === undefined)
    throw invalidParameter('body.delivery_fee', `the order total must not exceed ${MAX_MONEY}`);
  return {
    order: {
      id: order.id,
      source: order.source,
      status: order.status ?? 'pending',
      payment_status: order.payment_status ?? 'pending',
      payment_method: order.payment_method,
      customer_id: order.customer_id,
      customer_name: order.customer_name,
      customer_phone: order.customer_phone,
      subtotal: centsToDecimal(subtotal),
      discount: centsToDecimal(discount),
      delivery_fee: centsToDecimal(deliveryFee),
      total: centsToDecimal(subtotal - discount + deliveryFee),
      created_at: order.stamp,
      last_modified: order.stamp,
    },
    items: items.map(({ totalCents: _, ...row }) => row),
  };
}
