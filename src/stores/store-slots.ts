/**
 * Long work bounded per key (a store, a token): at most `limit` of one kind at once, one more
 * answered 429 with Retry-After at once instead of queueing. Per store (decision 0051, "Limits per
 * store"): snapshots and stock imports, so one store's integrations cannot take every connection and
 * the thread (on the embedded database) from the others; per token: one snapshot at a time
 * (api/snapshot-slots.ts, decisions 0012 and 0017).
 *
 * Per process always; across every API process of a deployment when Redis is configured (the rate
 * limit's connection): a sorted set `${REDIS_KEY_PREFIX}<kind>:<key>` of leases scored by when they
 * expire, taken with one script (drop the expired, count, add), renewed while the work runs and
 * removed when it ends. A process that dies mid-work leaves its lease to expire after LEASE_MS.
 * While Redis is out (the rate limit's breaker is open, or the script fails) the bound is per
 * process: a limiter outage must not take the work down.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

/** The rate limit's Redis connection and whether it is usable now (its breaker closed). */
export interface SharedStore {
  readonly redis: Redis;
  readonly prefix: string;
  usable(): boolean;
}

// KEYS[1] the store's set; ARGV: now (ms), lease expiry (ms), member, limit, the set's own TTL (ms).
const TAKE = `
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('zadd', KEYS[1], ARGV[2], ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[5])
return 1`;
// Renew only a lease still held (an expired one may have been dropped by another's take).
const RENEW = `if redis.call('zscore', KEYS[1], ARGV[2]) then redis.call('zadd', KEYS[1], ARGV[1], ARGV[2]); redis.call('pexpire', KEYS[1], ARGV[3]) return 1 end return 0`;

export class StoreSlots {
  static readonly RETRY_AFTER_SECONDS = 1;
  static readonly LEASE_MS = 30_000;
  readonly #running = new Map<string, number>();

  /**
   * @param kind what is bounded (`snapshots`, `imports`, `snapshot-token`): the Redis key's middle part
   * @param limit most at once per key; 0 = no bound
   */
  constructor(
    readonly kind: string,
    readonly limit: number,
    readonly shared?: SharedStore,
  ) {}

  /** A release function, or undefined when `storeId` (a store, a token) already runs `limit` of them (here or, with Redis, in any process). */
  async acquire(storeId: string): Promise<(() => void) | undefined> {
    if (this.limit <= 0) return () => {};
    const here = this.#running.get(storeId) ?? 0;
    if (here >= this.limit) return undefined;
    this.#running.set(storeId, here + 1);
    const releaseLocal = () => {
      const left = (this.#running.get(storeId) ?? 1) - 1;
      if (left <= 0) this.#running.delete(storeId);
      else this.#running.set(storeId, left);
    };
    let releaseShared = () => {};
    const shared = this.shared;
    if (shared?.usable()) {
      const key = `${shared.prefix}${this.kind}:${storeId}`;
      const member = randomUUID();
      let taken: boolean | undefined;
      try {
        const now = Date.now();
        taken = (await shared.redis.eval(TAKE, 1, key, now, now + StoreSlots.LEASE_MS, member, this.limit, StoreSlots.LEASE_MS * 2)) === 1;
      } catch {
        // Redis out: per process only (the local slot is held).
      }
      if (taken === false) {
        releaseLocal();
        return undefined;
      }
      if (taken) {
        const renew = setInterval(() => {
          shared.redis.eval(RENEW, 1, key, Date.now() + StoreSlots.LEASE_MS, member, StoreSlots.LEASE_MS * 2).catch(() => {});
        }, StoreSlots.LEASE_MS / 3);
        renew.unref();
        releaseShared = () => {
          clearInterval(renew);
          shared.redis.zrem(key, member).catch(() => {});
        };
      }
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      releaseLocal();
      releaseShared();
    };
  }
}
