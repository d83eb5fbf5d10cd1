/**
 * Store scopes (docs/decisions/0051-stores-as-tenants.md): which store a statement acts for, and so
 * which rows PostgreSQL's row-level security lets it see and write.
 *
 *  - `store`: the role `store_api_tenant` with `store_api.store_id` set: the policies of every
 *    store-owned table (migration 0031) show and accept that store's rows only. What a request
 *    authenticated by a store's key or session does.
 *  - `platform`: the role `store_api_platform` (BYPASSRLS): work across stores that names the store
 *    of every row itself (the webhook worker's claims, the event poller, retention, `stores …`).
 *  - `none`: the tenant role with no store: a statement that forgot its scope sees nothing.
 *  - `owner`: the connection's own user (migrations, a database not migrated yet).
 *
 * The scope is carried by AsyncLocalStorage, like the request transaction; code outside any scope
 * gets its database's default (`ScopeState.setDefault`: the owner until the process picks its own
 * after migrating, stores/store.service.ts `useDefaultStoreScope`: the only store, or none). A
 * connection is switched when it is taken by code of another scope than the one it last got, with
 * ONE session-level statement (`set_config` of the role and of the store, and of the planner
 * settings of db/index-reads.ts) before any transaction
 * begins on it: a deployment of one store switches once per connection, never again, and a fleet
 * of stores pays a round trip only when a connection changes hands between stores. Inside a
 * transaction the connection keeps the scope it began with (a request's statements all have its
 * scope).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { sql, type RawBuilder } from 'kysely';
import { readsByIndex } from './index-reads.ts';

export type StoreScope =
  | { readonly kind: 'store'; readonly storeId: string }
  | { readonly kind: 'platform' }
  | { readonly kind: 'none' }
  | { readonly kind: 'owner' };

export const OWNER_SCOPE: StoreScope = { kind: 'owner' };
export const PLATFORM_SCOPE: StoreScope = { kind: 'platform' };
export const NO_STORE_SCOPE: StoreScope = { kind: 'none' };

interface Holder {
  scope: StoreScope | undefined;
}

const holders = new AsyncLocalStorage<Holder>();

/** Runs `fn` (and everything it awaits) in `scope`. */
export function runInScope<T>(scope: StoreScope, fn: () => T): T {
  return holders.run({ scope }, fn);
}

/** Runs `fn` for the store `storeId`. */
export function inStore<T>(storeId: string, fn: () => T): T {
  return runInScope({ kind: 'store', storeId }, fn);
}

/** Runs `fn` across stores: every statement must name the store of its rows itself. */
export function asPlatform<T>(fn: () => T): T {
  return runInScope(PLATFORM_SCOPE, fn);
}

/**
 * Runs `fn` with a scope decided later inside it (`setScope`): a request's hooks run in one, and its
 * authentication names the store once it knows the credential.
 */
export function withScopeHolder<T>(fn: () => T): T {
  return holders.run({ scope: undefined }, fn);
}

/** Sets the scope of the innermost `withScopeHolder`/`runInScope` (a request's, once authenticated). */
export function setScope(scope: StoreScope): void {
  const holder = holders.getStore();
  if (!holder) throw new Error('setScope outside a scope holder');
  holder.scope = scope;
}

/** The scope of the running code, when one was set. */
export function currentScope(): StoreScope | undefined {
  return holders.getStore()?.scope;
}

/** The store of the running code, when its scope is a store. */
export function currentStoreId(): string | undefined {
  const scope = currentScope();
  return scope?.kind === 'store' ? scope.storeId : undefined;
}

/**
 * The store a statement over a store-owned table acts for, as SQL: the scope's store as a parameter
 * (`$n::uuid`), independent of the connection's setting, so a connection left in another store's
 * setting would still find nothing of it. Outside a store scope (code of the deployment's default
 * scope, tests calling services directly) it is `store_api_insert_store()`: the session's store,
 * else the deployment's only store, else nothing (NULL: no row matches). Every statement names
 * its store this way as well as row-level security filtering it (decision 0051): the store id
 * leads every store-owned index, and on a sharded database (docs/scaling.md) it routes the
 * statement to its store's shard.
 */
export function ownStore(): RawBuilder<string> {
  const id = currentStoreId();
  return id === undefined ? sql<string>`store_api_insert_store()` : sql<string>`${id}::uuid`;
}

/**
 * The condition `<column> = <the statement's store>` (`ownStore`), for a WHERE or a JOIN … ON:
 * `.where(ownStoreIs('p.store_id'))`, or `${ownStoreIs('store_id')}` in raw SQL.
 */
