/**
 * Every stock change goes through `applyStockChanges`: it locks the stock rows it touches, computes
 * each change's before/after in order, writes the new stock, appends one stock movement per change,
 * recomputes the products' stock (Σ active variants, or own stock), moves their last_modified and
 * appends the events — all set-based, so a CSV import of thousands of rows is a handful of
 * statements in one transaction. The CSV import (`sku,stock` rows) that feeds it is stock-import.ts.
 *
 * Only stock-tracked product types (physical, food, digital_card) have stock; changes to others are
 * ignored (an order of a service takes no stock).
 */
import { uuidv7 } from '../shared/uuid-v7.ts';
import { chunks, TRIGGERED_WRITE_CHUNK } from '../shared/chunks.ts';
import type { Insertable, Kysely } from 'kysely';
import type { Database, StockMovementTable } from '../db/schema.ts';
import { runWrite, type WriteContext } from '../db/write-clock.ts';
import { wroteRows } from '../db/statistics.ts';
import { withDocumentsRebuiltLater } from '../db/documents.ts';
import { ownStoreIs } from '../db/store-scope.ts';
import { isStockTracked } from '../catalog/product.json-sql.ts';
import { conflict, invalidParameter, notFound } from '../shared/problem.ts';
import { stockChanged } from './stock-events.ts';
import type { MovementReason } from './inventory.json-sql.ts';
import {
  insertMovements,
  lockProducts,
  lockVariants,
  productWithOverflowingStock,
  recomputeProductStock,
  recomputeProductStockAndDocuments,
  setVariantStock,
} from './stock.repository.ts';

export interface StockChange {
  productId: string;
  /** The variant whose stock changes; null for a product without variants. */
  variantId: string | null;
  /** Signed change. */
  delta: number;
  /**
   * The level to set instead of `delta` (an absolute CSV import applied in steps): the change is
   * computed against the level read under the row lock, so a write committed since the import was
   * checked cannot make it wrong.
   */
  level?: number;
  reason: MovementReason;
  orderId?: string | null;
  note?: string | null;
}

export interface StockChangeResult {
  movementIds: string[];
  productIds: string[];
}

/** Reasons that may not take stock below zero. Restocks (cancel, refund) only add. */
const GUARDED: ReadonlySet<MovementReason> = new Set(['sale', 'adjustment', 'bulk_import']);

export interface ApplyOptions {
  /**
   * Append product.updated for the touched products (default true). A caller that creates the
   * products in the same transaction passes false and appends product.created afterwards, so that
   * event carries the final stock.
   */
  announceProducts?: boolean;
  /** Told how far the writes are (progress lines of a long import, shared/progress-log.ts). */
  onProgress?: (done: number, total: number, phase: string) => void;
}

