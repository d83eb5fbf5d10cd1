/**
 * Cross-cutting observability of the HTTP app: echoes the request id, records request counts and
 * latency by route template (`routeOptions.url`, so `/api/v1/products/:id` is one series however many
 * ids are asked for) and reports the database pool while the app is open. API processes also report
 * the webhook queue's depth and age, the endpoints and dead letters, and the events written (read
 * from the database at scrape time) and carry the webhook metric families, so a fleet whose workers
 * expose no METRICS_PORT still shows its backlog.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { httpRequestDuration, httpRequestsTotal, trackDatabasePool } from './metrics.ts';
import { REQUEST_ID_HEADER } from './request-id.ts';
import { setQueueGaugeSource } from '../webhooks/webhook-metrics.ts';
import { queueGaugeSource } from '../webhooks/queue-gauges.ts';
import { setEventMetricsSource } from '../events/event-metrics.ts';
import { setAlertMetricsSource } from '../admin/alerts/alerts.ts';

/** Route label of requests that matched no route (404s): one series, not one per probed URL. */
export const UNMATCHED_ROUTE = 'unmatched';

export const observabilityPlugin = fp(
  async function observability(app: FastifyInstance) {
    app.addHook('onRequest', async (request, reply) => {
      reply.header(REQUEST_ID_HEADER, request.id);
    });

    app.addHook('onResponse', async (request, reply) => {
      const labels = {
        method: request.method,
        route: request.routeOptions.url ?? UNMATCHED_ROUTE,
        status_code: String(reply.statusCode),
      };
      httpRequestsTotal.inc(labels);
      httpRequestDuration.observe(labels, reply.elapsedTime / 1000);
    });

    const untrack = trackDatabasePool(app.ctx.database);
    app.addHook('onReady', async () => {
      setQueueGaugeSource(queueGaugeSource(app.ctx.database.db));
      setAlertMetricsSource(app.ctx.database.db);
      setEventMetricsSource(app.ctx.database.db);
    });
    app.addHook('onClose', async () => {
      untrack();
      setQueueGaugeSource(undefined);
      setAlertMetricsSource(undefined);
      setEventMetricsSource(undefined);
    });
  },
  { name: 'observability' },
);
