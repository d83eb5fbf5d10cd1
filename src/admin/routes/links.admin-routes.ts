/**
 * Using a one-time link an owner handed out (sessions/admin-links.service.ts), at /admin/links
 * (outside the admin API: the person opening it is not signed in):
 *   POST /admin/links/check  { code } → 200 { data: { purpose, email, role, expires_at,
 *                            second_factor } }, or a problem saying why not (404 unknown or
 *                            expired, 409 used)
 *   POST /admin/links/use    { code, password } → 200 { data: DashboardSession } and the session cookie:
 *                            an invitation creates the administrator, a reset sets the password
 *                            (every other session of theirs ends); the link is spent. A reset of
 *                            an administrator with a second factor (`second_factor: true`) needs
 *                            `second_factor_code` too, or `passkey` (the answer to options of
 *                            purpose second_factor) for an account with a passkey — required when
 *                            a passkey is its only second factor: 401 second_factor_required
 *                            without it, 401 invalid_second_factor for a bad one (counted like a
 *                            sign-in's); nothing is spent until it is right
 * Refusals count as failed sign-ins from that address (429 with Retry-After once the budget is
 * spent), like setup links. Uses are recorded in the audit log (admin.joined, admin.password_reset).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../shared/problem.ts';
import { SESSION_TAGS, sessionBody, signInRoutes, startedSessionResponse } from './session-routes-kit.ts';
import { dataOf } from '../admin-responses.ts';
import { ADMIN_ROLES } from '../sessions/admin-roles.ts';
import { Nullable, StringEnum } from '../../shared/typebox.ts';
import { LINK_MESSAGES, LINK_STATUS, LINK_THROTTLE_KEY, checkLink, useLink, type LinkState } from '../sessions/admin-links.service.ts';
import { findAdminUser, validateCredentials } from '../sessions/admin-user.service.ts';
import { hasSecondFactor } from '../sessions/second-factor.service.ts';
import type { AdminLink } from '../sessions/admin-links.service.ts';
import { countPasskeys } from '../sessions/passkey.service.ts';
import { AssertionCredential } from './passkey.admin-routes.ts';
import { passkeySecondFactor } from './passkey-session.admin-routes.ts';

const Code = Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_-]+$' });
const CheckBody = Type.Object({ code: Code }, { additionalProperties: false });
/** What a valid one-time link is for (POST /admin/links/check). */
const OneTimeLink = Type.Object(
  {
    purpose: StringEnum(['invitation', 'password_reset'] as const),
    email: Type.String(),
    role: Nullable(StringEnum(ADMIN_ROLES, { description: "An invitation's role in its store" })),
    expires_at: Type.String({ format: 'date-time' }),
    second_factor: Type.Boolean({ description: 'The account has a second factor: a reset needs it too (`second_factor_code`, or `passkey`)' }),
    authenticator_app: Type.Boolean({ description: 'The second factor includes an authenticator app: its code (or a recovery code) in `second_factor_code`' }),
    passkey: Type.Boolean({
      description:
        'The account has a passkey: its answer may be sent in `passkey` (options from POST /admin/session/passkey/options, purpose second_factor); without an app it must',
    }),
    existing_account: Type.Boolean({ description: 'An invitation of an email that has an account: its current password adds the store to it' }),
  },
  { title: 'OneTimeLink', additionalProperties: false },
);
const UseBody = Type.Object(
  {
    code: Code,
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    second_factor_code: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'A password reset of an administrator with a second factor: a 6-digit code or a recovery code' }),
    ),
    passkey: Type.Optional(AssertionCredential),
  },
  { additionalProperties: false },
);

