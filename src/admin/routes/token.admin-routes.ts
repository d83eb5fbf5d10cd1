/** Admin API for API tokens: list, create (secret shown once), revoke. */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { SCOPES, createToken, getToken, listTokens, revokeToken } from '../../tokens/token.service.ts';
import { parseIsoTimestamp } from '../../shared/time.ts';
import { invalidParameter } from '../../shared/problem.ts';

const ScopeSchema = Type.Unsafe<(typeof SCOPES)[number]>({ type: 'string', enum: [...SCOPES] });
const CreateTokenBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })),
  expires_at: Type.Optional(Type.Union([Type.String({ maxLength: 40 }), Type.Null()])),
  rate_limit_standard: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000 }), Type.Null()])),
  rate_limit_export: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000 }), Type.Null()])),
}, { additionalProperties: false });

export async function tokenAdminRoutes(app: FastifyInstance): Promise<void> {
  const db = app.ctx.database.db;
  const tags = ['Admin: API keys'];

  app.get('/tokens', { schema: { tags, summary: 'List API tokens' } }, async () => ({ data: await listTokens(db) }));

  app.get('/tokens/:id', { schema: { tags, params: Type.Object({ id: Type.String({ format: 'uuid' }) }) } }, async (request) => ({
    data: await getToken(db, (request.params as { id: string }).id),
  }));

  app.post('/tokens', { schema: { tags, summary: 'Create an API token (the secret is in the response, once)', body: CreateTokenBody } }, async (request, reply) => {
    const body = request.body as typeof CreateTokenBody.static;
    let expiresAt: string | null = null;
    if (body.expires_at) {
      expiresAt = parseIsoTimestamp(body.expires_at) ?? null;
      if (!expiresAt) throw invalidParameter('body.expires_at', 'must be an ISO 8601 timestamp (years 0001–9999)');
    }
    const { token, summary } = await createToken(db, {
      name: body.name,
      scopes: body.scopes,
      expiresAt,
      rateLimitStandard: body.rate_limit_standard,
      rateLimitExport: body.rate_limit_export,
    });
    return reply.code(201).send({ data: { ...summary, token } });
  });

  app.post('/tokens/:id/revoke', { schema: { tags, summary: 'Revoke an API token', params: Type.Object({ id: Type.String({ format: 'uuid' }) }) } }, async (request) => ({
    data: await revokeToken(db, (request.params as { id: string }).id),
  }));
}
