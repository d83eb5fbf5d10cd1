/**
 * The embedded database's own thread (decision 0030). PGlite runs PostgreSQL as WebAssembly on the
 * thread that loads it, so it is loaded here, in a worker thread, and the HTTP thread talks to it by
 * messages (db/pglite-thread.ts): a statement, however long, holds this thread only. Rows are parsed
 * here with the shared type parsers and cross to the HTTP thread as structured clones.
 *
 * Loaded as TypeScript by Node's type stripping (sources) or as the compiled .js (dist/), so it
 * imports nothing but PGlite, the type parsers and the buffer collector, and uses erasable syntax only.
 */
import { parentPort, resourceLimits, workerData } from 'node:worker_threads';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { typeParsers } from './type-parsers.ts';
import { bufferCollector } from './buffer-collector.ts';
import { PreparedStatements } from './prepared-raw.ts';

export interface WorkerStart {
  /** PGlite's data directory; none (with `archive` or alone) for an in-memory database. */
  dataDir?: string;
  /** A dumped data directory (PGlite's dumpDataDir) to start an in-memory database from. */
  archive?: Uint8Array;
  /** Start parameters added to PGlite's own (db/database.ts `pgliteStartParams`). */
  startParams: string[];
  /**
   * MiB of ArrayBuffers this thread may hold above what it held after its last collection before a
   * young-generation collection is asked for (PGLITE_WORKER_BUFFER_SLACK_MB; 0 = V8 decides).
   */
  bufferSlackMb?: number;
  /**
   * Where a `rows` run writes its answer (made by the HTTP thread, shared with it): the first free one.
   * An answer larger than an area, or one that comes while the HTTP thread has not yet read the
   * answers in all of them, is sent as a buffer of its own.
   */
  copyAreas?: SharedArrayBuffer[];
  /**
   * `[k]` is 1 from the moment a run takes area k until the HTTP thread has read the answer in it
   * (pglite-thread.ts `rowsRaw`'s release): the worker takes an area with a compare-and-swap.
   */
  copyAreasTaken?: Int32Array;
}

export type WorkerRequest =
  | { id: number; op: 'query'; sql: string; params: unknown[]; tx?: number }
  | { id: number; op: 'rows'; sql: string; params: (string | null)[] }
  | { id: number; op: 'begin' }
  | { id: number; op: 'end'; tx: number; commit: boolean }
  | { id: number; op: 'close' }
  | { id: number; op: 'stats' };

/** What the thread runs with (its young generation as V8 sized it, the buffer slack) and how often it collected early. */
export interface ThreadStats {
  youngGenerationMb: number;
  bufferSlackMb: number;
  bufferCollections: number;
}

/**
 * A statement's or a transaction step's answer. A `rows` run's is PostgreSQL's protocol messages as
 * they were sent (db/copy-out.ts `rowsOfMessages` reads them), in a copy area or in `raw`.
 */
export type WorkerResult = {
  id: number;
  ok: true;
  rows?: unknown[];
  affectedRows?: number;
  tx?: number;
  stats?: ThreadStats;
  /** A `rows` run's answer too large for a copy area, moved to the HTTP thread. */
  raw?: Uint8Array;
  /** A `rows` run's answer: its length in bytes at the start of copy area `area`. */
  rawLength?: number;
  area?: number;
};

export type WorkerReply =
  | WorkerResult
  | { id: number; ok: false; error: SerializedError }
  | { id: 0; ok: true; ready: true }
  | { id: 0; ok: false; error: SerializedError };

/** An error's message and its primitive fields (PostgreSQL's code, constraint, detail…), clonable. */
export type SerializedError = Record<string, string | number | boolean | undefined> & { message: string };

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { message: String(error) };
  const out: SerializedError = { message: error.message, name: error.name };
  for (const [key, value] of Object.entries(error)) {
    if (value === undefined || ['string', 'number', 'boolean'].includes(typeof value)) out[key] = value as string | number | boolean | undefined;
  }
  return out;
}

const ROLLBACK = Symbol('rollback');