export function ownStoreIs(column = 'store_id'): RawBuilder<boolean> {
  return sql<boolean>`${sql.ref(column)} = ${ownStore()}`;
}

/**
 * The same condition for a table outside row-level security that keeps rows of several stores
 * (the administrators' memberships, links, sessions and settings, migration 0033): there this
 * filter is the only isolation, so the cross-store matrix, which takes `ownStoreIs` away to prove
 * row-level security alone holds, leaves this one in place.
 */
export function accountStoreIs(column = 'store_id'): RawBuilder<boolean> {
  return sql<boolean>`${sql.ref(column)} = ${ownStore()}`;
}

/** What the database handle reports of each statement it runs, to `observeStatements`' observer. */
export type StatementObserver = (
  sql: string,
  parameters: readonly unknown[],
  scope: StoreScope,
  /** Whether it was run reading by index only (db/index-reads.ts `readsByIndex`). */
  byIndex: boolean,
) => void | Promise<void>;

let statementObserver: StatementObserver | undefined;

/**
 * Every statement a database handle runs (Kysely's, and the handle's own `readRows`) is passed to
 * `observer` with its scope, until called again with undefined. For the test that every statement
 * over a store-owned table names its store (test/stores/statement-audit.ts); undefined (nothing
 * observed, one comparison per statement) otherwise. A promise the observer returns for a Kysely
 * statement is awaited before the statement's caller goes on (Kysely awaits its log hook), with the
 * statement's connection still held: a test commits a write between two statements of a request by
 * it (test/api/snapshot-window.test.ts, PostgreSQL's pool only; the embedded database's one
 * connection would wait for itself). The handle's `readRows` statements are reported, not awaited.
 */
export function observeStatements(observer: StatementObserver | undefined): void {
  statementObserver = observer;
}

/** The observer, if any (called by db/database.ts). */
export function statementObserverOf(): StatementObserver | undefined {
  return statementObserver;
}

function keyOf(scope: StoreScope, byIndex: boolean): string {
  return `${scope.kind === 'store' ? `store:${scope.storeId}` : scope.kind}${byIndex ? '+index' : ''}`;
}

/**
 * The statement that puts a connection in `scope`, reading by index only or not (its text and
 * parameters). The planner settings go back to PostgreSQL's defaults (on) when not.
 */
function switchStatement(scope: StoreScope, byIndex: boolean): { sql: string; parameters: string[] } {
  const role = scope.kind === 'owner' ? 'none' : scope.kind === 'platform' ? 'store_api_platform' : 'store_api_tenant';
  const store = scope.kind === 'store' ? scope.storeId : '';
  return {
    sql: `SELECT set_config('role', $1, false), set_config('store_api.store_id', $2, false), set_config('enable_seqscan', $3, false), set_config('enable_bitmapscan', $3, false)`,
    parameters: [role, store, byIndex ? 'off' : 'on'],
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The scopes of one database: its default, and what each of its connections (sessions) last got,
 * with whether it reads by index only (db/index-reads.ts: the worker's queue statements).
 */
export class ScopeState {
  #default: StoreScope = OWNER_SCOPE;
  /** Connection (session) → the key of the scope it is in; a new session is the owner's. */
  readonly #applied = new WeakMap<object, string>();

  /** The scope of code that runs outside any (the owner until the service chooses). */
  get default(): StoreScope {
    return this.#default;
  }

  setDefault(scope: StoreScope): void {
    this.#default = scope;
  }

  /** The scope a statement issued now runs in. */
  wanted(): StoreScope {
    return currentScope() ?? this.#default;
  }

  /**
   * Puts the session `session` in the running code's scope and planner settings when it is in
   * others, by `run`ning one statement. Only ever outside a transaction (as a connection is
   * taken): a rollback would undo a switch made inside one, unseen.
   */
  async sync(session: object, run: (sql: string, parameters: string[]) => Promise<unknown>): Promise<void> {
    const scope = this.wanted();
    const byIndex = readsByIndex();
    const key = keyOf(scope, byIndex);
    if ((this.#applied.get(session) ?? 'owner') === key) return;
    if (scope.kind === 'store' && !UUID.test(scope.storeId)) throw new Error(`not a store id: ${scope.storeId}`);
    const { sql, parameters } = switchStatement(scope, byIndex);
    // Unknown while it runs: a failure leaves the session in a state we cannot tell.
    this.#applied.set(session, 'unknown');
    await run(sql, parameters);
    this.#applied.set(session, key);
  }
}
