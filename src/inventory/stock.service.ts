/**
 * Every stock change goes through `applyStockChanges`: it locks the stock rows it touches, computes
 * each change's before/after in order, writes the new stock, appends one stock movement per change,
 * recomputes the products' stock (Σ active variants, or own stock), moves their last_modified and
 * appends the events — all set-based, so a CSV import of thousands of rows is a handful of
 * statements in one transaction.
 *
 * Only stock-tracked product types (physical, food, digital_card) have stock; changes to others are
 * ignored (an order of a service takes no stock).
 */
import { uuidv7 } from '../shared/uuid-v7.ts';
import { chunks, TRIGGERED_WRITE_CHUNK } from '../shared/chunks.ts';
import { parse as csvParser } from 'csv-parse';
import type { Insertable, Kysely, Transaction } from 'kysely';
import type { Database, StockMovementTable } from '../db/schema.ts';
import { runWrite, type WriteContext } from '../db/write-clock.ts';
import { runGivingWay } from '../db/connection-turns.ts';
import { withDocumentsRebuiltLater } from '../db/documents.ts';
import { isStockTracked } from '../catalog/product.json-sql.ts';
import { ApiError, conflict, invalidParameter, notFound, type ParamError } from '../shared/problem.ts';
import { inventoryChanged, movementsCreated, productsChanged } from '../resources/record-events.ts';
import type { MovementReason } from './inventory.json-sql.ts';
import type { Logger } from 'pino';
import { progressLog, type ProgressLog } from '../shared/progress-log.ts';
import {
  insertMovements,
  lockProducts,
  lockVariants,
  productWithOverflowingStock,
  recomputeProductStock,
  setOwnStock,
  setVariantStock,
  stockBySku,
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

  const levels = variantStock.size + productStock.size;
  let written = 0;
  // The products' documents are rebuilt once, by refreshProducts below (same transaction), not
  // also by these writes' triggers: half the import's document builds (decision 0046).
  await withDocumentsRebuiltLater(trx, async () => {
    for (const part of chunks([...variantStock], TRIGGERED_WRITE_CHUNK)) {
      await setVariantStock(trx, part);
      written += part.length;
      onProgress(written, levels, 'stock levels');
    }
    for (const part of chunks([...productStock], TRIGGERED_WRITE_CHUNK)) {
      await setOwnStock(trx, part);
      written += part.length;
      onProgress(written, levels, 'stock levels');
    }
  });
  written = 0;
  for (const part of chunks(movements, TRIGGERED_WRITE_CHUNK)) {
    await insertMovements(trx, part);
    written += part.length;
    onProgress(written, movements.length, 'stock movements');
  }
  const touched = [...new Set(movements.map((m) => m.product_id))];
  onProgress(0, touched.length, 'products and events');
  await refreshProducts(ctx, touched);
  await movementsCreated(
    ctx,
    movements.map((m) => m.id),
  );
  await inventoryChanged(ctx, touched);
  if (announceProducts) await productsChanged(ctx, touched);
  return { movementIds: movements.map((m) => m.id), productIds: touched };
}

/**
 * Recomputes `stock` of the products (Σ active variants' stock when they have any, else own stock)
 * and moves their last_modified to this transaction's stamp. Call after any change to a product or
 * anything nested in it.
 */
export async function refreshProducts(ctx: WriteContext, productIds: readonly string[]): Promise<void> {
  for (const part of chunks(productIds, TRIGGERED_WRITE_CHUNK)) {
    // Each variant's stock fits an integer; their sum may not (sum(int) is bigint): refuse that
    // change, as a single stock level that would overflow is refused.
    const over = await productWithOverflowingStock(ctx.trx, part);
    if (over) throw conflict(`The stock of product ${over} across its variants would exceed 2147483647 units.`);
    await recomputeProductStock(ctx.trx, part, ctx.stamp);
  }
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
    const product = await ctx.trx.selectFrom('products').select(['id', 'product_type']).where('id', '=', input.product_id).executeTakeFirst();
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
  const active = await ctx.trx.selectFrom('variants').select('id').where('product_id', '=', productId).where('is_active', '=', true).limit(1).execute();
  if (active.length > 0) throw invalidParameter('variant_id', 'is required: this product keeps its stock on its variants');
  return null;
}

export interface ImportSummary {
  rows: number;
  movements: number;
  products: number;
}

/** Characters of CSV parsed between two turns of the event loop (a few thousand rows, ~10–50 ms). */
const CSV_SLICE = 32 * 1024;

/**
 * Parses `csv` a slice at a time, letting the event loop turn between slices: parsing 100k rows in
 * one go holds the thread ~2 s (issue 19: /healthz stalled on both back ends).
 */