/** Applies `changes` in order inside the caller's write transaction (see module comment). */
export async function applyStockChanges(
  ctx: WriteContext,
  changes: readonly StockChange[],
  { announceProducts = true, onProgress = () => {} }: ApplyOptions = {},
): Promise<StockChangeResult> {
  const { trx, stamp } = ctx;
  if (changes.length === 0) return { movementIds: [], productIds: [] };
  const productIds = [...new Set(changes.map((c) => c.productId))];
  const variantIds = [...new Set(changes.flatMap((c) => (c.variantId ? [c.variantId] : [])))];

  // FOR NO KEY UPDATE, not FOR UPDATE: inserting an order item or a movement takes FOR KEY SHARE on
  // the product and variant it references, and FOR UPDATE waits for that; two orders of one product
  // each held the other's key share and deadlocked (9 of 10 concurrent orders failed, 40P01).
  // We never change a key, so the weaker lock is the right one and does not wait for key shares.
  // Lock in a fixed order (products, then variants, by id) so concurrent writers cannot deadlock:
  // ids sorted, then chunked, so every chunk locks ids above the previous one's. One array parameter
  // per chunk (never one bind parameter per id: the protocol allows 65,535) and statements of
  // bounded size, so the embedded database yields to the HTTP side between them (db/database.ts).
  const products = [];
  for (const part of chunks([...productIds].sort())) {
    products.push(...(await lockProducts(trx, part)));
  }
  const variants = [];
  for (const part of chunks([...variantIds].sort())) {
    variants.push(...(await lockVariants(trx, part)));
  }
  const productById = new Map(products.map((p) => [p.id, p]));
  const variantById = new Map(variants.map((v) => [v.id, v]));

  const productStock = new Map<string, number>();
  const variantStock = new Map<string, number>();
  const movements: Insertable<StockMovementTable>[] = [];
  for (const change of changes) {
    const product = productById.get(change.productId);
    if (!product) throw notFound('product', change.productId);
    if (!isStockTracked(product.product_type) || (change.level === undefined && change.delta === 0)) continue;
    let before: number;
    let sku: string | null;
    if (change.variantId) {
      const variant = variantById.get(change.variantId);
      if (!variant || variant.product_id !== product.id) throw notFound('variant of this product', change.variantId);
      before = variantStock.get(variant.id) ?? variant.stock;
      sku = variant.sku;
    } else {
      before = productStock.get(product.id) ?? product.own_stock;
      sku = product.sku;
    }
    const delta = change.level === undefined ? change.delta : change.level - before;
    if (delta === 0) continue;
    if (change.variantId) variantStock.set(change.variantId, before + delta);
    else productStock.set(product.id, before + delta);
    const after = before + delta;
    if (after < 0 && GUARDED.has(change.reason)) {
      throw conflict(`Insufficient stock for ${sku ?? change.variantId ?? product.id}: ${before} available, change of ${delta}.`);
    }
    if (!Number.isSafeInteger(after) || Math.abs(after) > 2_147_483_647) throw conflict(`Stock of ${sku ?? product.id} would overflow.`);
    movements.push({
      id: uuidv7(),
      product_id: product.id,
      variant_id: change.variantId,
      sku,
      reason: change.reason,
      quantity_change: delta,
      stock_before: before,
      stock_after: after,
      order_id: change.orderId ?? null,
      note: change.note ?? null,
      created_at: stamp,
      last_modified: stamp,
    });
  }
  if (movements.length === 0) return { movementIds: [], productIds: [] };

  let written = 0;
  const touched = [...new Set(movements.map((m) => m.product_id))];
  // Every document is built once (decision 0047): the variants' level writes run with the documents'
  // triggers silenced, the movements' INSERT and the products' recompute build their rows'
  // documents themselves. The products' own stock is set by the recompute: one UPDATE of each
  // product, not two.
  const left = await withDocumentsRebuiltLater(trx, async () => {
    for (const part of chunks([...variantStock], TRIGGERED_WRITE_CHUNK)) {
      await setVariantStock(trx, part);
      await wroteRows(trx, 'variants', part.length);
      written += part.length;
      onProgress(written, variantStock.size, 'stock levels');
    }
    written = 0;
    for (const part of chunks(movements, TRIGGERED_WRITE_CHUNK)) {
      await insertMovements(trx, part);
      await wroteRows(trx, 'stock_movements', part.length);
      written += part.length;
      onProgress(written, movements.length, 'stock movements');
    }
    onProgress(0, touched.length, 'products and events');
    // Only products whose variants' stock changed can have a sum past an integer now.
    const withVariantChanges = new Set([...variantStock.keys()].map((id) => variantById.get(id)!.product_id));
    return recomputeWithDocuments(ctx, touched, productStock, withVariantChanges);
  });
  await recomputeLeft(ctx, left, productStock);
  await stockChanged(
    ctx,
    movements.map((m) => m.id),
    touched,
    announceProducts,
  );
  return { movementIds: movements.map((m) => m.id), productIds: touched };
}

/**
 * Recomputes `stock` of the products (Σ active variants' stock when they have any, else own stock)
 * and moves their last_modified to this transaction's stamp. Call after any change to a product or
 * anything nested in it.
 */
export async function refreshProducts(ctx: WriteContext, productIds: readonly string[]): Promise<void> {
  const left = await withDocumentsRebuiltLater(ctx.trx, () => recomputeWithDocuments(ctx, productIds, undefined));
  await recomputeLeft(ctx, left, undefined);
}

