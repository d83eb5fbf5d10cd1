/**
 * The `sku,stock` CSV import: parsed in slices that let the event loop turn, every row checked before
 * anything is written (a 400 lists the problems), skus resolved to their stock rows, then applied
 * through the stock-change engine (stock.service.ts `applyStockChanges`) either in one transaction
 * or, on the embedded default, in committed steps of whole products that give way to waiting
 * statements (decisions 0036, 0042).
 */
import { CHUNK_SIZE } from '../shared/chunks.ts';
import { parse as csvParser } from 'csv-parse';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import { runWrite } from '../db/write-clock.ts';
import { runGivingWay } from '../db/connection-turns.ts';
import { isStockTracked } from '../catalog/product.json-sql.ts';
import { ApiError, invalidParameter, type ParamError } from '../shared/problem.ts';
import type { Logger } from 'pino';
import { progressLog, type ProgressLog } from '../shared/progress-log.ts';
import { stockBySku } from './stock.repository.ts';
import { applyStockChanges, type StockChange } from './stock.service.ts';

export interface ImportSummary {
  rows: number;
  movements: number;
  products: number;
}

/** Characters of CSV parsed between two turns of the event loop (a few thousand rows, ~10–50 ms). */
const CSV_SLICE = 32 * 1024;

/**
 * Parses `csv` a slice at a time, letting the event loop turn between slices: parsing 100k rows in
 * one go holds the thread ~2 s (/healthz stalled on both back ends). Each record is given
 * to `take` as it is read and not kept, so a large import never holds its records all at once.
 */
