/**
 * Records per store (decision 0051, "Limits per store"): STORE_MAX_PRODUCTS and STORE_MAX_ORDERS
 * bound what one store may hold, so one store of a shared deployment cannot fill its disk. Checked
 * before the write, by counting the store's rows up to the limit (an index walk of at most `max`
 * entries, only while a limit is set): a create past it is 409 `store_limit_reached` naming the
 * setting, nothing written. Writes running at the same instant may each pass the check: the bound
 * can be passed by their number, never by a store writing one record at a time.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { ownStoreIs } from '../db/store-scope.ts';
import { ApiError } from '../shared/problem.ts';

const SETTINGS = { products: 'STORE_MAX_PRODUCTS', orders: 'STORE_MAX_ORDERS' } as const;

/** Refuses adding `adding` records of `kind` to the running store when it would hold more than `max` (0: no limit). */
export async function checkRecordLimit(db: Kysely<Database>, kind: keyof typeof SETTINGS, max: number, adding = 1): Promise<void> {
  if (max <= 0) return;
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM (SELECT 1 FROM ${sql.table(kind)} WHERE ${ownStoreIs('store_id')} LIMIT ${max}) held
  `.execute(db);
  const held = rows[0]!.n;
  if (held + adding > max) {
    throw new ApiError(
      'store_limit_reached',
      `This store holds ${held === max ? `${max} or more` : held} ${kind}, its limit (${SETTINGS[kind]} = ${max}): ${
        adding === 1 ? `no more ${kind} can be added` : `${adding} more would pass it`
      }.`,
    );
  }
}
