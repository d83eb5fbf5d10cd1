/**
 * GET /admin/api/v1/audit-log: the administrators' audit log, newest first (audit/audit-log.ts),
 * filtered by actor, action and time range, paged with next_cursor. Any role may read it.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { AUDIT_ACTIONS, listAudit } from '../audit/audit-log.ts';

const strict = { additionalProperties: false } as const;
const AuditQuery = Type.Object(
  {
    actor: Type.Optional(
      Type.String({ minLength: 1, maxLength: 300, description: 'Email of an administrator or name of an API token (exact, case-insensitive)' }),
    ),
    action: Type.Optional(Type.Unsafe<string>({ type: 'string', enum: [...AUDIT_ACTIONS] })),
    from: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601, inclusive' })),
    to: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601, exclusive' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'next_cursor of the previous page' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  },
  strict,
);
const Nullable = <T extends ReturnType<typeof Type.String>>(s: T) => Type.Union([s, Type.Null()]);
const AuditEntry = Type.Object({
  id: Type.String({ format: 'uuid' }),
  at: Type.String({ format: 'date-time' }),
  actor: Type.Object({
    kind: Type.Unsafe<string>({ type: 'string', enum: ['session', 'token', 'anonymous'] }),
    id: Nullable(Type.String()),
    name: Type.String(),
  }),
  action: Type.String(),
  target: Type.Union([Type.Object({ type: Type.String(), id: Nullable(Type.String()) }), Type.Null()]),
  client_ip: Nullable(Type.String()),
  details: Type.Record(Type.String(), Type.Unknown(), { description: 'What changed; never a secret' }),
});
const AuditPage = Type.Object({
  data: Type.Array(AuditEntry),
  pagination: Type.Object({ limit: Type.Integer(), has_more: Type.Boolean(), next_cursor: Nullable(Type.String()) }),
});

export async function auditAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  app.get(
    '/audit-log',
    {
      config: { permission: 'read' },
      schema: { tags: ['Admin: audit log'], summary: 'Who did what, when and from where, newest first', querystring: AuditQuery, response: { 200: AuditPage } },
    },
    async (request) => listAudit(db, request.query as typeof AuditQuery.static & { limit: number }),
  ); // ajv filled in the default
}
