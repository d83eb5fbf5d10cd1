/**
 * Operational endpoints, outside /api/v1 and without a token (probes and scrapers carry none; keep
 * them off the public internet at the load balancer if that matters — see docs/operations.md):
 *   GET /healthz   the process is up and serving (liveness)
 *   GET /readyz    the database answers, can write (no recent out-of-space error) and its schema is current
 *                  (readiness); 503 problem+json otherwise. The embedded database busy with other
 *                  work (a large import) is ready while its thread lives and makes progress
 *                  (READINESS_BUSY_MS): busy is not gone, and an orchestrator must not restart it
 *   GET /metrics   Prometheus text format, prom-client's default registry
 */
import { asPlatform, OWNER_SCOPE, runInScope } from '../db/store-scope.ts';
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import { pendingMigrations } from '../schema/migrate.ts';
import { ProblemSchema } from '../api/schemas.ts';
import { sendProblem } from '../api/plugins/error-handler.ts';
import { metricsRegistry } from './metrics.ts';
import { DATABASE_RETRY_AFTER_SECONDS } from '../shared/db-errors.ts';
import type { DatabaseHandle } from '../db/database.ts';

/** How long /readyz waits for the database before calling it unreachable (or, embedded, busy). */
const READINESS_TIMEOUT_MS = 2000;

/** The readiness check got no answer in time (as opposed to an error from the database). */
class NoAnswerInTime extends Error {}

const HealthBody = Type.Object({ status: Type.Literal('ok') }, { additionalProperties: false });
const ReadyBody = Type.Object(
  {
    status: Type.Literal('ready'),
    database: Type.Literal('ok'),
    migrations: Type.Literal('current'),
  },
  { additionalProperties: false },
);

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new NoAnswerInTime(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Why the embedded database, whose readiness check got no answer in time, is not ready; undefined
 * when it is only busy: its thread runs and has answered a statement within `busyMs` (the check
 * waits in the queue of its one connection behind an import's steps or a long statement). A stopped
 * thread, one wedged in a statement, or PostgreSQL not answering is not ready.
 */
function notReadyWhenBusy(database: DatabaseHandle, busyMs: number): string | undefined {
  const activity = database.activity?.();
  if (!activity?.alive) return 'The database is unreachable.';
  if (activity.quietMs >= busyMs) {
    return `The embedded database has answered no statement for ${(activity.quietMs / 1000).toFixed(1)} s (READINESS_BUSY_MS=${busyMs}).`;
  }
  return undefined;
}

export async function opsRoutes(app: FastifyInstance): Promise<void> {
  const db = app.ctx.database.db;

  app.get(
    '/healthz',
    {
      schema: {
        tags: ['Operations'],
        operationId: 'getLiveness',
        summary: 'Liveness: the process is up (no token)',
        response: { 200: HealthBody },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['Operations'],
        operationId: 'getReadiness',
        summary: 'Readiness: the database is reachable and its migrations are current (no token)',
        response: { 200: ReadyBody, 503: ProblemSchema },
      },
    },
    async (request, reply) => {
      const cannotWrite = app.ctx.database.storage.cannotWrite();
      if (cannotWrite) {
        return sendProblem(reply, 'service_unavailable', cannotWrite, undefined, { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) });
      }
      let pending: string[];
      try {
        pending = await withTimeout(
          // As the schema's owner: the migrations' table is no store's (decision 0051).
          runInScope(OWNER_SCOPE, async () => {
            await sql`SELECT 1`.execute(db);
            return pendingMigrations(db);
          }),
          READINESS_TIMEOUT_MS,
        );
      } catch (error) {
        const notReady =
          error instanceof NoAnswerInTime ? notReadyWhenBusy(app.ctx.database, app.ctx.config.READINESS_BUSY_MS) : 'The database is unreachable.';
        if (notReady === undefined) {
          // Its migrations ran at this process's start, and no other process can open its data
          // directory meanwhile (db/data-dir-lock.ts): current.
          request.log.debug('readiness check: the embedded database is busy with other work; ready');
          return { status: 'ready' as const, database: 'ok' as const, migrations: 'current' as const };
        }
        request.log.warn({ err: error }, `readiness check: ${notReady}`);
        return sendProblem(reply, 'service_unavailable', notReady, undefined, { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) });
      }
      if (pending.length > 0) {
        return sendProblem(reply, 'service_unavailable', `Database migrations are pending: ${pending.join(', ')}. Run \`store-api migrate\`.`);
      }
      return { status: 'ready' as const, database: 'ok' as const, migrations: 'current' as const };
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        tags: ['Operations'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics of this process (no token)',
        produces: ['text/plain'],
        response: {
          200: {
            description: 'Prometheus text exposition format 0.0.4',
            content: { 'text/plain': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (_request, reply) => {
      // Gauges read from the database count every store's rows (decision 0051).
      const body = await asPlatform(() => metricsRegistry.metrics());
      return reply.type(metricsRegistry.contentType).send(body);
    },
  );
}