async function parseCsvYielding(csv: string, take: (record: Record<string, string>) => void): Promise<void> {
  const parser = csvParser({ columns: (h: string[]) => h.map((c) => c.trim().toLowerCase()), skip_empty_lines: true, trim: true, bom: true });
  let failure: Error | undefined;
  parser.on('readable', () => {
    for (let record = parser.read() as Record<string, string> | null; record !== null; record = parser.read() as Record<string, string> | null) take(record);
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
  /**
   * Called with the number of rows once every row is checked, before anything is written (an
   * import job corrects the count it guessed from the body's lines).
   */
  onChecked?: (rows: number) => Promise<void>;
  /**
   * Called inside each step's transaction (the one transaction's, when not in steps) after its rows
   * are applied, with the rows done so far in the steps' order and what the step wrote: an import
   * job records its progress there, so its count and the rows it names commit together, and a
   * throw rolls the step back (a job taken over by another runner writes nothing more).
   */
  inStep?: (trx: Transaction<Database>, step: StepDone) => Promise<void>;
  /**
   * Rows already applied by an earlier run of the same import in steps of the same `stepRows` (an
   * import job resumed after its process stopped): the steps up to that row are skipped.
   */
  resumeFrom?: number;
  /**
   * Called after each step has committed, before the next one begins (an import job's runner stops
   * there when its process stops, and tests hold a job there); a throw ends the import, the steps
   * committed so far staying.
   */
  afterStep?: (step: StepDone) => Promise<void>;
}

/** What one committed step of an import did (`ImportOptions.inStep`). */
export interface StepDone {
  /** Rows applied so far, this step's included, in the steps' order (rows grouped by product). */
  done: number;
  /** The rows of the import. */
  total: number;
  movements: number;
  products: number;
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
export async function importStockCsv(db: Kysely<Database>, csv: string, options: ImportOptions = {}): Promise<ImportSummary> {
  const { log, intervalMs, stepRows, onChecked } = options;
  // A line every few seconds while a large import runs (nothing for a short one).
  const progress = log ? progressLog(log, 'stock import', intervalMs === undefined ? {} : { intervalMs }) : undefined;
  try {
    const rows = await checkedRows(csv, progress);
    await onChecked?.(rows.count);
    const summary =
      stepRows !== undefined && rows.absolute
        ? await importInSteps(db, rows, stepRows, progress, options)
        : await importInOneTransaction(db, rows, progress, options);
    progress?.stop({ ...summary });
    return summary;
  } finally {
    progress?.stop();
  }
}

/** The header an import needs (its message answers a CSV without it). */
const HEADER_NEEDED = 'the header must have `sku` and exactly one of `stock` or `quantity_change`';

/**
 * The data rows a CSV seems to have, counted by its line breaks without parsing it (a quoted field
 * with a line break counts twice; blank lines are not counted): what decides, before the CSV is
 * read, whether an import runs as a job (decision 0060). The job corrects it once its rows are read.
 */
export function roughRowCount(csv: string): number {
  let lines = 0;
  let from = 0;
  while (from < csv.length) {
    let end = csv.indexOf('\n', from);
    if (end === -1) end = csv.length;
    if (csv.slice(from, end).trim() !== '') lines += 1;
    from = end + 1;
  }
  return Math.max(0, lines - 1);
}

/**
 * Checks an import's header line without reading the rest: a 400 naming the body when it lacks its
 * columns, so an import about to become a job is refused at once, nothing stored (the rows are
 * checked by the job, before it writes anything).
 */
export function checkStockCsvHeader(csv: string): void {
  const end = csv.search(/\r\n|\n|\r/);
  const line = (end === -1 ? csv : csv.slice(0, end)).replace(/^\uFEFF/, '');
  const columns = line.split(',').map((c) =>
    c
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .trim()
      .toLowerCase(),
  );
  if (!columns.includes('sku') || columns.includes('stock') === columns.includes('quantity_change')) throw invalidParameter('body', HEADER_NEEDED);
}

/** Problems listed in a 400 (all of them are counted). */
const LISTED_PROBLEMS = 100;

/**
 * The checked rows of an import, held compactly: each distinct sku once and, per row, the
 * index of its sku and its value, rather than an object per row (a 100,000-row import held ~60 MiB
 * of records, row objects and targets in the HTTP thread until it ended). Row `i` is line `i + 2`.
 */
interface CheckedRows {
  /** `stock` (absolute levels) rather than `quantity_change`. */
  absolute: boolean;
  /** The number of rows. */
  count: number;
  /** Each distinct sku once, in the order of first appearance; emptied once the skus are resolved. */
  skus: string[];
  /** Per row: the index of its sku in `skus`. */
  sku: Int32Array;
  /** Per row: the level (`stock`) or the signed change (`quantity_change`). */
  value: Int32Array;
  /** Per row: its note or null; null when the CSV has no `note` column. */
  notes: (string | null)[] | null;
}

/**
 * Parses the CSV and checks every row's form (not its sku) as it is read: 400 naming the lines
 * otherwise. A record is not kept once checked, only its sku (once per distinct sku) and value.
 */
async function checkedRows(csv: string, progress: ProgressLog | undefined): Promise<CheckedRows> {
  const rows: CheckedRows = { absolute: false, count: 0, skus: [], sku: new Int32Array(), value: new Int32Array(), notes: null };
  // Growing arrays while reading; typed (outside V8's heap) once read.
  const rowSkus: number[] = [];
  const rowValues: number[] = [];
  const skuIndex = new Map<string, number>();
  let header: string[] | undefined;
  let headerFits = false;
  const errors: ParamError[] = [];
  let errorCount = 0;
  const problem = (line: number, message: string) => {
    errorCount += 1;
    if (errors.length < LISTED_PROBLEMS) errors.push({ param: `line ${line}`, message });
  };
  const take = (r: Record<string, string>) => {
    const line = rows.count + 2;
    rows.count += 1;
    if (header === undefined) {
      header = Object.keys(r);
      headerFits = header.includes('sku') && header.includes('stock') !== header.includes('quantity_change');
      rows.absolute = header.includes('stock');
      if (header.includes('note')) rows.notes = [];
    }
    // A header without its columns is the answer, once the whole CSV is known to parse.
    if (!headerFits) return;
    const { absolute } = rows;
    const value = absolute ? r.stock : r.quantity_change;
    const n = Number(value);
    if (!r.sku) problem(line, 'sku is empty');
    if (value === undefined || value === '' || !Number.isInteger(n) || Math.abs(n) > 2_147_483_647 || (absolute && n < 0)) {
      problem(line, `${absolute ? 'stock' : 'quantity_change'} must be a${absolute ? ' non-negative' : ''} whole number`);
    }
    // Nothing is imported once a row is bad: the rest are only checked.
    if (errorCount > 0) return;
    let index = skuIndex.get(r.sku!);
    if (index === undefined) {
      index = rows.skus.push(r.sku!) - 1;
      skuIndex.set(r.sku!, index);
    }
    rowSkus.push(index);
    rowValues.push(n);
    rows.notes?.push(r.note || null);
  };
  try {
    progress?.update(0, csv.length, 'reading the CSV');
    await parseCsvYielding(csv, take);
  } catch (error) {
    throw invalidParameter('body', `not valid CSV: ${(error as Error).message}`);
  }
  if (rows.count === 0) throw invalidParameter('body', 'the CSV has no data rows (first line is the header: sku,stock or sku,quantity_change)');
  if (!headerFits) throw invalidParameter('body', HEADER_NEEDED);
  if (errorCount > 0) throw new ApiError('invalid_parameter', `${errorCount} invalid row(s) in the CSV; nothing was imported.`, errors);
  rows.sku = Int32Array.from(rowSkus);
  rows.value = Int32Array.from(rowValues);
  return rows;
}

/** A canonical uuid (PostgreSQL's text form of the `uuid` type). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Uuids held as 16 bytes each, outside V8's heap: a uuid string takes ~48 bytes of it, and an import
 * holds one per distinct sku and product until it ends.
 */
class UuidList {
  #bytes: Uint8Array;
  length = 0;

  /**
   * Room for `capacity` ids taken at once: grown by doubling from small, the buffers it freed would
   * stay in glibc's arena.
   */
  constructor(capacity: number) {
    this.#bytes = new Uint8Array(16 * Math.max(1, capacity));
  }

  /** Appends `id`; returns its index. */
  push(id: string): number {
    if (!UUID.test(id)) throw new Error(`not a canonical uuid: ${id}`);
    if (this.length * 16 >= this.#bytes.length) {
      const bigger = new Uint8Array(this.#bytes.length * 2);
      bigger.set(this.#bytes);
      this.#bytes = bigger;
    }
    Buffer.from(id.replaceAll('-', ''), 'hex').copy(this.#bytes, this.length * 16);
    return this.length++;
  }

  at(index: number): string {
    const hex = Buffer.from(this.#bytes.buffer, this.#bytes.byteOffset + index * 16, 16).toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
}

/**
 * Where each distinct sku of an import keeps its stock, by the sku's index in `CheckedRows.skus`:
 * per sku the index of its product in `productIds` (each product once; -1: unknown sku), of its
 * variant in `variantIds` (-1: the product's own stock) and the stock it had when resolved.
 */
interface SkuTargets {
  productIds: UuidList;
  variantIds: UuidList;
  product: Int32Array;
  variant: Int32Array;
  stock: Float64Array;
}

/** The product and variant ids of distinct sku `k` (a stock change's target). */
function targetOf(targets: SkuTargets, k: number): { productId: string; variantId: string | null } {
  const v = targets.variant[k]!;
  return { productId: targets.productIds.at(targets.product[k]!), variantId: v < 0 ? null : targets.variantIds.at(v) };
}

/** The stock row of every sku of `rows`; a 400 naming the lines of unknown or untracked skus. */
async function resolveSkus(db: Kysely<Database> | Transaction<Database>, rows: CheckedRows): Promise<SkuTargets> {
  const { skus } = rows;
  const targets: SkuTargets = {
    // One product and at most one variant per distinct sku (a sku that is also another product's
    // own makes more products, and the list grows).
    productIds: new UuidList(skus.length),
    variantIds: new UuidList(skus.length),
    product: new Int32Array(skus.length).fill(-1),
    variant: new Int32Array(skus.length).fill(-1),
    stock: new Float64Array(skus.length),
  };
  const tracked = new Uint8Array(skus.length);
  const productIndex = new Map<string, number>();
  for (let from = 0; from < skus.length; from += CHUNK_SIZE) {
    const part = skus.slice(from, from + CHUNK_SIZE);
    const inPart = new Map(part.map((sku, i) => [sku, from + i]));
    for (const f of await stockBySku(db, part)) {
      const k = inPart.get(f.sku)!;
      let p = productIndex.get(f.product_id);
      if (p === undefined) {
        p = targets.productIds.push(f.product_id);
        productIndex.set(f.product_id, p);
      }
      targets.product[k] = p;
      targets.variant[k] = f.variant_id === null ? -1 : targets.variantIds.push(f.variant_id);
      targets.stock[k] = f.stock;
      tracked[k] = isStockTracked(f.product_type) ? 1 : 0;
    }
  }
  // Unknown skus' lines first, then untracked ones', each in the order of the rows.
  const problems: ParamError[] = [];
  let problemCount = 0;
  for (const untracked of [false, true]) {
    for (let r = 0; r < rows.count; r++) {
      const k = rows.sku[r]!;
      const known = targets.product[k]! >= 0;
      if (untracked ? !known || tracked[k] === 1 : known) continue;
      problemCount += 1;
      if (problems.length < LISTED_PROBLEMS) {
        problems.push({ param: `line ${r + 2}`, message: untracked ? `sku '${skus[k]}' is a product type without stock` : `unknown sku '${skus[k]}'` });
      }
    }
  }
  if (problemCount > 0) throw new ApiError('invalid_parameter', `${problemCount} row(s) name an unknown or untracked sku; nothing was imported.`, problems);
  return targets;
}

/** Every row in one transaction: all of them apply or none does. */
async function importInOneTransaction(
  db: Kysely<Database>,
  rows: CheckedRows,
  progress: ProgressLog | undefined,
  { inStep }: ImportOptions,
): Promise<ImportSummary> {
  return runWrite(db, async (ctx) => {
    const targets = await resolveSkus(ctx.trx, rows);
    // Absolute levels become deltas against the running level, so repeated skus apply in order.
    const running = new Map<number, number>();
    const changes: StockChange[] = [];
    for (let r = 0; r < rows.count; r++) {
      const k = rows.sku[r]!;
      const current = running.get(k) ?? targets.stock[k]!;
      const delta = rows.absolute ? rows.value[r]! - current : rows.value[r]!;
      running.set(k, current + delta);
      changes.push({ ...targetOf(targets, k), delta, reason: 'bulk_import', note: rows.notes?.[r] ?? null });
    }
    const result = await applyStockChanges(ctx, changes, { onProgress: (done, total, phase) => progress?.update(done, total, phase) });
    const summary = { rows: rows.count, movements: result.movementIds.length, products: result.productIds.length };
    await inStep?.(ctx.trx, { done: rows.count, total: rows.count, movements: summary.movements, products: summary.products });
    return summary;
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
 * every statement of them, run before the next step (decision 0042). The grouping is an order of
 * row indices and a step's changes are made when it runs, so the import holds no object per row.
 */
async function importInSteps(
  db: Kysely<Database>,
  rows: CheckedRows,
  stepRows: number,
  progress: ProgressLog | undefined,
  { signal, inStep, afterStep, resumeFrom = 0 }: ImportOptions,
): Promise<ImportSummary> {
  progress?.update(0, rows.count, 'checking skus');
  const targets = await resolveSkus(db, rows);
  rows.skus = [];
  const productOf = (r: number) => targets.product[rows.sku[r]!]!;
  // Products in the order of their first row, and how many rows each has.
  const rank = new Int32Array(targets.productIds.length).fill(-1);
  const rowsOf: number[] = [];
  for (let r = 0; r < rows.count; r++) {
    const p = productOf(r);
    if (rank[p] === -1) rank[p] = rowsOf.push(0) - 1;
    rowsOf[rank[p]!]! += 1;
  }
  // The rows grouped by product (a product's in their order); a step ends after the product that
  // brings it to `stepRows` rows.
  const firstOf = new Int32Array(rowsOf.length);
  const ends: number[] = [];
  for (let k = 0, at = 0, inStep = 0; k < rowsOf.length; k++) {
    firstOf[k] = at;
    at += rowsOf[k]!;
    inStep += rowsOf[k]!;
    if (inStep >= stepRows || k === rowsOf.length - 1) {
      ends.push(at);
      inStep = 0;
    }
  }
  const order = new Int32Array(rows.count);
  const next = firstOf.slice();
  for (let r = 0; r < rows.count; r++) order[next[rank[productOf(r)]!]!++] = r;
  // The last moment a client that went away stops the import: nothing is written yet.
  if (signal?.aborted) throw new ApiError('malformed_request', 'The client closed the connection before the import began; nothing was imported.');
  // A resumed import starts after the last step an earlier run committed (steps end where they did).
  if (resumeFrom > 0 && resumeFrom < rows.count && !ends.includes(resumeFrom)) {
    throw new Error(`cannot resume the import at row ${resumeFrom}: no step of ${stepRows} rows ends there`);
  }
  let done = Math.min(resumeFrom, rows.count);
  let movements = 0;
  let products = 0;
  // Each step gives way to the statements waiting when it would begin (db/connection-turns.ts):
  // a read asked during a step waits for that step only, all its statements before the next one.
  await runGivingWay(async () => {
    for (const end of ends) {
      if (end <= done) continue;
      const changes: StockChange[] = [];
      for (; done < end; done++) {
        const r = order[done]!;
        changes.push({ ...targetOf(targets, rows.sku[r]!), delta: 0, level: rows.value[r]!, reason: 'bulk_import', note: rows.notes?.[r] ?? null });
      }
      const result = await runWrite(db, async (ctx) => {
        const applied = await applyStockChanges(ctx, changes);
        await inStep?.(ctx.trx, { done: end, total: rows.count, movements: applied.movementIds.length, products: applied.productIds.length });
        return applied;
      });
      movements += result.movementIds.length;
      products += result.productIds.length;
      progress?.update(done, rows.count, 'steps of rows');
      await afterStep?.({ done: end, total: rows.count, movements: result.movementIds.length, products: result.productIds.length });
    }
  });
  return { rows: rows.count, movements, products };
}
