/**
 * One's own passkeys (decision 0063), under /admin/api/v1 (dashboard sessions only; an API key has
 * no passkeys):
 *   GET    /account/passkeys            the list: name, added, last used, backed up
 *   POST   /account/passkeys/options    start adding one (fresh proof): the options of
 *                                      navigator.credentials.create(), the ceremony in a cookie
 *   POST   /account/passkeys            { name, credential }: the browser's answer; 201 the passkey (fresh proof)
 *   PATCH  /account/passkeys/:id        { name }: rename
 *   DELETE /account/passkeys/:id        remove (fresh proof)
 * A refused answer (no ceremony of this browser and session, expired, not verified, a passkey added
 * already) is 400 invalid_parameter naming `credential` and the reason; the ceremony is spent, the
 * refusal audited (admin.passkey_refused), nothing stored.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { ApiError } from '../../shared/problem.ts';
import { nowMs, requireFreshProof, type AdminPrincipal } from '../admin-auth.ts';
import { dataOf } from '../admin-responses.ts';
import { recordAudit } from '../audit/audit-log.ts';
import { PasskeyRefusal, finishRegistration, listPasskeys, removePasskey, renamePasskey, startRegistration } from '../sessions/passkey.service.ts';
import { clearPasskeyCeremonyCookie, passkeyCeremonyOf, setPasskeyCeremonyCookie } from '../sessions/session-cookie.ts';

const strict = { additionalProperties: false } as const;
const open = { additionalProperties: true } as const;
const b64url = (description: string) => Type.String({ minLength: 1, maxLength: 16_384, pattern: '^[A-Za-z0-9_-]*={0,2}$', description });

/** The browser's answer to navigator.credentials.create(), as JSON (base64url fields, WebAuthn Level 3 `toJSON()`). */
export const RegistrationCredential = Type.Object(
  {
    id: b64url('The credential id'),
    rawId: b64url('The credential id'),
    type: Type.Literal('public-key'),
    response: Type.Object(
      {
        clientDataJSON: b64url('clientDataJSON'),
        attestationObject: b64url('attestationObject'),
        transports: Type.Optional(Type.Array(Type.String({ maxLength: 32 }), { maxItems: 10 })),
      },
      open,
    ),
    authenticatorAttachment: Type.Optional(Type.String({ maxLength: 32 })),
    clientExtensionResults: Type.Object({}, open),
  },
  { ...open, title: 'PasskeyRegistrationCredential' },
);

/** The browser's answer to navigator.credentials.get(), as JSON. */
export const AssertionCredential = Type.Object(
  {
    id: b64url('The credential id'),
    rawId: b64url('The credential id'),
    type: Type.Literal('public-key'),
    response: Type.Object(
      {
        clientDataJSON: b64url('clientDataJSON'),
        authenticatorData: b64url('authenticatorData'),
        signature: b64url('signature'),
        userHandle: Type.Optional(Type.Union([b64url('The account the passkey names (usernameless sign-in)'), Type.Null()])),
      },
      open,
    ),
    authenticatorAttachment: Type.Optional(Type.String({ maxLength: 32 })),
    clientExtensionResults: Type.Object({}, open),
  },
  { ...open, title: 'PasskeyAssertion', description: 'The answer of navigator.credentials.get() as JSON (base64url fields)' },
);

export const asRegistration = (credential: typeof RegistrationCredential.static) => credential as unknown as RegistrationResponseJSON;
export const asAssertion = (credential: typeof AssertionCredential.static) => credential as unknown as AuthenticationResponseJSON;

/** The options a ceremony passes to navigator.credentials (WebAuthn's JSON form, base64url). */
export const CeremonyOptions = Type.Object(
  { challenge: Type.String({ description: 'base64url; kept server-side, one use' }) },
  { ...open, title: 'PasskeyCeremonyOptions', description: "WebAuthn's PublicKeyCredential*OptionsJSON (base64url fields)" },
);

const PasskeyName = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S', description: 'Your name for it, such as "Laptop" or "Phone"' });
const Passkey = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'Its last sign-in or second-factor step; null: never used' }),
    backed_up: Type.Boolean({ description: 'The authenticator says it is backed up (synced to other devices)' }),
    transports: Type.Array(Type.String(), { description: 'How the browser reached it (internal, usb, hybrid, …)' }),
  },
  { ...strict, title: 'Passkey' },
);
const IdParam = Type.Object({ id: Type.String({ format: 'uuid' }) }, strict);
const AddBody = Type.Object({ name: PasskeyName, credential: RegistrationCredential }, strict);
const RenameBody = Type.Object({ name: PasskeyName }, strict);

/** The signed-in administrator of a request; 403 for API keys (they have no passkeys). */
function sessionAdmin(request: FastifyRequest): AdminPrincipal & { kind: 'session' } {
  const admin = request.admin!;
  if (admin.kind !== 'session') {
    throw new ApiError('forbidden', 'Only an administrator signed in to the dashboard has passkeys; API keys have none.');
  }
  return admin as AdminPrincipal & { kind: 'session' };
}

