/**
 * The read caches' signals per store (decision 0051, "Caches per store"): the `store_changed` and
 * `store_events` NOTIFYs name the writing connection's store (`store_api.store_id`, set per
 * connection by db/store-scope.ts; '' for a connection of no store, which every store's cache
 * takes as its own), so one store's writes no longer empty every other store's list pages in every
 * process. NOTIFY still goes once per channel and payload per transaction.
 * (Bodies on one line: execute-script.ts splits statements at a ';' that ends a line.)
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE OR REPLACE FUNCTION notify_store_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('store_changed', coalesce(current_setting('store_api.store_id', true), '')); RETURN NULL; END $$;
    CREATE OR REPLACE FUNCTION notify_store_events() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('store_events', coalesce(current_setting('store_api.store_id', true), '')); RETURN NULL; END $$;
  `,
  );
}