/** `parts` (`length` bytes in all) in one buffer. */
function join(parts: readonly Uint8Array<ArrayBuffer>[], length: number): Uint8Array<ArrayBuffer> {
  if (parts.length === 1 && parts[0]!.length === length) return parts[0]!;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

async function run(port: NonNullable<typeof parentPort>, start: WorkerStart): Promise<void> {
  let pglite: PGlite;
  try {
    pglite = await PGlite.create({
      ...(start.dataDir ? { dataDir: start.dataDir } : {}),
      ...(start.archive ? { loadDataDir: new Blob([start.archive as Uint8Array<ArrayBuffer>]) } : {}),
      parsers: typeParsers,
      startParams: [...PGlite.defaultStartParams, ...start.startParams],
    });
    await pglite.exec(`SET TimeZone = 'UTC'`);
  } catch (error) {
    port.postMessage({ id: 0, ok: false, error: serializeError(error) } satisfies WorkerReply);
    return;
  }
  const collect = bufferCollector(start.bufferSlackMb ?? 0);
  const taken = start.copyAreasTaken;
  const areas = taken ? (start.copyAreas ?? []).map((shared) => new Uint8Array(shared)) : [];
  const transactions = new Map<number, { tx: Transaction; finish: (commit: boolean) => void; done: Promise<unknown> }>();
  let nextTx = 1;
  const reply = (message: WorkerReply) => port.postMessage(message);

  const prepared = new PreparedStatements();

  /**
   * Runs `exec` (a prepared statement's run) and answers request `id` with the protocol's
   * bytes it produced: no row parsed, no text decoded, no buffer made in this thread (the embedded
   * database's bottleneck) and none passed in the message (decision 0046), the bytes copied straight
   * out of PGlite's WebAssembly memory into a copy area shared with the HTTP thread. The HTTP thread
   * posted it in a turn of the connection, so it runs in its place among the statements sent:
   * inside a transaction (a request's) it is that transaction's, else it waits as pglite.query would
   * for one to end. The HTTP thread may still be reading the previous answer out of the copy area
   * (it ends its turn once a run is posted): an area is taken only when free, else the answer is
   * collected in a buffer of its own.
   */
  const answerRaw = async (
    id: number,
    exec: (onRawData: (bytes: Uint8Array) => void, answer: () => { bytes: Uint8Array; length: number }) => Promise<void>,
  ): Promise<void> => {
    let length = 0;
    let overflow: Uint8Array<ArrayBuffer>[] | undefined;
    let target: Uint8Array | undefined;
    let slot = -1;
    const onRawData = (bytes: Uint8Array) => {
      if (!overflow && target && length + bytes.length <= target.length) target.set(bytes, length);
      else {
        overflow ??= target ? [target.slice(0, length)] : [];
        overflow.push(bytes.slice());
      }
      length += bytes.length;
    };
    /** The answer so far, in one piece (an overflow joined). */
    const answer = () => {
      if (!overflow && target) return { bytes: target, length };
      const joined = join(overflow ?? [], length);
      overflow = [joined];
      return { bytes: joined, length };
    };
    const runIt = () =>
      pglite._runExclusiveQuery(() => {
        // Taken when the statement starts, not when it was sent: by then earlier answers have
        // usually been read.
        slot = areas.findIndex((_, k) => Atomics.compareExchange(taken!, k, 0, 1) === 0);
        target = slot >= 0 ? areas[slot] : undefined;
        return exec(onRawData, answer);
      });
    try {
      await (transactions.size > 0 ? runIt() : pglite._runExclusiveTransaction(runIt));
    } catch (error) {
      if (slot >= 0) Atomics.store(taken!, slot, 0);
      throw error;
    }
    if (!overflow && target) {
      reply({ id, ok: true, rawLength: length, area: slot });
      return;
    }
    // An area taken and then outgrown is free again: the answer goes in `raw`.
    if (slot >= 0) Atomics.store(taken!, slot, 0);
    const raw = join(overflow ?? [], length);
    port.postMessage({ id, ok: true, raw } satisfies WorkerReply, [raw.buffer]);
  };

  const handle = async (request: WorkerRequest): Promise<void> => {
    switch (request.op) {
      case 'query': {
        const target = request.tx === undefined ? pglite : transactions.get(request.tx)?.tx;
        if (!target) throw new Error(`no open transaction ${request.tx}`);
        const result = await target.query(request.sql, request.params, { rowMode: 'object' });
        reply({ id: request.id, ok: true, rows: result.rows, ...(result.affectedRows == null ? {} : { affectedRows: result.affectedRows }) });
        return;
      }
      case 'rows': {
        // A statement kept prepared, run with its parameters (db/prepared-raw.ts, decision 0050).
        await answerRaw(request.id, (onRawData, answer) =>
          prepared.run(request.sql, request.params, (message) => pglite.execProtocolRawStream(message, { syncToFs: false, onRawData }).then(() => {}), answer),
        );
        return;
      }
      case 'begin': {
        const tx = nextTx++;
        await new Promise<void>((begun, failed) => {
          const done = pglite.transaction(
            (handleTx) =>
              new Promise<void>((commit, rollback) => {
                transactions.set(tx, { tx: handleTx, finish: (ok) => (ok ? commit() : rollback(ROLLBACK)), done });
                begun();
              }),
          );
          done.catch(failed);
        });
        reply({ id: request.id, ok: true, tx });
        return;
      }
      case 'end': {
        const open = transactions.get(request.tx);
        if (!open) throw new Error(`no open transaction ${request.tx}`);
        open.finish(request.commit);
        try {
          await open.done;
        } catch (error) {
          if (error !== ROLLBACK) throw error;
        } finally {
          transactions.delete(request.tx);
        }
        reply({ id: request.id, ok: true });
        return;
      }
      case 'stats': {
        const stats: ThreadStats = {
          youngGenerationMb: resourceLimits.maxYoungGenerationSizeMb ?? 0,
          bufferSlackMb: start.bufferSlackMb ?? 0,
          bufferCollections: collect?.collections() ?? 0,
        };
        reply({ id: request.id, ok: true, stats });
        return;
      }
      case 'close': {
        await pglite.close();
        reply({ id: request.id, ok: true });
        port.close();
        return;
      }
    }
  };

  port.on('message', (request: WorkerRequest) => {
    handle(request)
      .catch((error: unknown) => reply({ id: request.id, ok: false, error: serializeError(error) }))
      .finally(collect?.check);
  });
  reply({ id: 0, ok: true, ready: true });
}

if (parentPort) await run(parentPort, workerData as WorkerStart);
