/**
 * Planner statistics kept current by the writes that grow tables in bulk (decision 0067). A
 * transaction reports the rows it wrote to a table (`wroteRows`); once it has written
 * `CHECK_EVERY` rows to one since its last check, `store_api_analyze_if_stale` (migration 0051)
 * analyses the table when what the statistics know of it is out of date by more than its size.
 * Small writes never check (nothing is counted below `CHECK_EVERY` rows); an import of 100,000 rows
 * checks each table it grows every 1,000 rows and analyses it a handful of times, its size about
 * doubling in between.
 */
import { sql, type Transaction } from 'kysely';
import type { Database } from './schema.ts';

/** The store tables a bulk write grows, as migration 0051's function accepts them. */
export type AnalysedTable = 'products' | 'variants' | 'images' | 'customers' | 'orders' | 'order_items' | 'stock_movements' | 'events';

/** Rows a transaction writes to a table between two checks of its statistics. */
export const CHECK_EVERY = 1_000;

/** Per transaction (while it lives) and table, the rows written since its last analysis and since its last check. */
const written = new WeakMap<Transaction<Database>, Map<AnalysedTable, { total: number; sinceCheck: number; analysed: boolean }>>();

/**
 * Counts `rows` written to `table` by `trx`; every `CHECK_EVERY` rows, analyses the table if its
 * statistics are stale (migration 0051). Returns whether it analysed.
 */
export async function wroteRows(trx: Transaction<Database>, table: AnalysedTable, rows: number): Promise<boolean> {
  let tables = written.get(trx);
  if (!tables) written.set(trx, (tables = new Map()));
  const counts = tables.get(table) ?? { total: 0, sinceCheck: 0, analysed: false };
  counts.total += rows;
  counts.sinceCheck += rows;
  tables.set(table, counts);
  if (counts.sinceCheck < CHECK_EVERY) return false;
  counts.sinceCheck = 0;
  const { rows: answer } = await sql<{
    analysed: boolean;
  }>`SELECT store_api_analyze_if_stale(${table}::text, ${counts.total}::bigint, ${counts.analysed}::boolean) AS analysed`.execute(trx);
  const analysed = answer[0]!.analysed;
  if (process.env.STATS_DEBUG) console.error('check', table, counts.total, analysed);
  if (analysed) {
    counts.total = 0;
    counts.analysed = true;
  }
  return analysed;
}
