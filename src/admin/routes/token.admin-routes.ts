/**
 * Admin API for API tokens: list, create (secret shown once), roll (new secret shown once; the old
 * one keeps working for the overlap asked for), rename or change rate limits, revoke. Every write
 * is in the audit log (never the secret).
 *
 * Every key records its maker (decision 0026): the administrator signed in, or, for a key made with
 * a key, that key's maker (a key cannot hand out more than it has); rolling a key makes the roller
 * its maker the same way (she is shown the new secret); listed as `made_by` with the maker's role now. An owner (signed in) moves every key of a maker to another administrator, or
 * revokes them all, in one request: `/tokens/made-by/:maker/transfer` and `/revoke`, where `:maker`
 * is an administrator's id (removed ones included) or `operator` (keys made with the CLI).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import {
  SCOPES,
  createToken,
  getToken,
  listTokens,
  revokeToken,
  revokeTokensMadeBy,
  rollToken,
  transferTokens,
  updateToken,
  type TokenMakerRef,
} from '../../tokens/token.service.ts';
import { findMember } from '../sessions/admin-user.service.ts';
import type { AdminPrincipal } from '../admin-auth.ts';
import { parseIsoTimestamp } from '../../shared/time.ts';
import { ApiError, invalidParameter } from '../../shared/problem.ts';
import { READ_SCOPES } from '../../resources/registry.ts';
import { requireFreshProof } from '../admin-auth.ts';
import { ApiKey, ApiKeyWithSecret, dataOf } from '../admin-responses.ts';

/** Whether a key with `scopes` may write or administer (anything beyond reading store data). */
function writesOrAdministers(scopes: readonly string[] | undefined): boolean {
  return (scopes ?? []).some((scope) => !(READ_SCOPES as readonly string[]).includes(scope));
}

const ScopeSchema = Type.Unsafe<(typeof SCOPES)[number]>({ type: 'string', enum: [...SCOPES] });
const RateLimit = Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000 }), Type.Null()]);
const CreateTokenBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })),
    expires_at: Type.Optional(Type.Union([Type.String({ maxLength: 40 }), Type.Null()], { description: 'ISO 8601, in the future; null or omitted: never' })),
    rate_limit_standard: Type.Optional(RateLimit),
    rate_limit_export: Type.Optional(RateLimit),
  },
  { additionalProperties: false },
);
const PatchTokenBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' })),
    rate_limit_standard: Type.Optional(RateLimit),
    rate_limit_export: Type.Optional(RateLimit),
  },
  { additionalProperties: false, minProperties: 1 },
);
/** Longest overlap of a roll: a week, like a webhook secret's. */
export const MAX_ROLL_OVERLAP_SECONDS = 604_800;
const RollBody = Type.Object(
  {
    overlap_seconds: Type.Integer({
      minimum: 0,
      maximum: MAX_ROLL_OVERLAP_SECONDS,
      default: 86_400,
      description: 'How long the old secret keeps working (0: ends now; default 24 h)',
    }),
  },
  { additionalProperties: false },
);
const IdParam = Type.Object({ id: Type.String({ format: 'uuid' }) });
const MakerParam = Type.Object(
  {
    maker: Type.Union([Type.String({ format: 'uuid' }), Type.Literal('operator')], {
      description: "An administrator's id (a removed one too), or `operator` for keys made with the CLI",
    }),
  },
  { additionalProperties: false },
);
const TransferBody = Type.Object(
  { to_admin_id: Type.String({ format: 'uuid', description: 'The administrator who becomes the maker of the keys' }) },
  { additionalProperties: false },
);

/** Who makes a key created by `admin`: she herself, or a key's own maker (the operator: undefined). */
function makerOfNewKey(admin: AdminPrincipal): TokenMakerRef | undefined {
  if (admin.kind === 'session') return { adminId: admin.id, email: admin.name };
  const maker = admin.maker;
  return maker?.kind === 'administrator' && maker.id && maker.email ? { adminId: maker.id, email: maker.email } : undefined;
}

