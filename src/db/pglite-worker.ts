/**
 * The embedded database's own thread (decision 0030). PGlite runs PostgreSQL as WebAssembly on the
 * thread that loads it, so it is loaded here, in a worker thread, and the HTTP thread talks to it by
 * messages (db/pglite-thread.ts): a statement, however long, holds this thread only. Rows are parsed
 * here with the shared type parsers and cross to the HTTP thread as structured clones.
 *
 * Loaded as TypeScript by Node's type stripping (sources) or as the compiled .js (dist/), so it
 * imports nothing but PGlite and the type parsers, and uses erasable syntax only.
 */
import { parentPort, resourceLimits, workerData } from 'node:worker_threads';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { typeParsers } from './type-parsers.ts';

export interface WorkerStart {
  /** PGlite's data directory; none (with `archive` or alone) for an in-memory database. */
  dataDir?: string;
  /** A dumped data directory (PGlite's dumpDataDir) to start an in-memory database from. */
  archive?: Uint8Array;
  startParams: string[];
  /**
   * MiB of ArrayBuffers this thread may hold above what it held after its last collection before a
   * young-generation collection is asked for (PGLITE_WORKER_BUFFER_SLACK_MB; 0 = V8 decides).
   */
  bufferSlackMb?: number;
  /**
   * Where a `copy` writes its answer (made by the HTTP thread, shared with it): one copy runs at a
   * time (its caller holds the connection's turn), so one region serves every copy. An answer larger
   * than it is sent as a buffer of its own.
   */
  copyArea?: SharedArrayBuffer;
}

export type WorkerRequest =
  | { id: number; op: 'query'; sql: string; params: unknown[]; tx?: number }
  | { id: number; op: 'copy'; select: string }
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
 * A statement's or a transaction step's answer. A `copy`'s is PostgreSQL's protocol messages as
 * they were sent (db/copy-out.ts `copyDataOf` reads them), in the copy area or in `raw`.
 */
export type WorkerResult = {
  id: number;
  ok: true;
  rows?: unknown[];
  affectedRows?: number;
  tx?: number;
  stats?: ThreadStats;
  /** A `copy`'s answer too large for the copy area, moved to the HTTP thread. */
  raw?: Uint8Array;
  /** A `copy`'s answer: its length in bytes at the start of the copy area. */
  rawLength?: number;
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

const utf8 = new TextEncoder();

/** A simple-query protocol message ('Q', its length, the text, a NUL) holding `text`. */
function simpleQueryMessage(text: string): Uint8Array {
  const body = utf8.encode(text);
  const message = new Uint8Array(body.length + 6);
  message[0] = 0x51;
  new DataView(message.buffer).setInt32(1, body.length + 5);
  message.set(body, 5);
  return message;
}

/**
 * A check run after each statement that frees the statement's dead buffers early (decision 0043).
 * PGlite copies a statement's output several times into fresh ArrayBuffers (the chunk out of its
 * WebAssembly memory, its receive buffer, the message parser's) that die at once, but their bytes
 * live outside V8's heap: the few small objects that hold them fill the young generation slowly,
 * so V8 collects them only once tens of MiB of them have piled up (under the list load, 30–40 MiB
 * of dead buffers and a malloc arena as large that keeps their pages). A young-generation
 * collection (a fraction of a millisecond: the live set is small) frees them; it runs when this
 * thread's ArrayBuffers have grown by `slackMb` since the last one. Undefined with 0.
 */
function bufferCollector(slackMb: number): { check: () => void; collections: () => number } | undefined {
  if (slackMb <= 0) return undefined;
  // The only way to call V8's collector from JavaScript: the flag exposes gc() to contexts made after it.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (options: { type: 'minor' }) => void;
  const slack = slackMb * 1048576;
  // V8's external memory (ArrayBuffers' bytes, WebAssembly memory aside) read from the isolate:
  // process.memoryUsage() also reads the process's RSS from /proc, 4 % of this thread's time when
  // it was called after every statement.
  const external = () => getHeapStatistics().external_memory;
  let floor = external();
  let collections = 0;
  return {
    check: () => {
      const now = external();
      // A collection V8 made on its own lowers the floor: the slack counts from what is left after it.
      if (now < floor) floor = now;
      if (now - floor < slack) return;
      gc({ type: 'minor' });
      collections++;
      floor = external();
    },
    collections: () => collections,
  };
}

async function run(port: NonNullable<typeof parentPort>, start: WorkerStart): Promise<void> {
  let pglite: PGlite;
  try {
    pglite = await PGlite.create({
      ...(start.dataDir ? { dataDir: start.dataDir } : {}),
      ...(start.archive ? { loadDataDir: new Blob([start.archive as Uint8Array<ArrayBuffer>]) } : {}),
      parsers: typeParsers,
      startParams: start.startParams,
    });
    await pglite.exec(`SET TimeZone = 'UTC'`);
  } catch (error) {
    port.postMessage({ id: 0, ok: false, error: serializeError(error) } satisfies WorkerReply);
    return;
  }
  const collect = bufferCollector(start.bufferSlackMb ?? 0);
  const area = start.copyArea ? new Uint8Array(start.copyArea) : undefined;
  const transactions = new Map<number, { tx: Transaction; finish: (commit: boolean) => void; done: Promise<unknown> }>();
  let nextTx = 1;
  const reply = (message: WorkerReply) => port.postMessage(message);

  const handle = async (request: WorkerRequest): Promise<void> => {
    switch (request.op) {
      case 'query': {
        const target = request.tx === undefined ? pglite : transactions.get(request.tx)?.tx;
        if (!target) throw new Error(`no open transaction ${request.tx}`);
        const result = await target.query(request.sql, request.params, { rowMode: 'object' });
        reply({ id: request.id, ok: true, rows: result.rows, ...(result.affectedRows == null ? {} : { affectedRows: result.affectedRows }) });
        return;
      }
      case 'copy': {
        // `COPY (<select>) TO STDOUT (FORMAT binary)` by the simple-query protocol, its answer kept
        // as the protocol's bytes, copied straight out of PGlite's WebAssembly memory into the copy
        // area shared with the HTTP thread: no row parsed, no text decoded, no buffer made in this
        // thread (the embedded database's bottleneck) and none passed in the message (decision
        // 0046). The HTTP thread holds the connection's turn, so nothing else runs; inside a
        // transaction (a request's) the statement is that transaction's, else it waits as
        // pglite.query would for one to end.
        const message = simpleQueryMessage(`COPY (${request.select}) TO STDOUT (FORMAT binary)`);
        let length = 0;
        let overflow: Uint8Array[] | undefined;
        const onRawData = (bytes: Uint8Array) => {
          if (!overflow && area && length + bytes.length <= area.length) area.set(bytes, length);
          else {
            overflow ??= area ? [area.slice(0, length)] : [];
            overflow.push(bytes.slice());
          }
          length += bytes.length;
        };
        const copyOut = () => pglite._runExclusiveQuery(() => pglite.execProtocolRawStream(message, { syncToFs: false, onRawData }));
        await (transactions.size > 0 ? copyOut() : pglite._runExclusiveTransaction(copyOut));
        if (!overflow) {
          reply({ id: request.id, ok: true, rawLength: length });
          return;
        }
        const raw = new Uint8Array(length);
        let at = 0;
        for (const part of overflow) {
          raw.set(part, at);
          at += part.length;
        }
        port.postMessage({ id: request.id, ok: true, raw } satisfies WorkerReply, [raw.buffer]);
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
