/**
 * Order status and payment status state machines (docs/contract/decisions.md "Writes"). Pure data + functions.
 *
 * Order status, forward only:
 *   pending    → processing | preparing | cancelled
 *   processing → ready | shipped | cancelled
 *   preparing  → ready | cancelled
 *   ready      → shipped | delivered | completed | cancelled
 *   shipped    → delivered
 *   delivered  → completed | refunded
 *   completed  → refunded
 *   cancelled, refunded: terminal
 * Stock: entering `cancelled` restores the items' stock (reason `cancel`), entering `refunded`
 * restores it (reason `refund`); placing an order took it (`sale`).
 *
 * Payment status:
 *   pending → paid | failed | expired
 *   failed  → pending | paid
 *   paid, expired: terminal
 * Anything else is a 409 conflict.
 */
export const ORDER_STATUSES = ['pending', 'processing', 'preparing', 'ready', 'shipped', 'delivered', 'completed', 'cancelled', 'refunded'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export const PAYMENT_STATUSES = ['pending', 'paid', 'failed', 'expired'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

export const ORDER_TRANSITIONS: Readonly<Record<OrderStatus, readonly OrderStatus[]>> = {
  pending: ['processing', 'preparing', 'cancelled'],
  processing: ['ready', 'shipped', 'cancelled'],
  preparing: ['ready', 'cancelled'],
  ready: ['shipped', 'delivered', 'completed', 'cancelled'],
  shipped: ['delivered'],
  delivered: ['completed', 'refunded'],
  completed: ['refunded'],
  cancelled: [],
  refunded: [],
};

export const PAYMENT_TRANSITIONS: Readonly<Record<PaymentStatus, readonly PaymentStatus[]>> = {
  pending: ['paid', 'failed', 'expired'],
  failed: ['pending', 'paid'],
  paid: [],
  expired: [],
};

export function canMoveOrder(from: OrderStatus, to: OrderStatus): boolean {
  return ORDER_TRANSITIONS[from].includes(to);
}

export function canMovePayment(from: PaymentStatus, to: PaymentStatus): boolean {
  return PAYMENT_TRANSITIONS[from].includes(to);
}

/** The stock movement reason entering `to` causes, if any. */
export function restockReasonFor(to: OrderStatus): 'cancel' | 'refund' | undefined {
  return to === 'cancelled' ? 'cancel' : to === 'refunded' ? 'refund' : undefined;
}

/** A shortest path of allowed transitions from `from` to `to` (demo data, tests); undefined if none. */
export function pathTo(from: OrderStatus, to: OrderStatus): OrderStatus[] | undefined {
  const queue: OrderStatus[][] = [[from]];
  const seen = new Set<OrderStatus>([from]);
  while (queue.length > 0) {
    const path = queue.shift()!;
    const last = path[path.length - 1]!;
    if (last === to) return path.slice(1);
    for (const next of ORDER_TRANSITIONS[last]) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push([...path, next]);
      }
    }
  }
  return undefined;
}
