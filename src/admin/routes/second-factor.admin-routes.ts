/**
 * The second factor (decision 0028), under /admin/api/v1. One's own (dashboard sessions only; an
 * API key has no second factor):
 *   GET    /account/second-factor                  { enabled, enabled_at, recovery_codes_left, required }
 *   POST   /account/second-factor                  start setting one up (fresh proof): { secret,
 *                                                  otpauth_uri, qr_code } shown once, pending until confirmed
 *   POST   /account/second-factor/confirm          { code }: the first code turns it on; { recovery_codes } shown once
 *   POST   /account/second-factor/recovery-codes   new recovery codes (fresh proof); the old ones stop working
 *   DELETE /account/second-factor                  turn it off (fresh proof)
 *   POST   /account/reauthenticate                 { password } or { code }: the fresh proof for
 *                                                  ADMIN_REAUTH_WINDOW_MS; throttled like the sign-in
 * An owner's:
 *   DELETE /admins/:id/second-factor               turn off another administrator's, TOTP and passkeys (a lost device; fresh proof)
 *   GET    /settings/security                      { require_second_factor } (any role)
 *   PATCH  /settings/security                      { require_second_factor } (owner, signed in, fresh proof)
 * Bad codes are 401 invalid_second_factor naming what was wrong (wrong, reused, expired, early,
 * recovery code used); they spend nothing, count against the sign-in throttle and are audited
 * without the code.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../shared/problem.ts';
import { nowMs, requireFreshProof, type AdminPrincipal } from '../admin-auth.ts';
import { recordAudit } from '../audit/audit-log.ts';
import { markSessionProven } from '../sessions/admin-session.service.ts';
import { findMember, passwordMatches, refuseWhenInOtherStores } from '../sessions/admin-user.service.ts';
import { clearSignInFailures, recordSignInFailure, signInRetryAfterMs } from '../sessions/sign-in-throttle.ts';
import {
  confirmEnrolment,
  regenerateRecoveryCodes,
  removeSecondFactor,
  secondFactorRequired,
  secondFactorStatus,
  setSecondFactorRequired,
  startEnrolment,
  verifySecondFactor,
} from '../sessions/second-factor.service.ts';

import { dataOf } from '../admin-responses.ts';
import { removeAllPasskeys } from '../sessions/passkey.service.ts';
import { AdminUserSchema } from './account.admin-routes.ts';
const strict = { additionalProperties: false } as const;
const IdParam = Type.Object({ id: Type.String({ format: 'uuid' }) }, strict);
const CodeBody = Type.Object(
  { code: Type.String({ minLength: 1, maxLength: 64, description: 'The 6-digit code of the authenticator app (or, where accepted, a recovery code)' }) },
  strict,
);
const ProofBody = Type.Object(
  {
    password: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    code: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'A 6-digit code or a recovery code' })),
  },
  { ...strict, minProperties: 1, maxProperties: 1 },
);
const SettingsBody = Type.Object({ require_second_factor: Type.Boolean() }, strict);
// Answers (decision 0032: every admin answer typed in the OpenAPI document).
const statusFields = {
  enabled: Type.Boolean(),
  enabled_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  recovery_codes_left: Type.Integer({ minimum: 0 }),
  required: Type.Boolean({ description: "The owner's setting: every administrator must have a second factor" }),
};
const SecondFactorStatus = Type.Object(statusFields, { ...strict, title: 'SecondFactorStatus' });
const RecoveryCodes = Type.Array(Type.String(), { description: 'Shown once: store them now' });
const Enrolment = Type.Object(
  { secret: Type.String(), otpauth_uri: Type.String(), qr_code: Type.String({ description: 'The otpauth URI as a QR code image (data URL)' }) },
  { ...strict, title: 'SecondFactorEnrolment' },
);
const SecuritySettings = Type.Object({ require_second_factor: Type.Boolean() }, { ...strict, title: 'SecuritySettings' });

/** The signed-in administrator of a request; 403 for API keys (they have no second factor). */
function sessionAdmin(request: FastifyRequest): AdminPrincipal & { kind: 'session' } {
  const admin = request.admin!;
  if (admin.kind !== 'session') {
    throw new ApiError('forbidden', 'Only an administrator signed in to the dashboard has a second factor; API keys have none.');
  }
  return admin as AdminPrincipal & { kind: 'session' };
}

