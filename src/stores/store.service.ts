/**
 * Stores: the tenants of one deployment (migration 0031, docs/decisions/0051-stores-as-tenants.md).
 * A platform operator creates, lists, suspends, resumes and deletes them (`store-api stores …`);
 * everything a store owns carries its id, and row-level security holds every store-scoped
 * statement to its store (db/store-scope.ts). Every function here works across stores: it runs in
 * the platform scope and names the store itself.
 */
import { randomUUID } from 'node:crypto';
import { sql, type ColumnType, type Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { runGivingWay } from '../db/connection-turns.ts';
import { asPlatform, inStore, NO_STORE_SCOPE } from '../db/store-scope.ts';
import { tokensChanged } from '../db/read-cache-signals.ts';
import { ApiError } from '../shared/problem.ts';

declare module '../db/schema.ts' {
  interface Database {
    stores: {
      id: string;
      name: string;
      status: 'active' | 'suspended' | 'deleting';
      created_at: ColumnType<string, string | undefined, never>;
      status_changed_at: ColumnType<string | null, string | null | undefined, string | null>;
    };
  }
}

export type StoreStatus = 'active' | 'suspended' | 'deleting';

export interface Store {
  id: string;
  name: string;
  status: StoreStatus;
  created_at: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `value` has the form of a store id (a UUID). */
export function isStoreId(value: string): boolean {
  return UUID.test(value);
}

function columns() {
  return ['id', 'name', 'status', sql<string>`iso_utc(created_at)`.as('created_at')] as const;
}

/** A store's name: 1–200 characters, not blank; kept as given, unique without regard to case. */
function checkedName(name: unknown): string {
  if (typeof name !== 'string' || name.trim().length === 0) {
    throw new ApiError('invalid_body', 'A store needs a name: 1 to 200 characters, not only spaces.', [
      { param: 'name', message: 'required, 1-200 characters' },
    ]);
  }
  const trimmed = name.trim();
  if (trimmed.length > 200) {
    throw new ApiError('invalid_body', `The store's name has ${trimmed.length} characters; at most 200.`, [
      { param: 'name', message: 'at most 200 characters' },
    ]);
  }
  return trimmed;
}

/** Creates a store named `name` (409 when another store has that name, whatever its case). */
export function createStore(db: Kysely<Database>, input: { name: unknown }): Promise<Store> {
  const name = checkedName(input.name);
  return asPlatform(async () => {
    const taken = await db.selectFrom('stores').select('id').where(sql<boolean>`lower(name) = lower(${name})`).executeTakeFirst();
    if (taken) throw new ApiError('conflict', `A store named "${name}" exists already (${taken.id}). Store names are unique, whatever their case.`);
    try {
      return await db
        .insertInto('stores')
        .values({ id: randomUUID(), name, status: 'active' })
        .returning([...columns()])
        .executeTakeFirstOrThrow();
    } catch (error) {
      // Two creations of one name at once: the unique index keeps one.
      if ((error as { code?: string }).code === '23505') throw new ApiError('conflict', `A store named "${name}" exists already.`);
      throw error;
    }
  });
}

/** Every store, oldest first. */
export function listStores(db: Kysely<Database>): Promise<Store[]> {
  return asPlatform(() =>
    db
      .selectFrom('stores')
      .select([...columns()])
      .orderBy('created_at')
      .orderBy('id')
      .execute(),
  );
}

/** The store `id`, or a 404 naming it (a malformed id: 400). */
export function getStore(db: Kysely<Database>, id: string): Promise<Store> {
  if (!isStoreId(id))
    throw new ApiError('invalid_parameter', `"${id}" is not a store id (a UUID, as \`store-api stores list\` shows).`, [
      { param: 'store', message: 'must be a UUID' },
    ]);
  return asPlatform(async () => {
    const store = await db
      .selectFrom('stores')
      .select([...columns()])
      .where('id', '=', id)
      .executeTakeFirst();
    if (!store) throw new ApiError('not_found', `No store has the id ${id}.`);
    return store;
  });
}

/**
 * Holds the running transaction's store open for writing until the transaction ends: its row is
 * read `FOR SHARE`, so suspending or deleting the store (an UPDATE of that row) waits for every
 * write already past this point to commit, and a write that comes after reads the new status and
 * is refused (403 `store_suspended`) with nothing written. Without it, a write authenticated before
 * a deletion (its key cached as active) could commit rows after the deletion had swept their table:
 * rows of a store that no longer exists. Called first in every admin write of a store
 * (admin-write-transaction.ts); costs one statement. Runs in the scope of the store it holds.
 */
export async function holdStoreOpen(db: Kysely<Database>): Promise<void> {
  // The function reads the scope's own store (migration 0044): the tenant role may not lock it itself.
  const row = await sql<{ status: StoreStatus | null }>`SELECT store_api_hold_current_store() AS status`.execute(db);
  const status = row.rows[0]?.status;
  if (status === 'active') return;
  throw new ApiError(
    'store_suspended',
    status === 'suspended'
      ? "This store is suspended by the platform's operator: its data cannot be changed until it is resumed."
      : 'This store is being deleted: its data can no longer be changed.',
  );
}

/**
 * Suspends (`suspended`) or resumes (`active`) a store: a suspended store's keys are answered 403
 * `store_suspended`, its deliveries wait. A store being deleted can be neither.
 */
export async function setStoreStatus(db: Kysely<Database>, id: string, status: 'active' | 'suspended'): Promise<Store> {
  const store = await getStore(db, id);
  if (store.status === 'deleting') throw new ApiError('conflict', `The store ${id} is being deleted; finish it with \`store-api stores delete ${id} --yes\`.`);
  if (store.status === status) return store;
  const updated = await asPlatform(() =>
    db
      .updateTable('stores')
      .set({ status, status_changed_at: sql<string>`now()` })
      .where('id', '=', id)
      .where('status', '<>', 'deleting')
      .returning([...columns()])
      .executeTakeFirstOrThrow(),
  );
  tokensChanged(db);
  homeStores.delete(db);
  return updated;
}

/**
 * Every store-owned table, children before parents, in the order a deletion empties them (the
 * foreign keys between them hold at every step).
 */
export const STORE_OWNED_TABLES = [
  'import_jobs',
  'webhook_attempts',
  'webhook_deliveries',
  'webhook_endpoints',
  'events',
  'idempotency_keys',
  'api_tokens',
  'stock_movements',
  'order_items',
  'orders',
  'customers',
  'images',
  'variants',
  'products',
  'admin_audit_log',
] as const;

/** Rows one step of a deletion erases from one table. */
export const DELETE_STEP_ROWS = 2000;

export interface DeleteProgress {
  table: string;
  deleted: number;
}

/**
 * Erases the store `id` and every row it owns. The store is marked `deleting` first (its keys stop
 * at once, its deliveries are no longer claimed), then each table is emptied of its rows in
 * committed steps of DELETE_STEP_ROWS that give way to other statements (other stores keep being
 * served), and the store's row goes last. A crash leaves it `deleting`: running this again goes
 * on where it stopped.
 */
export async function deleteStore(db: Kysely<Database>, id: string, onProgress?: (progress: DeleteProgress) => void): Promise<{ deleted: number }> {
  await getStore(db, id);
  return asPlatform(async () => {
    await db
      .updateTable('stores')
      .set({ status: 'deleting', status_changed_at: sql<string>`now()` })
      .where('id', '=', id)
      .where('status', '<>', 'deleting')
      .execute();
    tokensChanged(db);
    let total = 0;
    for (const table of STORE_OWNED_TABLES) {
      for (;;) {
        const deleted = await runGivingWay(async () => {
          const result = await sql`
            DELETE FROM ${sql.table(table)} WHERE store_id = ${id}::uuid
              AND ctid = ANY(ARRAY(SELECT ctid FROM ${sql.table(table)} WHERE store_id = ${id}::uuid LIMIT ${DELETE_STEP_ROWS}))
          `.execute(db);
          return Number(result.numAffectedRows ?? 0);
        });
        total += deleted;
        onProgress?.({ table, deleted: total });
        if (deleted < DELETE_STEP_ROWS) break;
      }
    }
    await db.deleteFrom('stores').where('id', '=', id).execute();
    tokensChanged(db);
    return { deleted: total };
  });
}

/**
 * Sets `database`'s default scope, what a command or a process acts for when no store is named
 * (main/runtime.ts, once the migrations ran): the only store there is; with several, `none` (a
 * statement that forgets its store sees nothing).
 */
export async function useDefaultStoreScope(database: DatabaseHandle): Promise<void> {
  const stores = await asPlatform(() => database.db.selectFrom('stores').select('id').where('status', '<>', 'deleting').limit(2).execute());
  database.scopes.setDefault(stores.length === 1 ? { kind: 'store', storeId: stores[0]!.id } : NO_STORE_SCOPE);
}

/** Runs `fn` in the home store's scope (see homeStore); as it is when there is none. */
export async function inHomeStore<T>(db: Kysely<Database>, fn: () => Promise<T>): Promise<T> {
  const home = await homeStore(db);
  return home ? inStore(home.id, fn) : fn();
}

/**
 * The deployment's first (oldest) store: where a first-administrator setup code makes its owner,
 * and whose audit log records sign-in failures of no account's store (decision 0051). Undefined
 * before migration 0031.
 */
export async function homeStore(db: Kysely<Database>): Promise<{ id: string; status: StoreStatus } | undefined> {
  const known = homeStores.get(db);
  if (known && known.until > Date.now()) return known.store;
  const row = await asPlatform(() =>
    db.selectFrom('stores').select(['id', 'status']).where('status', '<>', 'deleting').orderBy('created_at').orderBy('id').limit(1).executeTakeFirst(),
  );
  if (row) homeStores.set(db, { store: row, until: Date.now() + HOME_STORE_KEPT_MS });
  return row;
}

/** How long a process keeps the home store before it reads it again (a suspension reaches the dashboard within this). */
const HOME_STORE_KEPT_MS = 2_000;
const homeStores = new WeakMap<object, { store: { id: string; status: StoreStatus }; until: number }>();
