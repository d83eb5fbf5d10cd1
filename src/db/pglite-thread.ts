/**
 * The HTTP thread's side of the embedded database (decision 0030): PGlite runs in a worker thread
 * (db/pglite-worker.ts) and this object stands in for it where Kysely's PGlite dialect expects a
 * PGlite instance (query, transaction, close). Kysely still serialises the one connection, so a
 * transaction's statements stay together and isolated exactly as before; what changes is that while
 * a statement runs, this thread is free: /healthz, parsing, authentication from cache, webhook
 * signing and timers go on.
 *
 * A worker that dies (a crash of PostgreSQL's WebAssembly, an out-of-memory) fails every statement
 * in flight and every later one with 57P01 (answered 503, shared/db-errors.ts), and `onExit` tells
 * the store so /readyz reports it; the process must be restarted.
 */
import { Worker } from 'node:worker_threads';
import type { ThreadStats, WorkerReply, WorkerRequest, WorkerResult, WorkerStart, SerializedError } from './pglite-worker.ts';

type Pending = { resolve: (reply: WorkerResult) => void; reject: (error: Error) => void; since: number };
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A copy's or prepared run's answer: the protocol's bytes, in a copy area (`owned` false) until `release`. */
export interface RawAnswer {
  bytes: Uint8Array;
  owned: boolean;
  release: () => void;
}

export interface PGliteThreadOptions extends WorkerStart {
  /** Called once if the worker stops without being closed. */
  onExit?: (reason: string) => void;
  /**
   * V8's young generation of the database thread, in MiB (PGLITE_WORKER_YOUNG_GENERATION_MB): rows
   * pass through it once, so it can stay small (decision 0030).
   */
  youngGenerationMb?: number;
}

/**
 * The copy areas' size: a list page of 500 large records, an export page or a snapshot chunk fits;
 * only the pages of an area that an answer has touched are resident.
 */
const COPY_AREA_BYTES = 4 * 1048576;
/**
 * How many copy areas: a copy's answer waits in its area until the HTTP thread reads it while the
 * worker already runs the next copies sent (one per request asking at once, up to this many before
 * answers come in buffers of their own).
 */
const COPY_AREAS = 4;

/** The worker's module: TypeScript sources under tsx or vitest, the compiled .js in dist/. */
const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './pglite-worker.ts' : './pglite-worker.js', import.meta.url);

export function rebuildError(serialized: SerializedError): Error {
  const { message, name, stack: _stack, ...fields } = serialized;
  const error = Object.assign(new Error(message), fields);
  if (typeof name === 'string' && name !== 'Error') Object.defineProperty(error, 'name', { value: name, enumerable: false });
  return error;
}

