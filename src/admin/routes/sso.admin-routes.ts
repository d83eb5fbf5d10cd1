/**
 * A store's single sign-on (decision 0062), under /admin/api/v1:
 *   GET    /settings/sso   the configuration (client secret as "set"), or null (any role)
 *   PUT    /settings/sso   configure it (owner, signed in, fresh proof): issuer, client id and
 *                          secret (sealed; left out: kept), allowed email domains, the role claim
 *                          and its mapping, the default role (null: refuse), require SSO and the
 *                          break-glass owners who keep their password; 409 without
 *                          WEBHOOK_CREDENTIALS_KEY
 *   DELETE /settings/sso   turn it off (owner, signed in, fresh proof): passwords work for all again
 * Adding or removing a way to sign in and changing who must use it grant power, so each needs the
 * fresh proof the other guarded actions need (ADMIN_REAUTH_WINDOW_MS).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../shared/problem.ts';
import { requireFreshProof } from '../admin-auth.ts';
import { dataOf } from '../admin-responses.ts';
import { NamedValues, Nullable, StringEnum, Timestamp, Uuid } from '../../shared/typebox.ts';
import { credentialKeys } from '../../webhooks/endpoint-credentials.ts';
import { ADMIN_ROLES } from '../sessions/admin-roles.ts';
import { currentStoreId } from '../../db/store-scope.ts';
import {
  deleteSsoSettings,
  getSsoSettings,
  MAX_BREAK_GLASS,
  MAX_SSO_DOMAINS,
  MAX_SSO_ROLE_VALUES,
  saveSsoSettings,
  type SsoSettings,
} from '../sessions/sso.service.ts';

const strict = { additionalProperties: false } as const;
const tags = ['Admin: administrators'];
const Role = StringEnum(ADMIN_ROLES);
const RoleMap = NamedValues({ minLength: 1, maxLength: 200 }, Role, {
  maxProperties: MAX_SSO_ROLE_VALUES,
  description: "Values of the role claim (a group's name, a role's) and the role each gives here; of several values, the highest role",
});
const common = {
  issuer: Type.String({ minLength: 8, maxLength: 2048, description: "The provider's issuer URL (https; its /.well-known/openid-configuration is read)" }),
  client_id: Type.String({ minLength: 1, maxLength: 512 }),
  allowed_domains: Type.Array(Type.String({ minLength: 3, maxLength: 253 }), {
    minItems: 1,
    maxItems: MAX_SSO_DOMAINS,
    description: 'Email domains whose people may sign in (exact: a subdomain is another domain)',
  }),
  role_claim: Type.String({
    minLength: 1,
    maxLength: 100,
    pattern: '^[A-Za-z0-9_:./-]+$',
    description: 'The ID token claim read for the role, e.g. groups or role',
  }),
  role_map: RoleMap,
  default_role: Nullable(Role),
  require_sso: Type.Boolean({ description: 'Password sign-in (and password reset links) refused for everyone but the break-glass owners' }),
  break_glass: Type.Array(Uuid, { maxItems: MAX_BREAK_GLASS, description: 'Owners (account ids) who may still sign in with a password while SSO is required' }),
};
const SsoSettingsBody = Type.Object(
  {
    ...common,
    client_secret: Type.Optional(
      Type.String({ minLength: 1, maxLength: 1024, description: 'Sealed at rest, never shown again; leave out to keep the stored one' }),
    ),
  },
  strict,
);
const SsoSettingsSchema = Type.Object(
  { ...common, client_secret: Type.Literal('set'), updated_at: Timestamp, updated_by: Nullable(Type.String()) },
  { ...strict, title: 'SsoSettings' },
);

function ownerSession(request: FastifyRequest, what: string) {
  const admin = request.admin!;
  if (admin.kind !== 'session') throw new ApiError('forbidden', `Only an owner signed in to the dashboard may ${what}; API keys may not.`);
  requireFreshProof(request, what);
  return admin;
}

/** What changed, for the audit entry (the secret only as "changed"). */
function changes(before: SsoSettings | undefined, after: SsoSettings, secretChanged: boolean): Record<string, unknown> {
  const fields = ['issuer', 'client_id', 'allowed_domains', 'role_claim', 'role_map', 'default_role', 'require_sso', 'break_glass'] as const;
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    const from = before?.[field] ?? null;
    if (JSON.stringify(from) !== JSON.stringify(after[field])) out[field] = { from, to: after[field] };
  }
  if (secretChanged) out.client_secret_changed = true;
  return out;
}

export async function ssoAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const keys = credentialKeys(config.WEBHOOK_CREDENTIALS_KEY);

  app.get(
    '/settings/sso',
    {
      config: { permission: 'read' },
      schema: {
        tags,
        operationId: 'getSsoSettings',
        summary: "The store's single sign-on (OpenID Connect), or null",
        response: { 200: dataOf(Nullable(SsoSettingsSchema)) },
      },
    },
    async () => ({ data: (await getSsoSettings(db)) ?? null }),
  );

  app.put(
    '/settings/sso',
    {
      config: { permission: 'owner', audit: 'settings.sso_changed' },
      schema: {
        tags,
        operationId: 'putSsoSettings',
        summary: 'Configure single sign-on (owner, signed in; asks for a fresh proof)',
        body: SsoSettingsBody,
        response: { 200: dataOf(SsoSettingsSchema) },
      },
    },
    async (request) => {
      const admin = ownerSession(request, 'changing single sign-on');
      const body = request.body as typeof SsoSettingsBody.static;
      const before = await getSsoSettings(db);
      const after = await saveSsoSettings(db, {
        ...body,
        storeId: currentStoreId()!,
        by: admin.name,
        keys,
        allowLoopbackHttp: config.WEBHOOK_ALLOW_PRIVATE_URLS,
      });
      const details = changes(before, after, body.client_secret !== undefined);
      request.audit = Object.keys(details).length === 0 ? { record: false } : { details };
      return { data: after };
    },
  );

  app.delete(
    '/settings/sso',
    {
      config: { permission: 'owner', audit: 'settings.sso_removed' },
      schema: {
        tags,
        operationId: 'deleteSsoSettings',
        summary: 'Turn single sign-on off (owner, signed in; asks for a fresh proof)',
        response: { 204: { type: 'null', description: 'Turned off (or was not on): passwords work for everyone again.' } },
      },
    },
    async (request, reply) => {
      ownerSession(request, 'turning single sign-on off');
      const removed = await deleteSsoSettings(db);
      if (!removed) request.audit = { record: false };
      return reply.code(204).send();
    },
  );
}
