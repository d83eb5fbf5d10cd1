/**
 * Transactions whose statements read by index only: no sequential scans, no bitmap scans. For the
 * webhook queue's statements (the event poll, the claims, `nextDueAt`), every read of which is by
 * design an index walk in key order that stops at a limit, or an index probe of one store's
 * endpoint.
 *
 * PostgreSQL's planner chooses otherwise when the statistics mislead it, and the queue is where they
 * do: one store often holds nearly every unfinished delivery (a backlog of 100,000 to a failing
 * endpoint). The statistics then say that any store id matches nearly every row, and a probe of
 * another store's endpoint ("any due delivery?", "its line's head") was planned as a sequential
 * scan of the whole table expected to stop at its first match, which found none and read
 * everything: 35 ms of a 43-ms fan-out of one event of store B in the stores bench, where the index
 * probe takes 0.1 ms. Right after an import filled the event log, the log has no statistics and a
 * bitmap scan read the rest of an import's one stamp (300,000 events) for every batch of it.
 *
 * Planner settings apply to the statements planned after they are set. Outside a transaction the
 * code runs in `readsByIndex` mode (an AsyncLocalStorage, like the store scope) and a connection is
 * switched to the settings as it is taken, by the same one statement that switches its store scope
 * (db/store-scope.ts `ScopeState.sync`): the worker's connections keep them, so its claims and
 * `nextDueAt` cost no round trip more than their own statement. Inside a caller's transaction (the
 * connection's session settings were fixed when it began) they are set by the transaction's next
 * statement (`set_config(…, true)`: this transaction only), or by its first statement's WHERE
 * (INDEX_READS, the poll's). With the settings off the planner still uses such a scan where nothing
 * else can answer; it only stops preferring it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { sql, type Kysely } from 'kysely';

const byIndex = new AsyncLocalStorage<boolean>();

/** Whether the running code's statements read by index only (`readingByIndex` outside a transaction). */
export function readsByIndex(): boolean {
  return byIndex.getStore() === true;
}

/**
 * A condition that is true and sets the settings for the rest of its transaction: for a transaction's
 * first statement that has a WHERE anyway (the poll's), which saves a round trip.
 */
export const INDEX_READS = sql<boolean>`(SELECT set_config('enable_bitmapscan', 'off', true)) IS NOT NULL AND (SELECT set_config('enable_seqscan', 'off', true)) IS NOT NULL`;

/**
 * Runs `fn` so that its statements read by index only. Outside a transaction `fn` gets `db` and
 * every statement it runs, a transaction it begins included, is on a connection with the settings
 * (`readsByIndex`). Given a transaction (a caller's), `fn` runs in it after a statement that sets
 * them for the rest of it.
 */
export async function readingByIndex<DB, T>(db: Kysely<DB>, fn: (db: Kysely<DB>) => Promise<T>): Promise<T> {
  if (!db.isTransaction) return byIndex.run(true, () => fn(db));
  await sql`SELECT ${INDEX_READS}`.execute(db);
  return fn(db);
}
