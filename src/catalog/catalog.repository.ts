/** Catalog SQL the query builder cannot say: the next position among a product's variants or images. */
import { sql, type Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import { ownStoreIs } from '../db/store-scope.ts';

/** One past the highest position of the product's rows in `table` (0 when it has none). */
export async function nextPosition(trx: Transaction<Database>, table: 'variants' | 'images', productId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT coalesce(max(position) + 1, 0)::int AS n FROM ${sql.table(table)} WHERE ${ownStoreIs('store_id')} AND product_id = ${productId}::uuid
  `.execute(trx);
  return rows[0]!.n;
}