export async function passkeyAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const tags = ['Admin: passkeys'];
  const notFound = (id: string) => new ApiError('not_found', `You have no passkey with id '${id}'.`);

  app.get(
    '/account/passkeys',
    {
      config: { permission: 'account', duringEnrolment: true },
      schema: {
        tags,
        operationId: 'listOwnPasskeys',
        summary: 'Your passkeys: name, when added, when last used',
        response: { 200: dataOf(Type.Array(Passkey)) },
      },
    },
    async (request) => ({ data: await listPasskeys(db, sessionAdmin(request).id) }),
  );

  app.post(
    '/account/passkeys/options',
    {
      config: { permission: 'account', duringEnrolment: true },
      schema: {
        tags,
        operationId: 'startPasskeyRegistration',
        summary: 'Start adding a passkey (asks for a fresh proof): the options for navigator.credentials.create()',
        description: 'The challenge is kept server-side for ADMIN_PASSKEY_CHALLENGE_TTL_MS, bound to this browser (an HttpOnly cookie) and session; one use.',
        response: { 200: dataOf(CeremonyOptions) },
      },
    },
    async (request, reply) => {
      const admin = sessionAdmin(request);
      requireFreshProof(request, 'adding a passkey');
      const { options, ceremony } = await startRegistration(db, config, {
        adminUserId: admin.id,
        email: admin.name,
        sessionId: admin.sessionPublicId!,
        nowMs: nowMs(request),
        previous: passkeyCeremonyOf(request),
      });
      setPasskeyCeremonyCookie(reply, config, ceremony);
      return reply.header('Cache-Control', 'no-store').send({ data: options });
    },
  );

  app.post(
    '/account/passkeys',
    {
      config: { permission: 'account', duringEnrolment: true, audit: 'admin.passkey_added' },
      schema: {
        tags,
        operationId: 'addPasskey',
        summary: "Add a passkey: the browser's answer to the options (asks for a fresh proof)",
        body: AddBody,
        response: { 201: dataOf(Passkey) },
      },
    },
    async (request, reply) => {
      const admin = sessionAdmin(request);
      requireFreshProof(request, 'adding a passkey');
      const body = request.body as typeof AddBody.static;
      clearPasskeyCeremonyCookie(reply, config);
      let added: Awaited<ReturnType<typeof finishRegistration>>;
      try {
        added = await finishRegistration(db, config, {
          adminUserId: admin.id,
          sessionId: admin.sessionPublicId!,
          cookie: passkeyCeremonyOf(request),
          response: asRegistration(body.credential),
          name: body.name.trim(),
          nowMs: nowMs(request),
        });
      } catch (error) {
        if (!(error instanceof PasskeyRefusal)) throw error;
        await recordAudit(db, {
          actor: { kind: 'session', id: admin.id, name: admin.name },
          action: 'admin.passkey_refused',
          target: { type: 'admin', id: admin.id },
          clientIp: request.ip,
          details: { during: 'registration', reason: error.reason },
        });
        request.log.warn({ admin: admin.name, reason: error.reason }, 'passkey registration refused');
        throw new ApiError('invalid_parameter', error.message, [{ param: 'credential', message: error.reason.replace(/_/g, ' ') }]);
      }
      request.audit = { target: { type: 'passkey', id: added.id }, details: { email: admin.name, name: added.name, backed_up: added.backed_up } };
      return reply.code(201).send({ data: added });
    },
  );

  app.patch(
    '/account/passkeys/:id',
    {
      config: { permission: 'account', duringEnrolment: true, audit: 'admin.passkey_renamed' },
      schema: {
        tags,
        operationId: 'renamePasskey',
        summary: 'Rename one of your passkeys',
        params: IdParam,
        body: RenameBody,
        response: { 200: dataOf(Passkey) },
      },
    },
    async (request) => {
      const admin = sessionAdmin(request);
      const { id } = request.params as typeof IdParam.static;
      const { name } = request.body as typeof RenameBody.static;
      const renamed = await renamePasskey(db, admin.id, id, name.trim());
      if (!renamed) throw notFound(id);
      request.audit = { target: { type: 'passkey', id }, details: { email: admin.name, name: renamed.name } };
      return { data: renamed };
    },
  );

  app.delete(
    '/account/passkeys/:id',
    {
      config: { permission: 'account', duringEnrolment: true, audit: 'admin.passkey_removed' },
      schema: {
        tags,
        operationId: 'removePasskey',
        summary: 'Remove one of your passkeys (asks for a fresh proof)',
        params: IdParam,
        response: { 200: dataOf(Passkey) },
      },
    },
    async (request) => {
      const admin = sessionAdmin(request);
      requireFreshProof(request, 'removing a passkey');
      const { id } = request.params as typeof IdParam.static;
      const removed = await removePasskey(db, admin.id, id);
      if (!removed) throw notFound(id);
      request.audit = { target: { type: 'passkey', id }, details: { email: admin.name, name: removed.name } };
      return { data: removed };
    },
  );
}
