/**
 * GET  /admin/api/v1/alerts        endpoints paused or disabled, admin keys whose maker lacks a required
 *                                  second factor, dead letters in total and since the
 *                                  signed-in administrator last looked (alerts/alerts.ts)
 * POST /admin/api/v1/alerts/seen   marks them seen now (any role; dashboard sessions; not audited:
 *                                  it changes what one person has seen, nothing of the store)
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { currentAlerts, markAlertsSeen } from '../alerts/alerts.ts';

const Nullable = <T extends ReturnType<typeof Type.String>>(s: T) => Type.Union([s, Type.Null()]);
const AlertsSchema = Type.Object({
  data: Type.Object({
    endpoints: Type.Array(
      Type.Object({
        id: Type.String({ format: 'uuid' }),
        url: Type.String(),
        state: Type.Unsafe<string>({ type: 'string', enum: ['paused', 'disabled'] }),
        paused_until: Nullable(Type.String({ format: 'date-time' })),
        disabled_reason: Nullable(Type.String()),
      }),
    ),
    keys_without_second_factor: Type.Array(
      Type.Object({
        id: Type.String({ format: 'uuid' }),
        name: Type.String(),
        prefix: Type.String(),
        maker_email: Nullable(Type.String()),
      }),
      { description: 'While an owner requires a second factor: live admin keys whose maker has none; each acts as a viewer until she sets one up' },
    ),
    dead_letters: Type.Object({ total: Type.Integer(), since_seen: Type.Integer() }),
    seen_at: Nullable(Type.String({ format: 'date-time' })),
    attention: Type.Boolean(),
  }),
});

export async function alertsAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const tags = ['Admin: dashboard'];
  app.get(
    '/alerts',
    {
      config: { permission: 'read' },
      schema: {
        tags,
        operationId: 'getAlerts',
        summary: 'Paused or disabled endpoints and dead letters (new since the administrator last looked)',
        response: { 200: AlertsSchema },
      },
    },
    async (request) => ({ data: await currentAlerts(db, request.admin?.kind === 'session' ? request.admin.id : undefined) }),
  );
  app.post(
    '/alerts/seen',
    {
      config: { permission: 'account' },
      schema: {
        tags,
        operationId: 'markAlertsSeen',
        summary: 'Mark the alerts seen by the signed-in administrator',
        response: { 204: Type.Null({ description: 'Marked (nothing to mark for an API token)' }) },
      },
    },
    async (request, reply) => {
      request.audit = { record: false };
      if (request.admin?.kind === 'session') await markAlertsSeen(db, request.admin.id);
      return reply.code(204).send();
    },
  );
}