export class PGliteThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  /** Shared with the worker: where copies' answers are written (WorkerStart.copyAreas). */
  readonly #copyAreas = Array.from({ length: COPY_AREAS }, () => new SharedArrayBuffer(COPY_AREA_BYTES));
  /** Shared with the worker: `[k]` is 1 while an answer in area k is unread (WorkerStart.copyAreasTaken). */
  readonly #copyAreasTaken = new Int32Array(new SharedArrayBuffer(4 * COPY_AREAS));
  #next = 1;
  #exited: string | undefined;
  /** When the worker last answered, or was handed work while it had none (ms since the epoch). */
  #lastProgressAt = Date.now();
  closed = false;
  ready = false;
  readonly waitReady: Promise<void>;

  private constructor(options: PGliteThreadOptions) {
    const { onExit, youngGenerationMb, ...start } = options;
    this.#worker = new Worker(WORKER_URL, {
      workerData: { ...start, copyAreas: this.#copyAreas, copyAreasTaken: this.#copyAreasTaken } satisfies WorkerStart,
      // Node strips the types of the .ts module itself (22.18+, 24); older 22.x need the flag.
      execArgv: WORKER_URL.pathname.endsWith('.ts') && !process.features.typescript ? ['--experimental-strip-types'] : [],
      ...(youngGenerationMb ? { resourceLimits: { maxYoungGenerationSizeMb: youngGenerationMb } } : {}),
      // The worker's console lines reach ours; nothing reads its stdin.
      stdout: false,
      stderr: false,
    });
    this.waitReady = new Promise<void>((resolve, reject) => {
      const onMessage = (reply: WorkerReply) => {
        if (reply.id !== 0) return this.#settle(reply);
        if (reply.ok) {
          this.ready = true;
          resolve();
        } else reject(rebuildError(reply.error));
      };
      this.#worker.on('message', onMessage);
      this.#worker.on('error', (error) => {
        this.#fail(`the embedded database's thread failed: ${error.message}`);
        reject(error);
      });
      this.#worker.on('exit', (code) => {
        const reason = `the embedded database's thread exited (code ${code})`;
        const unexpected = !this.closed;
        this.#fail(reason);
        reject(new Error(reason));
        if (unexpected) onExit?.(reason);
      });
    });
    // Held only while a statement is in flight, so a CLI command that has closed everything exits.
    this.#worker.unref();
  }

  /** Starts the worker and waits until PGlite has opened (initdb or recovery included). */
  static async open(options: PGliteThreadOptions): Promise<PGliteThread> {
    const thread = new PGliteThread(options);
    // Keep the process alive while the database opens.
    thread.#worker.ref();
    try {
      await thread.waitReady;
    } catch (error) {
      await thread.#worker.terminate();
      throw error;
    } finally {
      if (!thread.#exited) thread.#worker.unref();
    }
    return thread;
  }

  #fail(reason: string): void {
    this.#exited ??= reason;
    for (const pending of this.#pending.values()) pending.reject(Object.assign(new Error(reason), { code: '57P01' }));
    this.#pending.clear();
  }

  #settle(reply: WorkerReply): void {
    this.#lastProgressAt = Date.now();
    const pending = this.#pending.get(reply.id);
    if (!pending) return;
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#worker.unref();
    if (reply.ok) pending.resolve(reply as WorkerResult);
    else pending.reject(rebuildError(reply.error));
  }

  #send(request: DistributiveOmit<WorkerRequest, 'id'>): Promise<WorkerResult> {
    if (this.#exited) return Promise.reject(Object.assign(new Error(this.#exited), { code: '57P01' }));
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      if (this.#pending.size === 0) {
        this.#worker.ref();
        this.#lastProgressAt = Date.now();
      }
      this.#pending.set(id, { resolve, reject, since: Date.now() });
      this.#worker.postMessage({ ...request, id });
    });
  }

  /** When the oldest request still unanswered by the worker was sent (ms epoch; the disk watchdog). */
  inFlightSince(): number | undefined {
    // A Map keeps insertion order: the first entry is the oldest.
    for (const pending of this.#pending.values()) return pending.since;
    return undefined;
  }

  /** The thread's young generation and buffer slack as it runs with them, and its early collections so far. */
  async stats(): Promise<ThreadStats> {
    return (await this.#send({ op: 'stats' })).stats!;
  }

  /**
   * Whether the worker runs, and how long (ms) since it last answered anything or was handed work
   * while it had none: a busy thread answers every statement of an import's steps, a wedged or
   * stopped one nothing (/readyz, ops/ops.routes.ts).
   */
  activity(): { alive: boolean; quietMs: number } {
    return { alive: this.#exited === undefined && !this.closed, quietMs: Date.now() - this.#lastProgressAt };
  }

  /** Statements waiting for or running in the worker (metrics). */
  get inFlight(): number {
    return this.#pending.size;
  }

  async query<T>(sql: string, params: unknown[] = [], _options?: unknown): Promise<{ rows: T[]; affectedRows?: number; fields: [] }> {
    return this.#run<T>(sql, params, undefined);
  }

  /**
   * A statement kept prepared in the worker's session and run with `params` (their text, null for
   * NULL; db/prepared-raw.ts), answered as the protocol's bytes (copy-out.ts `rowsOfMessages` reads
   * them). It is posted at once: the caller must hold the connection's turn while it calls this, as
   * for any statement (database.ts does), and may end the turn before the answer comes, since the
   * worker runs what it is sent in order. The answer may lie in a copy area (`owned` false): the
   * caller reads it, then calls `release`, which lets a later answer be written there.
   */
  rowsRaw(sql: string, params: (string | null)[]): Promise<RawAnswer> {
    return this.#send({ op: 'rows', sql, params }).then((reply) => this.#rawAnswer(reply));
  }

  #rawAnswer(reply: WorkerResult): RawAnswer {
    if (reply.raw) return { bytes: reply.raw, owned: true, release: () => {} };
    const area = reply.area!;
    let released = false;
    return {
      bytes: new Uint8Array(this.#copyAreas[area]!, 0, reply.rawLength!),
      owned: false,
      release: () => {
        if (released) return;
        released = true;
        Atomics.store(this.#copyAreasTaken, area, 0);
      },
    };
  }

  async #run<T>(sql: string, params: readonly unknown[], tx: number | undefined) {
    const reply = await this.#send({ op: 'query', sql, params: [...params], ...(tx === undefined ? {} : { tx }) });
    return { rows: (reply.rows ?? []) as T[], ...(reply.affectedRows === undefined ? {} : { affectedRows: reply.affectedRows }), fields: [] as [] };
  }

  /**
   * PGlite's exclusive transaction, held in the worker until the callback settles: committed when
   * it resolves, rolled back when it throws. Statements outside it wait in the worker.
   */
  async transaction<T>(callback: (tx: { query: PGliteThread['query']; rollback(): Promise<void> }) => Promise<T>): Promise<T> {
    const begun = await this.#send({ op: 'begin' });
    const tx = begun.tx as number;
    let result: T;
    try {
      result = await callback({
        query: (sql, params = []) => this.#run(sql, params, tx),
        rollback: async () => {
          throw new Error('roll back by throwing from the transaction');
        },
      });
    } catch (error) {
      await this.#send({ op: 'end', tx, commit: false }).catch(() => {});
      throw error;
    }
    await this.#send({ op: 'end', tx, commit: true });
    return result;
  }

  /** Stops the worker without a clean shutdown (a wedged PGlite; PostgreSQL replays its log at the next open). */
  async terminate(): Promise<void> {
    this.closed = true;
    await this.#worker.terminate();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.#exited) {
      try {
        await this.#send({ op: 'close' });
      } finally {
        await this.#worker.terminate();
      }
    }
  }
}
