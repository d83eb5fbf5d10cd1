/**
 * One transaction per admin write (decision 0027): every request of the admin API (and of the
 * dashboard's session, setup and link routes) other than GET/HEAD/OPTIONS runs in a request
 * transaction (db/request-transaction.ts). Its Idempotency-Key
 * claim, the route's writes (each service's own transaction becomes a savepoint of it), its
 * read-backs, its audit entry and its stored answer are one transaction, committed in `onSend`, after
 * the answer is serialised and before its first byte leaves. So:
 *  - a committed write always has its audit entry and, when keyed, its stored answer;
 *  - a crash or a lost connection before the commit leaves nothing (the retry runs once), after it
 *    the stored answer (the retry replays it);
 *  - the key's claim ends with the transaction (admin/idempotency/idempotency.ts).
 *
 * Steps of a write, in order (`AdminWriteStep`): store_held (its store's row read FOR SHARE, so a
 * suspension or deletion waits for the write or refuses it) → claimed (key checked and held) → handled (the route
 * answered) → audited (its entry written) → answer_stored (keyed requests) → committed (before the
 * answer is sent). Answers: 2xx and 4xx commit (a 4xx keeps what its route committed, such as a
 * throttle's count, as before; only 2xx are audited); 5xx roll back (nothing written, key free).
 * If the audit entry, the stored answer or the commit fails, the transaction is rolled back and the
 * answer becomes the failure's (503 for a lost connection): the client never sees a success that was
 * not committed.
 *
 * `setAdminWriteStepHook` lets a test act at a step (kill the process, terminate the connection);
 * production never sets it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { RequestTransaction } from '../db/request-transaction.ts';
import { currentStoreId } from '../db/store-scope.ts';
import { holdStoreOpen } from '../stores/store.service.ts';
import { claimIdempotencyKey, isStorableAnswer, releaseIdempotencyClaim, storeIdempotentAnswer } from './idempotency/idempotency.ts';

/** The steps of an admin write at which a test may act (see the file's comment). */
export type AdminWriteStep = 'store_held' | 'claimed' | 'handled' | 'audited' | 'answer_stored' | 'committed';

/** Called at each step with the request's transaction (open until `committed`). */
export type AdminWriteStepHook = (step: AdminWriteStep, transaction: RequestTransaction, request: FastifyRequest) => void | Promise<void>;

let stepHook: AdminWriteStepHook | undefined;

/** Sets (or clears, with undefined) the hook called at each step of every admin write; for tests. */
export function setAdminWriteStepHook(hook: AdminWriteStepHook | undefined): void {
  stepHook = hook;
}

async function step(name: AdminWriteStep, transaction: RequestTransaction, request: FastifyRequest): Promise<void> {
  if (stepHook) await stepHook(name, transaction, request);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The transaction of this admin write, from its preHandler to its answer. */
    writeTransaction?: RequestTransaction;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Writes the audit entry of a successful write (inside its transaction); see admin-api.routes.ts. */
export type AuditWriter = (request: FastifyRequest, statusCode: number, payload: unknown) => Promise<void>;

async function endTransaction(request: FastifyRequest, outcome: 'commit' | 'rollback'): Promise<void> {
  const transaction = request.writeTransaction;
  try {
    if (transaction) await (outcome === 'commit' ? transaction.commit() : transaction.rollback());
  } finally {
    releaseIdempotencyClaim(request);
  }
}

/** Rolls back, keeping the error that made us do it (a rollback on a dead connection fails too). */
async function rollbackQuietly(request: FastifyRequest): Promise<void> {
  await endTransaction(request, 'rollback').catch((error: unknown) => request.log.warn({ err: error }, 'rollback of an admin write failed'));
}

/** What the admin API adds to the transaction of its writes (the dashboard's session routes add nothing). */
export interface AdminWriteOptions {
  /** Writes the audit entry of a 2xx write; without it the routes record their own entries (in the transaction). */
  audit?: AuditWriter;
  /** Whether POSTs honour Idempotency-Key (they need an authenticated principal). */
  idempotency?: boolean;
}

/**
 * Registers the transaction of every write on a scope (before its routes; on the admin API after
 * its authentication hook): the Idempotency-Key claim, the route, `audit` and the stored answer in
 * one transaction.
 */
export function registerAdminWriteTransactions(app: FastifyInstance, { audit, idempotency = false }: AdminWriteOptions = {}): void {
  const database = app.ctx.database;
  app.decorateRequest('writeTransaction', undefined);
  if (idempotency) app.decorateRequest('idempotencyClaim', undefined);

  // Every route's handler runs inside its request's transaction.
  app.addHook('onRoute', (route: RouteOptions) => {
    const handler = route.handler;
    route.handler = function inRequestTransaction(this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      const transaction = request.writeTransaction;
      if (!transaction) return handler.call(this, request, reply);
      return transaction.run(() => handler.call(this, request, reply));
    };
  });

  app.addHook('preHandler', async (request, reply) => {
    if (SAFE_METHODS.has(request.method)) return undefined;
    const transaction = new RequestTransaction();
    request.writeTransaction = transaction;
    // A write of a store holds it open (its row FOR SHARE) until it commits: a suspension or a
    // deletion waits for it, and refuses it if it came first. The store switcher's routes change
    // the session, not the store's data, and stay open while it is suspended.
    if (currentStoreId() !== undefined && request.routeOptions.config?.whileSuspended !== true) {
      await transaction.run(() => holdStoreOpen(database.db));
      await step('store_held', transaction, request);
    }
    if (!idempotency) return undefined;
    const replay = await transaction.run(() => claimIdempotencyKey(request, reply, database.db, database.backend === 'postgres'));
    if (replay) {
      // The stored answer: nothing to write, the transaction (and the key's lock) ends here.
      await endTransaction(request, 'rollback');
      return replay.replay();
    }
    if (request.idempotencyClaim) await step('claimed', transaction, request);
    return undefined;
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const transaction = request.writeTransaction;
    if (!transaction || transaction.state === 'ended') return payload;
    const claim = request.idempotencyClaim;
    if (reply.statusCode >= 500) {
      await rollbackQuietly(request);
      return payload;
    }
    try {
      await step('handled', transaction, request);
      await transaction.run(async () => {
        if (audit && reply.statusCode < 400) {
          await audit(request, reply.statusCode, payload);
          await step('audited', transaction, request);
        }
        if (claim && isStorableAnswer(payload)) {
          await storeIdempotentAnswer(database.db, claim, request, reply, payload);
          await step('answer_stored', transaction, request);
        }
      });
      await endTransaction(request, 'commit');
    } catch (error) {
      // Nothing of this request is committed: its answer becomes the failure's (503 for a lost
      // connection, shared/db-errors.ts), and the key is free for the retry.
      await rollbackQuietly(request);
      throw error;
    }
    await step('committed', transaction, request);
    return payload;
  });

  // An answer that never went through onSend (the client went away first): end what is still open.
  app.addHook('onResponse', async (request) => {
    const transaction = request.writeTransaction;
    if (transaction && transaction.state !== 'ended') await rollbackQuietly(request);
  });
}
