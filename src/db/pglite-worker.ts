/**
 * The embedded database's own thread (decision 0030). PGlite runs PostgreSQL as WebAssembly on the
 * thread that loads it, so it is loaded here, in a worker thread, and the HTTP thread talks to it by
 * messages (db/pglite-thread.ts): a statement, however long, holds this thread only. Rows are parsed
 * here with the shared type parsers and cross to the HTTP thread as structured clones.
 *
 * Loaded as TypeScript by Node's type stripping (sources) or as the compiled .js (dist/), so it
 * imports nothing but PGlite and the type parsers, and uses erasable syntax only.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { typeParsers } from './type-parsers.ts';

export interface WorkerStart {
  /** PGlite's data directory; none (with `archive` or alone) for an in-memory database. */
  dataDir?: string;
  /** A dumped data directory (PGlite's dumpDataDir) to start an in-memory database from. */
  archive?: Uint8Array;
  startParams: string[];
}

export type WorkerRequest =
  | { id: number; op: 'query'; sql: string; params: unknown[]; tx?: number }
  | { id: number; op: 'begin' }
  | { id: number; op: 'end'; tx: number; commit: boolean }
  | { id: number; op: 'close' };

/** A statement's or a transaction step's answer. */
export type WorkerResult = { id: number; ok: true; rows?: unknown[]; affectedRows?: number; tx?: number };

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
      case 'close': {
        await pglite.close();
        reply({ id: request.id, ok: true });
        port.close();
        return;
      }
    }
  };

  port.on('message', (request: WorkerRequest) => {
    handle(request).catch((error: unknown) => reply({ id: request.id, ok: false, error: serializeError(error) }));
  });
  reply({ id: 0, ok: true, ready: true });
}

if (parentPort) await run(parentPort, workerData as WorkerStart);
