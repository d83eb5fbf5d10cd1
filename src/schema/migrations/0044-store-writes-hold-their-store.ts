/**
 * A write of a store holds its store open (decision 0051, "A platform operator's control"):
 * `store_api_hold_current_store()` reads the row of the scope's store `FOR SHARE` and returns its
 * status. Suspending or deleting the store updates that row, so it waits for every write that
 * already holds it, and a write that comes after reads the new status and is refused. `FOR SHARE`
 * needs the UPDATE privilege, which the tenant role must not have on `stores` (migration 0031
 * revoked it): the function runs as its owner (SECURITY DEFINER, its search path pinned), and it
 * reaches the scope's own store only, so a tenant learns and locks nothing of another store.
 */
import { sql, type Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db);
  const schema = `"${rows[0]!.schema.replaceAll('"', '""')}"`;
  await executeScript(
    db,
    `
    CREATE FUNCTION store_api_hold_current_store() RETURNS text LANGUAGE sql VOLATILE SECURITY DEFINER
      SET search_path = ${schema}, pg_temp
      AS $$ SELECT status FROM stores WHERE id = store_api_current_store() FOR SHARE $$;
    REVOKE ALL ON FUNCTION store_api_hold_current_store() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION store_api_hold_current_store() TO store_api_tenant, store_api_platform;
  `,
  );
}
