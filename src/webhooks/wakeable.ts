/**
 * A sleep that can be cut short: a worker loop waits on it for its interval (or until the next
 * delivery falls due) and anything that gives it work wakes it. A wake while nobody waits is kept,
 * so the next wait returns at once: no wake-up is lost between two waits.
 */
export class Wakeable {
  #pending = false;
  #resolve: (() => void) | undefined;

  wake(): void {
    if (this.#resolve) {
      const resolve = this.#resolve;
      this.#resolve = undefined;
      resolve();
    } else {
      this.#pending = true;
    }
  }

  /** Resolves true when woken, false when `ms` passed. */
  wait(ms: number): Promise<boolean> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => {
          this.#resolve = undefined;
          resolve(false);
        },
        Math.max(1, ms),
      );
      this.#resolve = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }
}

/**
 * Wait after the `failures`-th consecutive failed loop step (database away): the poll interval at
 * first, doubling up to 30 s, so a long outage is not hammered and a short one costs one interval.
 */
export function loopBackoffMs(failures: number, intervalMs: number): number {
  return Math.min(Math.max(intervalMs, 30_000), intervalMs * 2 ** Math.min(Math.max(0, failures - 1), 10));
}
