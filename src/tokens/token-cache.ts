/**
 * The token cache of a process (decision 0016): a token found valid is kept, by the hash of its
 * secret, for at most TOKEN_CACHE_MS and never past its own expiry,
 * so most requests skip the token look-up round trip. A rolled-out secret still in its overlap is
 * never kept: its end is checked on every request. Revocation, a roll, a change of scopes or
 * limits take effect on the next request all the same: each moves the tokens generation
 * (db/read-cache-signals.ts) in this process at once, in every other process when its NOTIFY
 * arrives, and an entry read under another generation is never served. While a PostgreSQL process
 * does not listen, nothing is served from the cache. Unknown, revoked and expired tokens are never
 * kept (a new token works at once). `last_used_at` is recorded by the look-up that fills an entry,
 * so at most TOKEN_CACHE_MS + 60 s behind.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { tokenGeneration } from '../db/read-cache-signals.ts';
import { hashToken, lookupToken, type AuthenticatedToken, type AuthenticationFailure } from './token.service.ts';

/** Entries kept at most (distinct valid tokens in use); the oldest goes first. */
const MAX_ENTRIES = 10_000;

interface Entry {
  readonly token: AuthenticatedToken;
  readonly until: number;
  readonly generation: number;
}

export interface TokenCacheOptions {
  /** TOKEN_CACHE_MS: longest an entry is served; 0 turns the cache off. */
  readonly maxAgeMs: number;
  /** Whether this process hears of token changes made elsewhere (PostgreSQL: its LISTEN connection is open). */
  readonly live: () => boolean;
  readonly now?: () => number;
}

export class TokenCache {
  readonly #db: Kysely<Database>;
  readonly #options: TokenCacheOptions;
  readonly #entries = new Map<string, Entry>();

  constructor(db: Kysely<Database>, options: TokenCacheOptions) {
    this.#db = db;
    this.#options = options;
  }

  async authenticate(presented: string): Promise<AuthenticatedToken | AuthenticationFailure> {
    const now = this.#options.now ?? Date.now;
    const hash = hashToken(presented);
    const generation = tokenGeneration(this.#db);
    const usable = this.#options.maxAgeMs > 0 && this.#options.live();
    const hit = this.#entries.get(hash);
    if (hit) {
      if (usable && hit.generation === generation && now() < hit.until) return hit.token;
      this.#entries.delete(hash);
    }
    const result = await lookupToken(this.#db, presented);
    if (typeof result === 'string') return result;
    // Kept only when no change was announced while it was read, and never past the secret's end.
    if (usable && this.#options.live() && tokenGeneration(this.#db) === generation) {
      const age = Math.min(this.#options.maxAgeMs, result.validForMs ?? Number.POSITIVE_INFINITY);
      if (age > 0) {
        if (this.#entries.size >= MAX_ENTRIES) this.#entries.delete(this.#entries.keys().next().value!);
        this.#entries.set(hash, { token: result.token, until: now() + age, generation });
      }
    }
    return result.token;
  }
}

const caches = new WeakMap<Kysely<Database>, TokenCache>();

/** Turns the token cache on for `db` (the app factory does, once per database). */
export function enableTokenCache(db: Kysely<Database>, options: TokenCacheOptions): void {
  caches.set(db, new TokenCache(db, options));
}

/** Authenticates through `db`'s token cache when it has one, else by a look-up. */
export function authenticateCached(db: Kysely<Database>, presented: string): Promise<AuthenticatedToken | AuthenticationFailure> {
  const cache = caches.get(db);
  if (cache) return cache.authenticate(presented);
  return lookupToken(db, presented).then((r) => (typeof r === 'string' ? r : r.token));
}
