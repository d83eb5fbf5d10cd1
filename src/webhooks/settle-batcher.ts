/**
 * Settle batching: finished attempts are settled together with the others finishing meanwhile.
 * Attempts queue while a batch statement runs and go in the next one (settleDeliveries), so a busy
 * worker commits once per batch, not once per delivery. While the worker has requests in flight a
 * batch also waits up to SETTLE_GATHER_MS for SETTLE_GATHER attempts (fewer, larger commits; no slot
 * waits on it: the delivery stays leased until its batch commits, so at-least-once holds); an idle
 * worker settles at once. A failed batch is settled again one by one, so one bad attempt cannot fail
 * the others.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { settleDeliveries, settleDelivery, type Finished, type SettleResult } from './delivery-queue.ts';
import { Wakeable } from './wakeable.ts';

/** While requests are in flight, a settle batch waits up to SETTLE_GATHER_MS for this many attempts. */
const SETTLE_GATHER = 128;
const SETTLE_GATHER_MS = 20;

export interface SettleBatcherOptions {
  readonly db: Kysely<Database>;
  /** Most attempts settled in one statement. */
  readonly batchMax: number;
  /** True while a batch may wait for more attempts (requests in flight, the worker not stopping). */
  readonly mayGather: () => boolean;
}

export class SettleBatcher {
  readonly #options: SettleBatcherOptions;
  readonly #queue: Array<{ finished: Finished; resolve: (r: SettleResult) => void; reject: (e: unknown) => void }> = [];
  readonly #gathered = new Wakeable();
  #flushing = false;

  constructor(options: SettleBatcherOptions) {
    this.#options = options;
  }

  /** Settles one finished attempt in the next batch. */
  settle(finished: Finished): Promise<SettleResult> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ finished, resolve, reject });
      if (this.#queue.length >= this.#gatherSize()) this.#gathered.wake();
      if (!this.#flushing) void this.#flush();
    });
  }

  #gatherSize(): number {
    return Math.min(SETTLE_GATHER, this.#options.batchMax);
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    const { db, batchMax, mayGather } = this.#options;
    // The flag drops in the same synchronous step that finds the queue empty (no await between), so
    // an attempt queued at any moment is either taken by this loop or starts the next one.
    for (;;) {
      if (this.#queue.length === 0) {
        this.#flushing = false;
        return;
      }
      if (this.#queue.length < this.#gatherSize() && mayGather()) await this.#gathered.wait(SETTLE_GATHER_MS);
      const batch = this.#queue.splice(0, batchMax);
      try {
        const results = await settleDeliveries(
          db,
          batch.map((b) => b.finished),
        );
        batch.forEach((b, i) => b.resolve(results[i]!));
      } catch {
        await Promise.all(
          batch.map(async (b) => {
            try {
              b.resolve(await settleDelivery(db, b.finished.delivery, b.finished.result, b.finished.options));
            } catch (error) {
              b.reject(error);
            }
          }),
        );
      }
    }
  }
}
