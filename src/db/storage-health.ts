/**
 * Whether the store can take writes. A full disk shows as SQLSTATE 53100
 * (disk_full) from PostgreSQL or PGlite, or as ENOSPC / "No space left on device" from the file
 * system. Such a request is answered 507 `insufficient_storage` naming the cause (api/plugins/
 * error-handler.ts) and /readyz answers 503 "the store cannot write" while the last such error is
 * recent (OUT_OF_SPACE_HOLD_MS): a load balancer stops sending traffic, and the state clears by
 * itself, so writes resume once space is freed without a restart.
 *
 * The embedded engine is the exception: once PGlite fails to write its write-ahead log (pg_wal) it
 * is wedged — the next statement it runs spins a core for ever and the process no longer answers
 * even SIGTERM. So on such a failure the instance is never touched again: every later statement
 * fails at once (503), /readyz says why, and the process exits non-zero with a clear message
 * (cli/server.command.ts) so its supervisor restarts it once space is freed; nothing acknowledged is
 * lost (PGlite replays its WAL at start). See docs/operations.md "A full disk".
 */

/** SQLSTATE of disk_full. */
export const DISK_FULL_SQLSTATE = '53100';

/** How long after the last out-of-space error /readyz keeps reporting that the store cannot write. */
export const OUT_OF_SPACE_HOLD_MS = 30_000;

/** Process exit code when the embedded database could not write and cannot recover in this process. */
export const EXIT_STORE_CANNOT_WRITE = 75; // EX_TEMPFAIL: try again later (after freeing space)

/** True when `error` (or its cause) says the disk under the database is full. */
export function isOutOfSpace(error: unknown, depth = 0): boolean {
  if (!error || typeof error !== 'object' || depth > 3) return false;
  const e = error as { code?: unknown; message?: unknown; cause?: unknown };
  if (e.code === DISK_FULL_SQLSTATE || e.code === 'ENOSPC') return true;
  if (typeof e.message === 'string' && /No space left on device/i.test(e.message)) return true;
  return isOutOfSpace(e.cause, depth + 1);
}

/** True when `error` is an out-of-space failure writing PGlite's write-ahead log (unrecoverable in process). */
export function isWalWriteFailure(error: unknown): boolean {
  const message = (error as { message?: unknown } | undefined)?.message;
  return isOutOfSpace(error) && typeof message === 'string' && /pg_wal|xlog/i.test(message);
}

/** Raised instead of running a statement once the embedded database has failed for good. */
export class StoreFailedError extends Error {
  readonly code = 'STORE_FAILED';
}

export class StorageHealth {
  #lastOutOfSpaceAt: number | undefined;
  #lastOutOfSpaceMessage = '';
  #fatal: string | undefined;
  readonly #fatalListeners: ((reason: string) => void)[] = [];

  /**
   * `probe`, when given, says live whether the disk can take writes (the embedded database's free
   * space); it then decides alone, so the state clears as soon as space is freed.
   */
  constructor(
    private readonly now: () => number = Date.now,
    private readonly holdMs = OUT_OF_SPACE_HOLD_MS,
    private readonly probe?: () => string | undefined,
  ) {}

  /** Records an out-of-space error (any back end). */
  noteOutOfSpace(error: unknown): void {
    this.#lastOutOfSpaceAt = this.now();
    this.#lastOutOfSpaceMessage = String((error as { message?: unknown })?.message ?? error);
  }

  /** The embedded database cannot go on in this process; tells the listeners once. */
  markFatal(reason: string): void {
    if (this.#fatal !== undefined) return;
    this.#fatal = reason;
    for (const listener of this.#fatalListeners) listener(reason);
  }

  /** Set once the database has failed for good in this process (the reason). */
  get fatal(): string | undefined {
    return this.#fatal;
  }

  onFatal(listener: (reason: string) => void): void {
    this.#fatalListeners.push(listener);
    if (this.#fatal !== undefined) listener(this.#fatal);
  }

  /** Why the store cannot take writes now, or undefined when it can (as far as we know). */
  cannotWrite(): string | undefined {
    if (this.#fatal !== undefined) return this.#fatal;
    if (this.probe) return this.probe();
    if (this.#lastOutOfSpaceAt !== undefined && this.now() - this.#lastOutOfSpaceAt < this.holdMs) {
      return `The store cannot write: no space left on the database's disk (${this.#lastOutOfSpaceMessage}).`;
    }
    return undefined;
  }
}