const ownStockOf = (ids: readonly string[], ownStock: ReadonlyMap<string, number> | undefined) => ids.map((id) => ownStock?.get(id) ?? null);

/**
 * The products' recompute with their documents built by the same UPDATE (the documents' triggers
 * silenced by the caller): one row version each. Returns the products left to recomputeLeft (a row
 * already stamped at or past this transaction's stamp, which the forward trigger may move).
 * `variantsChanged`, when given, names the products whose variants' stock this transaction changed:
 * only they are checked for a sum past an integer (a step of an import without variants saves the
 * statement).
 */
async function recomputeWithDocuments(
  ctx: WriteContext,
  productIds: readonly string[],
  ownStock: ReadonlyMap<string, number> | undefined,
  variantsChanged?: ReadonlySet<string>,
): Promise<string[]> {
  const left: string[] = [];
  for (const part of chunks(productIds, TRIGGERED_WRITE_CHUNK)) {
    // Each variant's stock fits an integer; their sum may not (sum(int) is bigint): refuse that
    // change, as a single stock level that would overflow is refused. `variantsChanged`: the only
    // products whose sum can have changed (all of them when not known).
    const checked = variantsChanged ? part.filter((id) => variantsChanged.has(id)) : part;
    const over = checked.length > 0 ? await productWithOverflowingStock(ctx.trx, checked) : undefined;
    if (over) throw conflict(`The stock of product ${over} across its variants would exceed 2147483647 units.`);
    const written = await recomputeProductStockAndDocuments(ctx.trx, part, ctx.stamp, ownStockOf(part, ownStock));
    await wroteRows(ctx.trx, 'products', written.length);
    if (written.length < part.length) {
      const done = new Set(written);
      left.push(...part.filter((id) => !done.has(id)));
    }
  }
  return left;
}

/** The recompute of the products recomputeWithDocuments left, their documents rebuilt by the triggers. */
async function recomputeLeft(ctx: WriteContext, productIds: readonly string[], ownStock: ReadonlyMap<string, number> | undefined): Promise<void> {
  for (const part of chunks(productIds, TRIGGERED_WRITE_CHUNK)) await recomputeProductStock(ctx.trx, part, ctx.stamp, ownStockOf(part, ownStock));
}

export interface AdjustmentInput {
  product_id: string;
  variant_id?: string | null;
  quantity_change: number;
  note?: string | null;
}

/** A manual stock adjustment (reason `adjustment`). Returns the movement's id. */
export async function adjustStock(db: Kysely<Database>, input: AdjustmentInput): Promise<string> {
  return runWrite(db, async (ctx) => {
    const product = await ctx.trx
      .selectFrom('products')
      .select(['id', 'product_type'])
      .where(ownStoreIs('store_id'))
      .where('id', '=', input.product_id)
      .executeTakeFirst();
    if (!product) throw notFound('product', input.product_id);
    if (!isStockTracked(product.product_type)) throw conflict(`Products of type '${product.product_type}' have no stock.`);
    const variantId = await resolveStockTarget(ctx, input.product_id, input.variant_id ?? null);
    const { movementIds } = await applyStockChanges(ctx, [
      { productId: input.product_id, variantId, delta: input.quantity_change, reason: 'adjustment', note: input.note ?? null },
    ]);
    if (movementIds.length === 0) throw invalidParameter('quantity_change', 'must not be 0');
    return movementIds[0]!;
  });
}

/** A product with active variants keeps stock on its variants: a change must name one. */
async function resolveStockTarget(ctx: WriteContext, productId: string, variantId: string | null): Promise<string | null> {
  if (variantId) return variantId;
  const active = await ctx.trx
    .selectFrom('variants')
    .select('id')
    .where(ownStoreIs('store_id'))
    .where('product_id', '=', productId)
    .where('is_active', '=', true)
    .limit(1)
    .execute();
  if (active.length > 0) throw invalidParameter('variant_id', 'is required: this product keeps its stock on its variants');
  return null;
}
