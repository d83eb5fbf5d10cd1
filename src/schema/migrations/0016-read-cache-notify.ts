/**
 * Notifications the read caches of every API process listen to (decision 0016): a statement that
 * changes a token's identity (secret, scopes, limits, expiry, revocation) or deletes a token NOTIFYs
 * `api_tokens_changed`; a statement that writes a table a list page reads NOTIFYs `store_changed`
 * (the tables derived from the resource declarations: resources/store-schema.ts).
 * NOTIFY is delivered at commit, once per channel per transaction. `last_used_at` bookkeeping does
 * not notify (the token caches would empty once a minute for nothing).
 * (Bodies on one line: execute-script.ts splits statements at a ';' that ends a line.)
 */
import type { Kysely } from 'kysely';
import { installStoreTriggers } from '../../resources/store-schema.ts';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE FUNCTION notify_api_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('api_tokens_changed', ''); RETURN NULL; END $$;
    CREATE TRIGGER api_tokens_notify_update
      AFTER UPDATE OF token_hash, previous_token_hash, previous_token_expires_at, scopes, name, rate_limit_standard, rate_limit_export, expires_at, revoked_at
      ON api_tokens FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();
    CREATE TRIGGER api_tokens_notify_delete AFTER DELETE OR TRUNCATE ON api_tokens FOR EACH STATEMENT EXECUTE FUNCTION notify_api_tokens_changed();
    CREATE FUNCTION notify_store_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('store_changed', ''); RETURN NULL; END $$;
  `,
  );
  // On every table a list page reads (each resource's table and its document's child tables),
  // derived from the resource declarations; later resources get theirs from their own migration.
  await installStoreTriggers(db);
}
