/**
 * Dashboard sign-in, at /admin/session (outside the admin API, whose every route needs a signed-in
 * caller):
 *   GET    /admin/session   who is signed in: { data: DashboardSession | null, setup_required } —
 *                           always 200, so a signed-out page load is no error
 *   POST   /admin/session   sign in with { email, password } and, for an administrator with a second
 *                           factor, { code } (6 digits or a recovery code): sets the session cookie;
 *                           401 unauthorized on wrong credentials, 401 second_factor_required when the
 *                           code is missing, 401 invalid_second_factor naming what was wrong with it,
 *                           429 with Retry-After when throttled (sign-in-throttle.ts, codes included);
 *                           instead of { code }, { passkey }: a passkey's answer to the options of
 *                           POST /admin/session/passkey/options (purpose second_factor), decision 0063
 *   DELETE /admin/session   sign out: needs the CSRF token when a live session is presented; 204
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../shared/problem.ts';
import { countAdminUsers, normalizeEmail, touchSignIn, verifyAdminCredentials } from '../sessions/admin-user.service.ts';
import { hasSecondFactor } from '../sessions/second-factor.service.ts';
import { csrfTokenMatches, deleteAdminSession, findAdminSession, touchAdminSession } from '../sessions/admin-session.service.ts';
import { clearSignInFailures } from '../sessions/sign-in-throttle.ts';
import { SESSION_TAGS, sessionBody, signInRoutes, startedSessionResponse } from './session-routes-kit.ts';
import { DashboardSession } from '../admin-responses.ts';
import { dashboardSessionSecurity } from '../admin-auth.ts';
import { Nullable } from '../../shared/typebox.ts';
import { recordAudit } from '../audit/audit-log.ts';
import { inStore } from '../../db/store-scope.ts';
import { inHomeStore } from '../../stores/store.service.ts';
import { CSRF_HEADER, SESSION_COOKIE, clearSessionCookie, sessionIdOf } from '../sessions/session-cookie.ts';
import { countPasskeys } from '../sessions/passkey.service.ts';
import { AssertionCredential } from './passkey.admin-routes.ts';
import { passkeySecondFactor } from './passkey-session.admin-routes.ts';

const SignInBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    code: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'For an administrator with a second factor: the 6-digit code, or a recovery code' }),
    ),
    passkey: Type.Optional(AssertionCredential),
  },
  { additionalProperties: false },
);

/** GET /admin/session's answer: the signed-in session, or null and whether nobody can sign in yet. */
const CurrentSession = Type.Object(
  {
    data: Nullable(DashboardSession),
    setup_required: Type.Boolean({ description: 'No administrator exists yet: the first is made with the setup link the server printed' }),
  },
  { additionalProperties: false, description: 'The session the request presents (its cookie), or null when it presents none that is live.' },
);

export async function sessionAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const signIn = signInRoutes(app);
  const tags = SESSION_TAGS;

  app.get(
    '/session',
    {
      schema: {
        tags,
        operationId: 'getDashboardSession',
        summary: 'The signed-in administrator, if any',
        // Anyone may ask; with the session cookie the answer is that session.
        security: [{}, dashboardSessionSecurity('GET')],
        response: { 200: CurrentSession },
      },
    },
    async (request) => {
      const sessionId = sessionIdOf(request);
      const session = sessionId ? await findAdminSession(db, sessionId) : undefined;
      if (session) {
        await touchAdminSession(db, session, request.ip);
        return { data: sessionBody(session), setup_required: false };
      }
      return { data: null, setup_required: (await countAdminUsers(db)) === 0 };
    },
  );

  app.post(
    '/session',
    {
      schema: {
        tags,
        operationId: 'signIn',
        summary: 'Sign in to the dashboard',
        description: 'The credentials are in the body; a session cookie the request carries is ended and replaced.',
        security: [],
        body: SignInBody,
        response: { 200: startedSessionResponse('Signed in: the session, and its cookie in Set-Cookie.') },
      },
    },
    async (request, reply) => {
      const body = request.body as typeof SignInBody.static;
      const email = normalizeEmail(body.email);
      await signIn.refuseWhileThrottled(request, email, 'failed sign-ins');
      const user = await verifyAdminCredentials(db, email, body.password, { touch: false });
      if (!user) {
        await signIn.failed(request, email);
        // The email typed is recorded (it may be nobody's); the password never is.
        // In the home store's log: the email may be nobody's (decision 0051).
        await inHomeStore(db, () =>
          recordAudit(db, {
            actor: { kind: 'anonymous', id: null, name: email },
            action: 'session.sign_in_failed',
            clientIp: request.ip,
            details: { email },
          }),
        );
        throw new ApiError('unauthorized', 'Wrong email or password.');
      }
      // Where single sign-on is required, a password opens a session only in the account's other
      // stores (or for a break-glass owner); none left: refused (decision 0062).
      const storeId = await signIn.localSignInStore(request, user, 'password');
      let secondFactorMethod: string | null = null;
      if (body.passkey !== undefined) {
        secondFactorMethod = await passkeySecondFactor(app, signIn, request, reply, { user, credential: body.passkey, throttleKey: email });
      } else if (await hasSecondFactor(db, user.id)) {
        secondFactorMethod = await signIn.checkSecondFactor(request, { user, code: body.code, param: 'code', during: 'sign_in', throttleKey: email });
      } else if ((await countPasskeys(db, user.id)) > 0) {
        throw new ApiError('second_factor_required', 'This administrator has a passkey as second factor: send its answer in `passkey`.', [
          { param: 'passkey', message: 'is required' },
        ]);
      }
      await touchSignIn(db, user.id);
      await clearSignInFailures(db, email, request.ip);
      const session = await signIn.replaceSession(request, reply, user, storeId, {
        message: 'administrator signed in',
        details: { second_factor: secondFactorMethod },
      });
      return { data: sessionBody(session) };
    },
  );

  app.delete(
    '/session',
    {
      schema: {
        tags,
        operationId: 'signOut',
        summary: 'Sign out of the dashboard',
        description: 'Without a live session there is nothing to end (204 all the same); with one, its CSRF token is needed.',
        security: [{}, dashboardSessionSecurity('DELETE')],
        response: {
          204: {
            type: 'null',
            description: 'Signed out: the session is ended and its cookie cleared.',
            headers: { 'Set-Cookie': { type: 'string', description: `Clears the cookie \`${SESSION_COOKIE}\` (expired, empty).` } },
          },
        },
      },
    },
    async (request, reply) => {
      const sessionId = sessionIdOf(request);
      const session = sessionId ? await findAdminSession(db, sessionId) : undefined;
      if (session) {
        // Without this check any site could sign an administrator out (a nuisance, not a breach).
        if (!csrfTokenMatches(request.headers[CSRF_HEADER], session.csrfToken)) {
          throw new ApiError('forbidden', `Missing or wrong CSRF token in the ${CSRF_HEADER} header.`);
        }
        await deleteAdminSession(db, sessionId!);
        await inStore(session.storeId, () =>
          recordAudit(db, {
            actor: { kind: 'session', id: session.adminUserId, name: session.email },
            action: 'session.signed_out',
            target: { type: 'admin', id: session.adminUserId },
            clientIp: request.ip,
          }),
        );
      }
      clearSessionCookie(reply, app.ctx.config);
      return reply.code(204).send();
    },
  );
}
