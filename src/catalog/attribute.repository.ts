/**
 * The attributes of the catalog (spec: "each distinct attributes key corresponds to one attribute and
 * each distinct value to one attribute value"), computed from the variants the products list shows:
 * active variants of active products (or of every product with `includeInactive`). Keys and values
 * are ordered bytewise (COLLATE "C") so pages are the same on PGlite and PostgreSQL whatever the
 * database's locale, and the keyset (`key > cursor`) agrees with that order.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { ownStoreIs } from '../db/store-scope.ts';

/** One distinct value of an attribute and how many variants carry it. */
export interface AttributeValueRow {
  value: string;
  variant_count: number;
}

/** One attribute key with its distinct values. */
export interface AttributeRow {
  key: string;
  variant_count: number;
  values: AttributeValueRow[];
}

export interface AttributePageRequest {
  /** Keys strictly after this one (the `key` of the last attribute of the previous page). */
  after?: string | undefined;
  limit: number;
  includeInactive: boolean;
}

/**
 * One page of attributes by key, and whether more follow. Aggregates the variants in one statement
 * (a scan of the active variants: the list is a mapping aid read rarely, not a change feed).
 */
export async function attributePage(db: Kysely<Database>, req: AttributePageRequest): Promise<{ data: AttributeRow[]; hasMore: boolean }> {
  const active = req.includeInactive ? sql`true` : sql`p.is_active`;
  const after = req.after === undefined ? sql`true` : sql`a.key > ${req.after} COLLATE "C"`;
  const { rows } = await sql<{ key: string; variant_count: number; values: AttributeValueRow[] }>`
    WITH pairs AS (
      SELECT a.key COLLATE "C" AS key, a.value COLLATE "C" AS value, count(*)::int AS variant_count
      FROM variants v
      JOIN products p ON p.store_id = v.store_id AND p.id = v.product_id
      CROSS JOIN LATERAL jsonb_each_text(v.attributes) AS a(key, value)
      WHERE ${ownStoreIs('v.store_id')} AND v.is_active AND ${active} AND ${after}
      GROUP BY 1, 2
    ), keys AS (
      SELECT key FROM pairs GROUP BY key ORDER BY key LIMIT ${req.limit + 1}
    )
    SELECT k.key,
      (SELECT sum(pv.variant_count)::int FROM pairs pv WHERE pv.key = k.key) AS variant_count,
      (SELECT json_agg(json_build_object('value', pv.value, 'variant_count', pv.variant_count) ORDER BY pv.value)
         FROM pairs pv WHERE pv.key = k.key) AS values
    FROM keys k ORDER BY k.key`.execute(db);
  const hasMore = rows.length > req.limit;
  const page = hasMore ? rows.slice(0, req.limit) : rows;
  return {
    data: page.map((r) => ({ key: r.key, variant_count: Number(r.variant_count), values: r.values })),
    hasMore,
  };
}