export async function linkAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const signIn = signInRoutes(app);
  const tags = SESSION_TAGS;
  const throttle = (request: FastifyRequest) => signIn.refuseWhileThrottled(request, LINK_THROTTLE_KEY, 'attempts with invalid links');
  async function refuse(request: FastifyRequest, state: Exclude<LinkState, 'valid'>): Promise<never> {
    await signIn.failed(request, LINK_THROTTLE_KEY);
    throw new ApiError(LINK_STATUS[state], LINK_MESSAGES[state], [{ param: 'code', message: state }]);
  }

  /**
   * The account a link is for (a reset's, or an invitation's existing account) when it has a second
   * factor — an authenticator app, passkeys or both — else undefined.
   */
  async function secondFactorOf(link: AdminLink): Promise<{ id: string; email: string; app: boolean; passkeys: number } | undefined> {
    // A reset's administrator, or the existing account an invitation adds a store to (migration 0033).
    const user = await findAdminUser(db, link.email);
    if (!user) return undefined;
    const app = await hasSecondFactor(db, user.id);
    const passkeys = await countPasskeys(db, user.id);
    return app || passkeys > 0 ? { id: user.id, email: user.email, app, passkeys } : undefined;
  }

  /**
   * A reset link replaces the password, not the second factor (decisions 0028, 0063): an
   * administrator who has one gives it too — an app's code or a passkey's answer — checked, spent and
   * throttled like at the sign-in, before the link is. Without it a link would let whoever holds it
   * (the owner who issued it) into an account whose second factor is a passkey, and its other stores.
   */
  async function requireSecondFactor(request: FastifyRequest, reply: FastifyReply, body: typeof UseBody.static): Promise<void> {
    const { state, link } = await checkLink(db, body.code);
    if (state !== 'valid' || !link) return; // useLink refuses it
    const user = await secondFactorOf(link);
    if (!user) return;
    // A new password the reset would refuse is said first, before a code (a recovery code) is spent on it.
    validateCredentials(link.email, body.password);
    await signIn.refuseWhileThrottled(request, user.email, 'failed attempts');
    if (user.passkeys > 0 && (body.passkey !== undefined || !user.app)) {
      if (body.passkey === undefined)
        throw new ApiError('second_factor_required', "This administrator's second factor is a passkey: send its answer in `passkey`.", [
          { param: 'passkey', message: 'is required' },
        ]);
      await passkeySecondFactor(app, signIn, request, reply, { user, credential: body.passkey, throttleKey: user.email });
      return;
    }
    await signIn.checkSecondFactor(request, {
      user,
      code: body.second_factor_code,
      param: 'second_factor_code',
      during: 'password_reset',
      throttleKey: user.email,
    });
  }

  app.post(
    '/links/check',
    {
      schema: {
        tags,
        operationId: 'checkLink',
        summary: 'What a one-time invitation or password-reset link is for, if still valid',
        // No credential: the one-time code in the body is the proof.
        security: [],
        body: CheckBody,
        response: { 200: dataOf(OneTimeLink) },
      },
    },
    async (request) => {
      await throttle(request);
      const { state, link } = await checkLink(db, (request.body as typeof CheckBody.static).code);
      if (state !== 'valid' || !link) return refuse(request, state === 'valid' ? 'unknown' : state);
      const secondFactor = await secondFactorOf(link);
      return {
        data: {
          purpose: link.purpose,
          email: link.email,
          role: link.role,
          expires_at: link.expires_at,
          second_factor: secondFactor !== undefined,
          authenticator_app: secondFactor?.app ?? false,
          passkey: (secondFactor?.passkeys ?? 0) > 0,
          // An invitation of an email that has an account already: its current password adds the store to it.
          existing_account: link.purpose === 'invitation' && (await findAdminUser(db, link.email)) !== undefined,
        },
      };
    },
  );

  app.post(
    '/links/use',
    {
      schema: {
        tags,
        operationId: 'useLink',
        summary: 'Accept an invitation or reset a password with a one-time link',
        security: [],
        body: UseBody,
        response: { 200: startedSessionResponse('The link is spent and its administrator signed in: the session, and its cookie in Set-Cookie.') },
      },
    },
    async (request, reply) => {
      await throttle(request);
      const body = request.body as typeof UseBody.static;
      await requireSecondFactor(request, reply, body);
      let result: Awaited<ReturnType<typeof useLink>>;
      try {
        result = await useLink(db, { code: body.code, password: body.password });
      } catch (error) {
        // A wrong password of an existing account an invitation adds a store to: a failed sign-in.
        if (error instanceof ApiError && error.code === 'unauthorized') await signIn.failed(request, LINK_THROTTLE_KEY);
        throw error;
      }
      if (result.state !== 'valid') return refuse(request, result.state);
      const { user } = result;
      const storeId = result.storeId ?? undefined;
      // Recorded in the audit log of the store the link was issued in (a link from before stores had
      // none: the account's first store).
      await signIn.auditOwn(
        request,
        user,
        result.purpose === 'invitation' ? 'admin.joined' : 'admin.password_reset',
        { email: user.email, role: user.role },
        storeId,
      );
      const session = await signIn.startSession(request, reply, user.id, storeId);
      return { data: sessionBody(session) };
    },
  );
}