export async function secondFactorAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const policy = { maxFailures: config.ADMIN_SIGN_IN_MAX_FAILURES, windowMs: config.ADMIN_SIGN_IN_WINDOW_MS };
  const tags = ['Admin: second factor'];
  const noStore = { 'Cache-Control': 'no-store' };

  /** Refuses while the sign-in throttle for this administrator and address is spent (429). */
  const throttle = async (request: FastifyRequest, email: string) => {
    const waitMs = await signInRetryAfterMs(db, email, request.ip, policy);
    if (waitMs > 0) {
      const seconds = Math.ceil(waitMs / 1000);
      throw new ApiError('rate_limited', `Too many failed attempts. Try again in ${seconds} seconds.`, undefined, { 'Retry-After': String(seconds) });
    }
  };

  /** A refused code: counted like a failed sign-in, audited and logged without the code, rethrown. */
  const codeFailed = async (request: FastifyRequest, admin: AdminPrincipal, error: unknown, during: string) => {
    if (error instanceof ApiError && error.code === 'invalid_second_factor') {
      const reason = error.errors?.[0]?.message ?? 'wrong';
      await recordSignInFailure(db, admin.name, request.ip, policy);
      await recordAudit(db, {
        actor: { kind: 'session', id: admin.id, name: admin.name },
        action: 'admin.second_factor_failed',
        target: { type: 'admin', id: admin.id },
        clientIp: request.ip,
        details: { during, reason },
      });
      request.log.warn({ admin: admin.name, during, reason }, 'second-factor code refused');
    }
    throw error;
  };

  app.get(
    '/account/second-factor',
    {
      config: { permission: 'account', duringEnrolment: true },
      schema: {
        tags,
        operationId: 'getOwnSecondFactor',
        summary: 'Whether you have a second factor, and whether the store requires one',
        response: { 200: dataOf(SecondFactorStatus) },
      },
    },
    async (request) => ({ data: await secondFactorStatus(db, sessionAdmin(request).id) }),
  );

  app.post(
    '/account/second-factor',
    {
      config: { permission: 'account', duringEnrolment: true, audit: 'admin.second_factor_enrolled', returnsSecret: true },
      schema: {
        tags,
        operationId: 'startSecondFactorEnrolment',
        summary: 'Start setting up a second factor: the secret and its QR code (shown once), pending until a first code confirms it',
        response: { 201: dataOf(Enrolment) },
      },
    },
    async (request, reply) => {
      const admin = sessionAdmin(request);
      requireFreshProof(request, 'setting up a second factor');
      const started = await startEnrolment(db, { adminUserId: admin.id, email: admin.name, issuer: `Store Integration (${request.host})` });
      // Nothing is on yet: the audit entry is written when a first code confirms it.
      request.audit = { record: false };
      return reply.code(201).headers(noStore).send({ data: started });
    },
  );

  app.post(
    '/account/second-factor/confirm',
    {
      config: { permission: 'account', duringEnrolment: true, audit: 'admin.second_factor_enrolled', returnsSecret: true },
      schema: {
        tags,
        operationId: 'confirmSecondFactor',
        summary: 'Turn the second factor on with a first code; the recovery codes are in the answer, once',
        body: CodeBody,
        response: { 200: dataOf(Type.Object({ ...statusFields, recovery_codes: RecoveryCodes }, strict)) },
      },
    },
    async (request, reply) => {
      const admin = sessionAdmin(request);
      await throttle(request, admin.name);
      let recoveryCodes: string[];
      try {
        ({ recoveryCodes } = await confirmEnrolment(db, { adminUserId: admin.id, code: (request.body as typeof CodeBody.static).code, nowMs: nowMs(request) }));
      } catch (error) {
        return codeFailed(request, admin, error, 'enrolment');
      }
      await clearSignInFailures(db, admin.name, request.ip);
      request.audit = { target: { type: 'admin', id: admin.id }, details: { email: admin.name, method: 'totp' } };
      return reply.headers(noStore).send({ data: { ...(await secondFactorStatus(db, admin.id)), recovery_codes: recoveryCodes } });
    },
  );

  app.post(
    '/account/second-factor/recovery-codes',
    {
      config: { permission: 'account', audit: 'admin.recovery_codes_regenerated' },
      schema: {
        tags,
        operationId: 'regenerateRecoveryCodes',
        summary: 'New recovery codes (in the answer, once); the old ones stop working',
        response: { 201: dataOf(Type.Object({ recovery_codes: RecoveryCodes }, strict)) },
      },
    },
    async (request, reply) => {
      const admin = sessionAdmin(request);
      requireFreshProof(request, 'making new recovery codes');
      const codes = await regenerateRecoveryCodes(db, admin.id);
      request.audit = { target: { type: 'admin', id: admin.id }, details: { email: admin.name, count: codes.length } };
      return reply
        .code(201)
        .headers(noStore)
        .send({ data: { recovery_codes: codes } });
    },
  );

  app.delete(
    '/account/second-factor',
    {
      config: { permission: 'account', duringEnrolment: true, audit: 'admin.second_factor_removed' },
      schema: {
        tags,
        operationId: 'removeOwnSecondFactor',
        summary: 'Turn your second factor off (asks for a fresh proof)',
        response: { 200: dataOf(SecondFactorStatus) },
      },
    },
    async (request) => {
      const admin = sessionAdmin(request);
      requireFreshProof(request, 'turning off your second factor');
      const removed = await removeSecondFactor(db, admin.id);
      request.audit = removed ? { target: { type: 'admin', id: admin.id }, details: { email: admin.name } } : { record: false };
      return { data: await secondFactorStatus(db, admin.id) };
    },
  );

  app.post(
    '/account/reauthenticate',
    {
      config: { permission: 'account', duringEnrolment: true, audit: 'admin.reauthenticated' },
      schema: {
        tags,
        operationId: 'reauthenticate',
        summary: 'Prove it is you (password, or a second-factor code) before a sensitive action',
        description: 'The proof counts for ADMIN_REAUTH_WINDOW_MS (default 5 minutes). Throttled like the sign-in.',
        body: ProofBody,
        response: {
          200: dataOf(Type.Object({ proven_at: Type.String({ format: 'date-time' }), valid_until: Type.String({ format: 'date-time' }) }, strict)),
        },
      },
    },
    async (request) => {
      const admin = sessionAdmin(request);
      const body = request.body as typeof ProofBody.static;
      await throttle(request, admin.name);
      let method: string;
      if (body.password !== undefined) {
        if (!(await passwordMatches(db, admin.id, body.password))) {
          await recordSignInFailure(db, admin.name, request.ip, policy);
          await recordAudit(db, {
            actor: { kind: 'session', id: admin.id, name: admin.name },
            action: 'admin.reauthentication_failed',
            target: { type: 'admin', id: admin.id },
            clientIp: request.ip,
            details: { method: 'password' },
          });
          throw new ApiError('invalid_parameter', 'The password is wrong.', [{ param: 'password', message: 'is wrong' }]);
        }
        method = 'password';
      } else {
        try {
          const used = await verifySecondFactor(db, { adminUserId: admin.id, code: body.code!, nowMs: nowMs(request) });
          method = used.method;
          if (used.method === 'recovery_code') await auditRecoveryCodeUse(request, admin, used.recoveryCodesLeft ?? 0);
        } catch (error) {
          return codeFailed(request, admin, error, 'reauthentication');
        }
      }
      await clearSignInFailures(db, admin.name, request.ip);
      const now = nowMs(request);
      await markSessionProven(db, admin.sessionId!, now);
      request.audit = { target: { type: 'admin', id: admin.id }, details: { email: admin.name, method } };
      return { data: { proven_at: new Date(now).toISOString(), valid_until: new Date(now + config.ADMIN_REAUTH_WINDOW_MS).toISOString() } };
    },
  );

  app.delete(
    '/admins/:id/second-factor',
    {
      config: { permission: 'owner', audit: 'admin.second_factor_removed' },
      schema: {
        tags,
        operationId: 'removeAdminSecondFactor',
        summary: "Turn off an administrator's second factor (they lost their device and recovery codes)",
        params: IdParam,
        response: { 200: dataOf(AdminUserSchema) },
      },
    },
    async (request) => {
      requireFreshProof(request, "turning off an administrator's second factor");
      const id = (request.params as { id: string }).id;
      const user = await findMember(db, id);
      if (!user) throw new ApiError('not_found', `No administrator with id '${id}' in this store.`);
      await refuseWhenInOtherStores(db, user, 'turn off the second factor');
      const removed = await removeSecondFactor(db, id);
      // Her passkeys too (decision 0063): the lost device may be the one holding them.
      const passkeys = await removeAllPasskeys(db, id);
      request.audit = removed || passkeys > 0 ? { target: { type: 'admin', id }, details: { email: user.email, passkeys } } : { record: false };
      return { data: (await findMember(db, id))! };
    },
  );

  app.get(
    '/settings/security',
    {
      config: { permission: 'read' },
      schema: { tags, operationId: 'getSecuritySettings', summary: "The store's security settings", response: { 200: dataOf(SecuritySettings) } },
    },
    async () => ({
      data: { require_second_factor: await secondFactorRequired(db) },
    }),
  );

  app.patch(
    '/settings/security',
    {
      config: { permission: 'owner', audit: 'settings.second_factor_requirement_changed' },
      schema: {
        tags,
        operationId: 'updateSecuritySettings',
        summary: 'Require a second factor of every administrator (owner, signed in; asks for a fresh proof)',
        body: SettingsBody,
        response: { 200: dataOf(SecuritySettings) },
      },
    },
    async (request) => {
      const admin = request.admin!;
      if (admin.kind !== 'session') {
        throw new ApiError('forbidden', 'Only an owner signed in to the dashboard may change the security settings; API keys may not.');
      }
      requireFreshProof(request, 'changing the security settings');
      const { require_second_factor: required } = request.body as typeof SettingsBody.static;
      if (required && !admin.secondFactor) {
        throw new ApiError('conflict', 'Set up your own second factor before requiring one of every administrator.');
      }
      const before = await setSecondFactorRequired(db, { required, by: admin.name });
      request.audit = before === required ? { record: false } : { details: { require_second_factor: { from: before, to: required } } };
      return { data: { require_second_factor: required } };
    },
  );

  async function auditRecoveryCodeUse(request: FastifyRequest, admin: AdminPrincipal, left: number) {
    await recordAudit(db, {
      actor: { kind: 'session', id: admin.id, name: admin.name },
      action: 'admin.recovery_code_used',
      target: { type: 'admin', id: admin.id },
      clientIp: request.ip,
      details: { during: 'reauthentication', left },
    });
  }
}