export async function tokenAdminRoutes(app: FastifyInstance): Promise<void> {
  const db = app.ctx.database.db;
  const tags = ['Admin: API keys'];
  const id = (params: unknown) => (params as { id: string }).id;

  app.get(
    '/tokens',
    { config: { permission: 'read' }, schema: { tags, operationId: 'listApiKeys', summary: 'List API tokens', response: { 200: dataOf(Type.Array(ApiKey)) } } },
    async () => ({
      data: await listTokens(db),
    }),
  );

  app.get(
    '/tokens/:id',
    {
      config: { permission: 'read' },
      schema: { tags, operationId: 'getApiKey', summary: 'An API token (without its secret)', params: IdParam, response: { 200: dataOf(ApiKey) } },
    },
    async (request) => ({
      data: await getToken(db, id(request.params)),
    }),
  );

  app.post(
    '/tokens',
    {
      config: { permission: 'write', audit: 'key.created', auditTarget: 'key', returnsSecret: true },
      schema: {
        tags,
        operationId: 'createApiKey',
        summary: 'Create an API token (the secret is in the response, once)',
        body: CreateTokenBody,
        response: { 201: dataOf(ApiKeyWithSecret) },
      },
    },
    async (request, reply) => {
      const body = request.body as typeof CreateTokenBody.static;
      if (!body.name.trim()) throw invalidParameter('body.name', 'must not be blank');
      // Any key: a read key carries store data out as well (sudo mode).
      requireFreshProof(request, writesOrAdministers(body.scopes) ? 'creating a key that can write or administer' : 'creating a key');
      let expiresAt: string | null = null;
      if (body.expires_at) {
        expiresAt = parseIsoTimestamp(body.expires_at) ?? null;
        if (!expiresAt) throw invalidParameter('body.expires_at', 'must be an ISO 8601 timestamp (years 0001–9999)');
        // A key born expired would be listed and never work: refuse it.
        if (new Date(expiresAt).getTime() <= Date.now()) throw invalidParameter('body.expires_at', 'must be in the future');
      }
      const { token, summary } = await createToken(db, {
        name: body.name,
        scopes: body.scopes,
        expiresAt,
        rateLimitStandard: body.rate_limit_standard,
        rateLimitExport: body.rate_limit_export,
        madeBy: makerOfNewKey(request.admin!),
        maxKeysOfStore: app.ctx.config.STORE_MAX_API_KEYS,
      });
      request.audit = {
        target: { type: 'key', id: summary.id },
        details: {
          made_by: summary.made_by.email ?? 'operator',
          name: summary.name,
          prefix: summary.prefix,
          scopes: summary.scopes,
          expires_at: summary.expires_at,
          rate_limit_standard: summary.rate_limit_standard,
          rate_limit_export: summary.rate_limit_export,
        },
      };
      return reply.code(201).send({ data: { ...summary, token } });
    },
  );

  app.patch(
    '/tokens/:id',
    {
      config: { permission: 'write', audit: 'key.updated', auditTarget: 'key' },
      schema: {
        tags,
        operationId: 'updateApiKey',
        summary: 'Rename an API token or change its rate limits',
        params: IdParam,
        body: PatchTokenBody,
        response: { 200: dataOf(ApiKey) },
      },
    },
    async (request) => {
      const body = request.body as typeof PatchTokenBody.static;
      const { before, after } = await updateToken(db, id(request.params), {
        name: body.name?.trim(),
        rateLimitStandard: body.rate_limit_standard,
        rateLimitExport: body.rate_limit_export,
      });
      const changes: Record<string, { from: unknown; to: unknown }> = {};
      for (const key of ['name', 'rate_limit_standard', 'rate_limit_export'] as const) {
        if (before[key] !== after[key]) changes[key] = { from: before[key], to: after[key] };
      }
      request.audit = { target: { type: 'key', id: after.id }, details: { prefix: after.prefix, changes } };
      return { data: after };
    },
  );

  app.post(
    '/tokens/:id/roll',
    {
      config: { permission: 'write', audit: 'key.rolled', auditTarget: 'key', returnsSecret: true },
      schema: {
        tags,
        operationId: 'rollApiKey',
        summary: 'Roll an API token: a new secret (in the response, once); the old one works for overlap_seconds more',
        params: IdParam,
        body: Type.Optional(RollBody),
        response: { 200: dataOf(ApiKeyWithSecret) },
      },
    },
    async (request) => {
      const overlap = (request.body as typeof RollBody.static | undefined)?.overlap_seconds ?? 86_400;
      // Any key: its new secret is shown, and a read key carries store data out too.
      const rolled = await getToken(db, id(request.params));
      requireFreshProof(
        request,
        writesOrAdministers(rolled.scopes) ? 'rolling a key that can write or administer (its new secret is shown)' : 'rolling a key (its new secret is shown)',
      );
      // Whoever is shown the new secret becomes the key's maker (decision 0026).
      const { token, summary } = await rollToken(db, id(request.params), overlap * 1000, makerOfNewKey(request.admin!));
      request.audit = {
        target: { type: 'key', id: summary.id },
        details: {
          made_by: summary.made_by.email ?? 'operator',
          name: summary.name,
          prefix: summary.prefix,
          overlap_seconds: overlap,
          previous_secret_expires_at: summary.previous_secret_expires_at,
        },
      };
      return { data: { ...summary, token } };
    },
  );

  app.post(
    '/tokens/:id/revoke',
    {
      config: { permission: 'write', audit: 'key.revoked', auditTarget: 'key' },
      schema: { tags, operationId: 'revokeApiKey', summary: 'Revoke an API token', params: IdParam, response: { 200: dataOf(ApiKey) } },
    },
    async (request) => {
      const summary = await revokeToken(db, id(request.params));
      request.audit = { target: { type: 'key', id: summary.id }, details: { name: summary.name, prefix: summary.prefix } };
      return { data: summary };
    },
  );

  app.post(
    '/tokens/made-by/:maker/transfer',
    {
      config: { permission: 'owner', audit: 'key.transferred', auditTarget: 'key' },
      schema: {
        tags,
        operationId: 'transferApiKeysOfMaker',
        summary: "Transfer every unrevoked key of a maker to another administrator (owner); from the next request they act with that administrator's role",
        params: MakerParam,
        body: TransferBody,
        response: { 200: dataOf(Type.Array(ApiKey)) },
      },
    },
    async (request) => {
      const { maker } = request.params as typeof MakerParam.static;
      const { to_admin_id } = request.body as typeof TransferBody.static;
      requireFreshProof(request, "transferring a maker's keys (their secrets act for the new maker)");
      // The new maker must administer this store: a key acts with its maker's role in its store.
      const to = await findMember(db, to_admin_id);
      if (!to) throw new ApiError('not_found', `No administrator with id '${to_admin_id}' in this store.`, [{ param: 'to_admin_id', message: 'unknown' }]);
      const moved = await transferTokens(db, maker, { adminId: to.id, email: to.email });
      request.audit = {
        target: { type: 'maker', id: maker },
        details: { from: maker, to: to.email, keys: moved.map((k) => k.prefix) },
      };
      return { data: moved };
    },
  );

  app.post(
    '/tokens/made-by/:maker/revoke',
    {
      config: { permission: 'owner', audit: 'key.revoked', auditTarget: 'key' },
      schema: {
        tags,
        operationId: 'revokeApiKeysOfMaker',
        summary: 'Revoke every unrevoked key of a maker in one step (owner)',
        params: MakerParam,
        response: { 200: dataOf(Type.Array(ApiKey)) },
      },
    },
    async (request) => {
      const { maker } = request.params as typeof MakerParam.static;
      const revoked = await revokeTokensMadeBy(db, maker);
      request.audit = {
        target: { type: 'maker', id: maker },
        details: { made_by: revoked[0]?.made_by.email ?? 'operator', keys: revoked.map((k) => k.prefix) },
      };
      return { data: revoked };
    },
  );
}
