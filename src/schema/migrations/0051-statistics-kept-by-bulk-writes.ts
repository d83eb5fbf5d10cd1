/**
 * Planner statistics a bulk write keeps current (decision 0067): `store_api_analyze_if_stale(table,
 * written, analysed_before)` runs `ANALYZE` of one of the store tables a write grows in bulk when the
 * rows its transaction wrote since it last analysed the table (`written`) and, unless it has
 * (`analysed_before`), the committed changes not yet analysed exceed the rows the statistics know
 * of (plus 1,000), or when the table was never analysed. The
 * embedded database has no autovacuum, and no server's autovacuum sees rows a transaction has not
 * committed: without statistics the planner takes `store_id = $1` for 0.5 % of a table, and joins a
 * chunk's ids to the whole store through a store-led index instead of the primary key, once per
 * chunk (an import of 20,000 rows took 2.8× as long as before store isolation). ANALYZE needs the
 * table's owner: the function runs as its owner (SECURITY DEFINER, its search path pinned), on these
 * tables only, and takes its lock without waiting (a table another transaction analyses is skipped:
 * the lock is held to the end of the transaction). Its sample is 3,000 rows (statistics target 10,
 * for the function's run only), not the default's 30,000: what the plans of a bulk write need is how
 * many rows the store has, and a sample of events and products is held in the embedded database's
 * memory while it is analysed. PostgreSQL's autovacuum analyses again with the default target once
 * the rows are committed. Returns whether it analysed.
 */
import { sql, type Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db);
  const schema = `"${rows[0]!.schema.replaceAll('"', '""')}"`;
  // One statement of its own: the body's lines end with ';', where executeScript would split it.
  await sql
    .raw(
      `CREATE FUNCTION store_api_analyze_if_stale(target text, written bigint, analysed_before boolean) RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER
      SET search_path = ${schema}, pg_temp
      SET default_statistics_target = 10
      AS $$
      DECLARE
        known real;
        unanalysed bigint;
      BEGIN
        IF target NOT IN ('products', 'variants', 'images', 'customers', 'orders', 'order_items', 'stock_movements', 'events') THEN
          RAISE EXCEPTION 'store_api_analyze_if_stale: % is not a table it analyses', target USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- The committed changes not analysed yet: none once this transaction has analysed the table
        -- (the count is reset when it commits).
        SELECT c.reltuples, CASE WHEN analysed_before THEN 0 ELSE pg_stat_get_mod_since_analyze(c.oid) END INTO known, unanalysed
          FROM pg_class c WHERE c.oid = format('%I', target)::regclass;
        IF known >= 0 AND written + unanalysed <= 1000 + known THEN
          RETURN false;
        END IF;
        BEGIN
          EXECUTE format('LOCK TABLE %I IN SHARE UPDATE EXCLUSIVE MODE NOWAIT', target);
        EXCEPTION WHEN lock_not_available THEN
          RETURN false;
        END;
        EXECUTE format('ANALYZE %I', target);
        RETURN true;
      END
      $$`,
    )
    .execute(db);
  await executeScript(
    db,
    `
    REVOKE ALL ON FUNCTION store_api_analyze_if_stale(text, bigint, boolean) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION store_api_analyze_if_stale(text, bigint, boolean) TO store_api_tenant, store_api_platform;
  `,
  );
}