async function parseCsvYielding(csv: string): Promise<Record<string, string>[]> {
  const parser = csvParser({ columns: (h: string[]) => h.map((c) => c.trim().toLowerCase()), skip_empty_lines: true, trim: true, bom: true });
  const records: Record<string, string>[] = [];
  let failure: Error | undefined;
  parser.on('readable', () => {
    for (let record = parser.read() as Record<string, string> | null; record !== null; record = parser.read() as Record<string, string> | null)
      records.push(record);
  });
  parser.on('error', (error) => {
    failure ??= error;
  });
  const ended = new Promise<void>((resolve) => {
    parser.on('end', resolve);
    parser.on('close', resolve);
  });
  for (let at = 0; at < csv.length && !failure; at += CSV_SLICE) {
    parser.write(csv.slice(at, at + CSV_SLICE));
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  if (!failure) parser.end();
  await ended;
  if (failure) throw failure;
  return records;
}

export interface ImportOptions {
  log?: Pick<Logger, 'info'>;
  intervalMs?: number;
  /**
   * Apply an absolute (`sku,stock`) import in committed steps of about this many rows instead of
   * one transaction (STOCK_IMPORT_STEP_ROWS; the embedded database only, decision 0036). Unset:
   * one transaction.
   */
  stepRows?: number;
  /**
   * Aborted when the client went away: an import still being checked stops with nothing written;
   * one whose steps have begun is finished (decision 0036).
   */
  signal?: AbortSignal;
}

/**
 * CSV bulk stock import (reason `bulk_import`). Columns: `sku` and either `stock` (set the absolute
 * level) or `quantity_change` (signed change); optional `note`. Every row is checked before anything
 * is written: a bad row is a 400 naming its line, and nothing is written. Then either one
 * transaction applies every row (the default; always for `quantity_change`), or, with `stepRows`
 * and absolute levels, committed steps of whole products apply them so reads pass between steps
 * (decision 0036): each product's level, movements and events change together, and the import
 * always finishes once its first step has begun.
 */
export async function importStockCsv(db: Kysely<Database>, csv: string, { log, intervalMs, stepRows, signal }: ImportOptions = {}): Promise<ImportSummary> {
  // A line every few seconds while a large import runs (nothing for a short one).
  const progress = log ? progressLog(log, 'stock import', intervalMs === undefined ? {} : { intervalMs }) : undefined;
  try {
    const rows = await checkedRows(csv, progress);
    const summary =
      stepRows !== undefined && rows.absolute ? await importInSteps(db, rows, stepRows, progress, signal) : await importInOneTransaction(db, rows, progress);
    progress?.stop({ ...summary });
    return summary;
  } finally {
    progress?.stop();
  }
}

interface CheckedRows {
  /** `stock` (absolute levels) rather than `quantity_change`. */
  absolute: boolean;
  rows: { line: number; sku: string; value: number; note: string | null }[];
}

/** Parses the CSV and checks every row's form (not its sku): 400 naming the lines otherwise. */
async function checkedRows(csv: string, progress: ProgressLog | undefined): Promise<CheckedRows> {
  let records: Record<string, string>[];
  try {
    progress?.update(0, csv.length, 'reading the CSV');
    records = await parseCsvYielding(csv);
  } catch (error) {
    throw invalidParameter('body', `not valid CSV: ${(error as Error).message}`);
  }
  if (records.length === 0) throw invalidParameter('body', 'the CSV has no data rows (first line is the header: sku,stock or sku,quantity_change)');
  const header = Object.keys(records[0]!);
  if (!header.includes('sku') || header.includes('stock') === header.includes('quantity_change')) {
    throw invalidParameter('body', 'the header must have `sku` and exactly one of `stock` or `quantity_change`');
  }
  const absolute = header.includes('stock');
  const errors: ParamError[] = [];
  const rows = records.map((r, i) => {
    const line = i + 2;
    const value = absolute ? r.stock : r.quantity_change;
    const n = Number(value);
    if (!r.sku) errors.push({ param: `line ${line}`, message: 'sku is empty' });
    if (value === undefined || value === '' || !Number.isInteger(n) || Math.abs(n) > 2_147_483_647 || (absolute && n < 0)) {
      errors.push({ param: `line ${line}`, message: `${absolute ? 'stock' : 'quantity_change'} must be a${absolute ? ' non-negative' : ''} whole number` });
    }
    return { line, sku: r.sku ?? '', value: n, note: r.note || null };
  });
  if (errors.length > 0) throw new ApiError('invalid_parameter', `${errors.length} invalid row(s) in the CSV; nothing was imported.`, errors.slice(0, 100));
  return { absolute, rows };
}

type StockTarget = { productId: string; variantId: string | null; stock: number; type: string };

/** The stock row of every sku of `rows`; a 400 naming the lines of unknown or untracked skus. */
async function resolveSkus(db: Kysely<Database> | Transaction<Database>, rows: CheckedRows['rows']): Promise<Map<string, StockTarget>> {
  const skus = [...new Set(rows.map((r) => r.sku))];
  const targets = new Map<string, StockTarget>();
  for (const part of chunks(skus)) {
    for (const f of await stockBySku(db, part)) targets.set(f.sku, { productId: f.product_id, variantId: f.variant_id, stock: f.stock, type: f.product_type });
  }
  const missing = rows.filter((r) => !targets.has(r.sku));
  const untracked = rows.filter((r) => targets.has(r.sku) && !isStockTracked(targets.get(r.sku)!.type));
  const problems = [
    ...missing.map((r) => ({ param: `line ${r.line}`, message: `unknown sku '${r.sku}'` })),
    ...untracked.map((r) => ({ param: `line ${r.line}`, message: `sku '${r.sku}' is a product type without stock` })),
  ];
  if (problems.length > 0)
    throw new ApiError('invalid_parameter', `${problems.length} row(s) name an unknown or untracked sku; nothing was imported.`, problems.slice(0, 100));
  return targets;
}

/** Every row in one transaction: all of them apply or none does. */
async function importInOneTransaction(db: Kysely<Database>, { absolute, rows }: CheckedRows, progress: ProgressLog | undefined): Promise<ImportSummary> {
  return runWrite(db, async (ctx) => {
    const targets = await resolveSkus(ctx.trx, rows);
    // Absolute levels become deltas against the running level, so repeated skus apply in order.
    const running = new Map<string, number>();
    const changes: StockChange[] = rows.map((r) => {
      const t = targets.get(r.sku)!;
      const current = running.get(r.sku) ?? t.stock;
      const delta = absolute ? r.value - current : r.value;
      running.set(r.sku, current + delta);
      return { productId: t.productId, variantId: t.variantId, delta, reason: 'bulk_import' as const, note: r.note };
    });
    const result = await applyStockChanges(ctx, changes, { onProgress: (done, total, phase) => progress?.update(done, total, phase) });
    return { rows: rows.length, movements: result.movementIds.length, products: result.productIds.length };
  });
}

/**
 * Absolute levels in committed steps (decision 0036). The skus are resolved and checked first, with
 * nothing written; then the rows are grouped by product (a product's rows keep their order, and all
 * of them fall in one step, so its level, movements, recomputed stock and events change together)
 * and applied a step of about `stepRows` rows per transaction. Each change sets a level, computed
 * against the level read under the step's row lock, so a step cannot be refused by what other
 * writes did since the check; the embedded database's connection is free between steps, and the
 * steps give way to other statements (`runGivingWay`), so reads (and other writes) asked meanwhile,
 * every statement of them, run before the next step (decision 0042).
 */
async function importInSteps(
  db: Kysely<Database>,
  { rows }: CheckedRows,
  stepRows: number,
  progress: ProgressLog | undefined,
  signal: AbortSignal | undefined,
): Promise<ImportSummary> {
  progress?.update(0, rows.length, 'checking skus');
  const targets = await resolveSkus(db, rows);
  const byProduct = new Map<string, StockChange[]>();
  for (const r of rows) {
    const t = targets.get(r.sku)!;
    const changes = byProduct.get(t.productId) ?? [];
    if (changes.length === 0) byProduct.set(t.productId, changes);
    changes.push({ productId: t.productId, variantId: t.variantId, delta: 0, level: r.value, reason: 'bulk_import', note: r.note });
  }
  const steps: StockChange[][] = [];
  let step: StockChange[] = [];
  for (const changes of byProduct.values()) {
    step.push(...changes);
    if (step.length >= stepRows) {
      steps.push(step);
      step = [];
    }
  }
  if (step.length > 0) steps.push(step);
  // The last moment a client that went away stops the import: nothing is written yet.
  if (signal?.aborted) throw new ApiError('malformed_request', 'The client closed the connection before the import began; nothing was imported.');
  let done = 0;
  let movements = 0;
  let products = 0;
  // Each step gives way to the statements waiting when it would begin (db/connection-turns.ts):
  // a read asked during a step waits for that step only, all its statements before the next one.
  await runGivingWay(async () => {
    for (const changes of steps) {
      const result = await runWrite(db, (ctx) => applyStockChanges(ctx, changes));
      movements += result.movementIds.length;
      products += result.productIds.length;
      done += changes.length;
      progress?.update(done, rows.length, 'steps of rows');
    }
  });
  return { rows: rows.length, movements, products };
}
