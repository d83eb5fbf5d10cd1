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
 */
import pg from 'pg';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { CONNECT_TIMEOUT_MS } from './database.ts';
import { writeCommits } from './write-clock.ts';

export const TOKENS_CHANGED_CHANNEL = 'api_tokens_changed';
export const STORE_CHANGED_CHANNEL = 'store_changed';
/** Events were appended (migration 0002): the events feed's pages are list pages too. */
const EVENTS_CHANNEL = 'store_events';

interface Generations {
  tokens: number;
  store: number;
}

const generations = new WeakMap<object, Generations>();

function of(db: Kysely<unknown> | object): Generations {
  let g = generations.get(db);
  if (!g) {
    g = { tokens: 0, store: 0 };
    generations.set(db, g);
  }
  return g;
}

export const tokenGeneration = (db: object): number => of(db).tokens;
export const storeGeneration = (db: object): number => of(db).store;

/** A token of `db` was created, changed, rolled or revoked: no cached identity is served again. */
export function tokensChanged(db: object): void {
  of(db).tokens++;
}

/** A store table of `db` was written: no cached list page is served again. */
export function storeChanged(db: object): void {
  of(db).store++;
}

writeCommits.on('commit', (db: object) => storeChanged(db));

/** Wait before reopening the LISTEN connection after its `failures`-th consecutive loss. */
function backoffMs(failures: number): number {
  return Math.min(30_000, 250 * 2 ** Math.min(Math.max(0, failures - 1), 10));
}

/**
 * One LISTEN connection per process on PostgreSQL: NOTIFY on the two channels moves `db`'s
 * generations. `live` is true only while it listens.
 */
export class ReadCacheListener {
  readonly #url: string;
  readonly #db: object;
  readonly #logger: Pick<Logger, 'warn' | 'info'>;
  #client: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #failures = 0;
  #closed = false;

  constructor(url: string, db: object, logger: Pick<Logger, 'warn' | 'info'>) {
    this.#url = url;
    this.#db = db;
    this.#logger = logger;
  }

  /** True while notifications are being received: only then may the caches serve entries. */
  get live(): boolean {
    return this.#client !== undefined;
  }

  /** Opens the connection; resolves when it listens or has failed (then it retries by itself). */
  async open(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#url, application_name: 'store-api-read-cache', connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    let lost = false;
    const onLost = (error?: Error) => {
      if (lost) return;
      lost = true;
      if (this.#client === client) this.#client = undefined;
      client.end().catch(() => {});
      if (this.#closed) return;
      this.#failures++;
      const delay = backoffMs(this.#failures);
      this.#logger.warn(
        { err: error, retryInMs: delay },
        'read cache LISTEN connection lost; tokens and list pages are read from the database until it is back',
      );
      this.#retry = setTimeout(() => void this.open(), delay);
      this.#retry.unref();
    };
    client.on('notification', (message) => {
      if (message.channel === TOKENS_CHANGED_CHANNEL) tokensChanged(this.#db);
      else storeChanged(this.#db);
    });
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      await client.query(`LISTEN ${TOKENS_CHANGED_CHANNEL}`);
      await client.query(`LISTEN ${STORE_CHANGED_CHANNEL}`);
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    } catch (error) {
      onLost(error as Error);
      return;
    }
    if (this.#closed || lost) {
      await client.end().catch(() => {});
      return;
    }
    if (this.#failures > 0) this.#logger.info('read cache LISTEN connection restored');
    this.#failures = 0;
    // Whatever was cached before is from a time no notification covered.
    tokensChanged(this.#db);
    storeChanged(this.#db);
    this.#client = client;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }
}
