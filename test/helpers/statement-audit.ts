/**
 * The statement audit (decision 0051): every statement the service runs over a store-owned table
 * names its store, beside row-level security filtering it. Observes what the database handles of
 * this process run (db/store-scope.ts `observeStatements`) and reports each statement over a
 * store-owned table that
 *  - does not name `store_id` at all, or
 *  - runs in a store's scope without that store's id among its parameters (or in its text): the
 *    filter must come from the scope (`ownStore()`), not from the connection's setting alone.
 * Definitions (CREATE, ALTER, …) are the migrations' and not looked at.
 */
import { observeStatements, type StoreScope } from '../../src/db/store-scope.ts';
import { STORE_OWNED_TABLES } from '../../src/stores/store.service.ts';

const OWNED = new Set<string>(STORE_OWNED_TABLES);
const TABLE_NAMED = /\b(?:from|join|into|update|using)\s+(?:only\s+)?"?([a-z_][a-z0-9_]*)"?/gi;
const DEFINITION = /^\s*(?:create|alter|drop|grant|revoke|comment|truncate|set|reset|show|begin|commit|rollback|savepoint|release|listen|unlisten|notify)\b/i;

/** The store-owned tables `text` reads or writes. */
export function storeOwnedTablesOf(text: string): string[] {
  const found = new Set<string>();
  for (const match of text.matchAll(TABLE_NAMED)) {
    const name = match[1]!.toLowerCase();
    if (OWNED.has(name)) found.add(name);
  }
  return [...found];
}

/** Why `text` run in `scope` with `parameters` does not name its store; undefined when it does or needs not. */
export function storeFilterMissing(text: string, parameters: readonly unknown[], scope: StoreScope): string | undefined {
  if (DEFINITION.test(text)) return undefined;
  const tables = storeOwnedTablesOf(text);
  if (tables.length === 0) return undefined;
  if (!/\bstore_id\b/.test(text)) return `names no store_id (${tables.join(', ')})`;
  if (scope.kind === 'store' && !parameters.includes(scope.storeId) && !text.includes(scope.storeId)) {
    return `runs for store ${scope.storeId} without its id as a parameter (${tables.join(', ')})`;
  }
  return undefined;
}

export interface StatementAudit {
  /** Statements seen over store-owned tables. */
  readonly checked: () => number;
  /** Each statement that does not name its store, once, with why; stops observing. */
  stop(): string[];
}

/**
 * Starts observing every statement of this process (one audit at a time); none while `paused()`
 * (a test that takes the filters away on purpose).
 */
export function startStatementAudit({ paused = () => false }: { paused?: () => boolean } = {}): StatementAudit {
  const wrong = new Map<string, string>();
  let checked = 0;
  observeStatements((text, parameters, scope) => {
    if (paused()) return;
    if (storeOwnedTablesOf(text).length > 0 && !DEFINITION.test(text)) checked += 1;
    const why = storeFilterMissing(text, parameters, scope);
    if (why !== undefined) wrong.set(text, `${scope.kind}: ${why}: ${text.replace(/\s+/g, ' ').slice(0, 240)}`);
  });
  return {
    checked: () => checked,
    stop: () => {
      observeStatements(undefined);
      return [...wrong.values()];
    },
  };
}
