/**
 * One snapshot per token at a time (GET /api/v1/{resource}/snapshot, decision 0012 and 0017).
 *
 * Per process always; across every API process of a deployment when Redis is configured
 * (REDIS_URL, the rate limit's connection): a lease `${REDIS_KEY_PREFIX}snapshot:<token id>` taken
 * with SET NX PX, renewed while the stream runs and deleted (only by its owner) when the response
 * closes. A process that dies mid-stream leaves its lease to expire after LEASE_MS. While Redis is
 * out (the rate limit's breaker is open, or the SET fails) the limit is per process, as the rate
 * limit then serves uncounted: a limiter outage must not take snapshots down.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

/** The rate limit's Redis connection and whether it is usable now (its breaker closed). */
export interface SharedStore {
  readonly redis: Redis;
  readonly prefix: string;
  usable(): boolean;
}

// Renew or delete the lease only while it is still ours (it may have expired and been taken).
const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export class SnapshotSlots {
  /** Retry-After of the 429 for a second concurrent snapshot. */
  static readonly RETRY_AFTER_SECONDS = 1;
  /** How long a lease outlives its last renewal (a crashed process's snapshot frees the token after this). */
  static readonly LEASE_MS = 30_000;
  readonly #busy = new Set<string>();
  readonly #shared: SharedStore | undefined;

  constructor(shared?: SharedStore) {
    this.#shared = shared;
  }

  /** A release function, or undefined when `tokenId` already streams one (in this process or, with Redis, in any). */
  async acquire(tokenId: string): Promise<(() => void) | undefined> {
    if (this.#busy.has(tokenId)) return undefined;
    this.#busy.add(tokenId);
    const releaseLocal = () => this.#busy.delete(tokenId);
    let releaseShared = () => {};
    const shared = this.#shared;
    if (shared?.usable()) {
      const key = `${shared.prefix}snapshot:${tokenId}`;
      const owner = randomUUID();
      let taken: boolean | undefined;
      try {
        taken = (await shared.redis.set(key, owner, 'PX', SnapshotSlots.LEASE_MS, 'NX')) === 'OK';
      } catch {
        // Redis out: per process only (the local slot is held).
      }
      if (taken === false) {
        releaseLocal();
        return undefined;
      }
      if (taken) {
        const renew = setInterval(() => {
          shared.redis.eval(RENEW, 1, key, owner, SnapshotSlots.LEASE_MS).catch(() => {});
        }, SnapshotSlots.LEASE_MS / 3);
        renew.unref();
        releaseShared = () => {
          clearInterval(renew);
          shared.redis.eval(RELEASE, 1, key, owner).catch(() => {});
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
