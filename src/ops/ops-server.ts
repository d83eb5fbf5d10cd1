/**
 * The small HTTP listener of the `worker` role (METRICS_PORT): /healthz, /readyz and /metrics only,
 * so a worker's webhook delivery metrics and pool use can be scraped and its liveness probed like an
 * API process's. Never the read or admin API.
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { AppContext } from '../app-context.ts';
import { errorHandlerPlugin } from '../api/plugins/error-handler.ts';
import { observabilityPlugin } from './observability.plugin.ts';
import { opsRoutes } from './ops.routes.ts';
import { generateRequestId, REQUEST_ID_LOG_LABEL } from './request-id.ts';

/** Builds the operational listener for `ctx` (not listening yet). */
export async function buildOpsServer(ctx: AppContext): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    requestIdHeader: false,
    genReqId: generateRequestId,
    // Scrapes every few seconds would drown the worker's own log lines.
    logController: new LogController({ requestIdLogLabel: REQUEST_ID_LOG_LABEL, disableRequestLogging: true }),
  });
  app.decorate('ctx', ctx);
  await app.register(errorHandlerPlugin);
  await app.register(observabilityPlugin);
  await app.register(opsRoutes);
  return app;
}
