/**
 * Planner statistics kept current by the writes that grow tables in bulk (decision 0067). A write
 * reports the rows it wrote to a table (`wroteRows`); every `CHECK_EVERY` rows this process wrote
 * to one (in one transaction or in many: an import in steps of 100 rows commits each),
 * `store_api_analyze_if_stale` (migration 0051) analyses the table when what its statistics know of
 * it is out of date by more than its size. A single small write never checks; an import of 100,000
 * rows checks each table it grows every 1,000 rows and analyses it a handful of times, its size
 * about doubling in between.
 */
import { sql, type Transaction } from 'kysely';
import type { Database } from './schema.ts';

/** The store tables a bulk write grows, as migration 0051's function accepts them. */
export type AnalysedTable = 'products' | 'variants' | 'images' | 'customers' | 'orders' | 'order_items' | 'stock_movements' | 'events';

/** Rows written to a table (by this process) between two checks of its statistics. */
export const CHECK_EVERY = 1_000;

/** Per table, the rows this process wrote since its last check of the table. */
const sinceCheck = new Map<AnalysedTable, number>();

/**
 * Per transaction (while it lives) and table, the rows it wrote since it began or since it analysed
 * the table, and whether it did: the committed changes not yet analysed count until it has.
 */
const ofTransaction = new WeakMap<Transaction<Database>, Map<AnalysedTable, { written: number; analysed: boolean }>>();

/**
 * Counts `rows` written to `table` by `trx`; every `CHECK_EVERY` rows, analyses the table if its
 * statistics are stale (migration 0051). Returns whether it analysed.
 */
export async function wroteRows(trx: Transaction<Database>, table: AnalysedTable, rows: number): Promise<boolean> {
  let tables = ofTransaction.get(trx);
  if (!tables) {
    tables = new Map();
    ofTransaction.set(trx, tables);
  }
  const mine = tables.get(table) ?? { written: 0, analysed: false };
  mine.written += rows;
  tables.set(table, mine);
  const count = (sinceCheck.get(table) ?? 0) + rows;
  if (count < CHECK_EVERY) {
    sinceCheck.set(table, count);
    return false;
  }
  sinceCheck.set(table, 0);
  const { rows: answer } = await sql<{ analysed: boolean }>`
    SELECT store_api_analyze_if_stale(${table}::text, ${mine.written}::bigint, ${mine.analysed}::boolean) AS analysed`.execute(trx);
  const analysed = answer[0]!.analysed;
  if (analysed) {
    mine.written = 0;
    mine.analysed = true;
  }
  return analysed;
}
