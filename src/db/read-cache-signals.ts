/**
 * What the read caches (the token cache, tokens/token-cache.ts; the list page cache,
 * api/list-page-cache.ts) learn about writes, per database (Kysely instance), as two generation
 * counters: `tokens` moves when a token's identity may have changed, `store` when a list page may
 * have. A cache entry remembers the generation it was read under and is never served under another.
 *
 * Sources, decision 0016:
 *  - in process, synchronously: the token service after each of its writes (`tokensChanged`), and
 *    every write-clock transaction's commit (`writeCommits`, write-clock.ts) for the store;
 *  - across processes (PostgreSQL): NOTIFY `api_tokens_changed` / `store_changed` from statement
 *    triggers (migration 0016) and `store_events` when events are appended (migration 0002: the
 *    events feed is served by the same list route), on a LISTEN connection of this process (`ReadCacheListener`). While
 *    that connection is not open the caches are bypassed (`live` false); when it opens, both
 *    generations move, so nothing read before it is served.
 *
 * The store generation is per store (decision 0051, migration 0035): a write acting for a store
 * moves that store's counter (the NOTIFY's payload is the writing connection's store), so one
 * store's writes do not empty every other store's pages; a write of no store (the platform's: a
 * deletion, a migration) moves the deployment's counter, which every store's generation includes.
 */
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { ListenConnection } from './listen-connection.ts';
import { activeRequestTransaction } from './request-transaction.ts';
import { writeCommits } from './write-clock.ts';

export const TOKENS_CHANGED_CHANNEL = 'api_tokens_changed';
export const STORE_CHANGED_CHANNEL = 'store_changed';
/** Events were appended (migration 0002): the events feed's pages are list pages too. */
const EVENTS_CHANNEL = 'store_events';

interface Generations {
  tokens: number;
  /** Writes of no store: every store's pages. */
  store: number;
  /** Writes of one store, by its id. */
  stores: Map<string, number>;
}

const generations = new WeakMap<object, Generations>();

function of(db: Kysely<unknown> | object): Generations {
  let g = generations.get(db);
  if (!g) {
    g = { tokens: 0, store: 0, stores: new Map() };
    generations.set(db, g);
  }
  return g;
}

export const tokenGeneration = (db: object): number => of(db).tokens;
/** The generation of `storeId`'s list pages: moved by its own writes and by writes of no store. */
export const storeGeneration = (db: object, storeId: string): string => {
  const g = of(db);
  return `${g.store}.${g.stores.get(storeId) ?? 0}`;
};

/**
 * A token of `db` was created, changed, rolled or revoked: no cached identity is served again. Inside
 * a request transaction (request-transaction.ts) the change is visible only after its commit, so the
 * generation moves again then: a read between the two cannot keep the old row.
 */
export function tokensChanged(db: object): void {
  of(db).tokens++;
  activeRequestTransaction()?.afterCommit(() => of(db).tokens++);
}

/**
 * A store table of `db` was written, for `storeId` (undefined or '': for no store, so for every
 * store): no list page of it cached before is served again (see tokensChanged).
 */
export function storeChanged(db: object, storeId?: string): void {
  const move = () => {
    const g = of(db);
    if (storeId) g.stores.set(storeId, (g.stores.get(storeId) ?? 0) + 1);
    else g.store++;
  };
  move();
  activeRequestTransaction()?.afterCommit(move);
}

writeCommits.on('commit', (db: object, storeId?: string) => storeChanged(db, storeId));

/**
 * One LISTEN connection per process on PostgreSQL (db/listen-connection.ts): NOTIFY on the three
 * channels moves `db`'s generations. `live` is true only while it listens.
 */
export class ReadCacheListener {
  readonly #connection: ListenConnection;

  constructor(url: string, db: object, logger: Pick<Logger, 'warn' | 'info'>) {
    this.#connection = new ListenConnection({
      url,
      channels: [TOKENS_CHANGED_CHANNEL, STORE_CHANGED_CHANNEL, EVENTS_CHANNEL],
      applicationName: 'store-api-read-cache',
      intervalMs: 250,
      logger,
      lostMessage: 'read cache LISTEN connection lost; tokens and list pages are read from the database until it is back',
      restoredMessage: 'read cache LISTEN connection restored',
      onNotification: (channel, payload) => (channel === TOKENS_CHANGED_CHANNEL ? tokensChanged(db) : storeChanged(db, payload)),
      // Whatever was cached before is from a time no notification covered.
      onListening: () => {
        tokensChanged(db);
        storeChanged(db);
      },
    });
  }

  /** True while notifications are being received: only then may the caches serve entries. */
  get live(): boolean {
    return this.#connection.live;
  }

  /** Opens the connection; resolves when it listens or has failed (then it retries by itself). */
  open(): Promise<void> {
    return this.#connection.open();
  }

  close(): Promise<void> {
    return this.#connection.close();
  }
}
