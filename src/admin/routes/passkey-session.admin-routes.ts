/**
 * Signing in with a passkey (decision 0063), at /admin/session/passkey (outside the admin API):
 *   POST /admin/session/passkey/options   { purpose: sign_in | second_factor }: the options of
 *                                         navigator.credentials.get() (any passkey of this site: the
 *                                         browser offers its discoverable ones), the ceremony in an
 *                                         HttpOnly cookie; for `second_factor` the answer goes in
 *                                         POST /admin/session's `passkey` beside email and password
 *   POST /admin/session/passkey           { credential }: the browser's answer; a dashboard session
 *                                         (cookie) as a password sign-in gives, proven both factors
 * A refused answer is 401 unauthorized naming `credential` and why (no ceremony of this browser,
 * expired, unknown passkey, not verified, counter gone back); the ceremony is spent, the attempt
 * counted by the sign-in throttle (under `passkey@<address>`) and audited (admin.passkey_refused); nothing granted.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../shared/problem.ts';
import { recordAudit } from '../audit/audit-log.ts';
import { inHomeStore } from '../../stores/store.service.ts';
import { dataOf } from '../admin-responses.ts';
import { findAdminUserById } from '../sessions/admin-user.service.ts';
import { clearSignInFailures } from '../sessions/sign-in-throttle.ts';
import { PasskeyRefusal, finishAuthentication, startAuthentication } from '../sessions/passkey.service.ts';
import { clearPasskeyCeremonyCookie, passkeyCeremonyOf, setPasskeyCeremonyCookie } from '../sessions/session-cookie.ts';
import { SESSION_TAGS, sessionBody, signInRoutes, startedSessionResponse, type SignInKit } from './session-routes-kit.ts';
import { AssertionCredential, CeremonyOptions, asAssertion } from './passkey.admin-routes.ts';
import { StringEnum } from '../../shared/typebox.ts';

const strict = { additionalProperties: false } as const;
const OptionsBody = Type.Object(
  {
    purpose: StringEnum(['sign_in', 'second_factor'], {
      description: '`sign_in`: a passkey alone signs in; `second_factor`: the passkey answers the second-factor step of a password sign-in',
    }),
  },
  strict,
);
const PasskeySignInBody = Type.Object({ credential: AssertionCredential }, strict);

/** What audit entries of a usernameless passkey refusal name as the actor (no email is typed). */
const PASSKEY_ACTOR = 'passkey';

/**
 * What the sign-in throttle counts refused usernameless passkey answers under: the address (no
 * email is typed). One shared key would let anyone lock every administrator out of passkey sign-in
 * with a few bad answers (the throttle's per-email budget spans addresses).
 */
const passkeyThrottleKey = (request: FastifyRequest) => `passkey@${request.ip}`;

/** Audits a refused passkey answer: in the log of the account's store when it is known, else the home store's. */
export async function auditPasskeyRefusal(
  app: FastifyInstance,
  request: FastifyRequest,
  refusal: PasskeyRefusal,
  during: string,
  who: { id: string | null; email: string | null; audit?: (details: Record<string, unknown>) => Promise<void> },
): Promise<void> {
  const details = { during, reason: refusal.reason };
  if (who.audit) await who.audit(details);
  else {
    const { db } = app.ctx.database;
    await inHomeStore(db, () =>
      recordAudit(db, {
        actor: { kind: 'anonymous', id: null, name: who.email ?? PASSKEY_ACTOR },
        action: 'admin.passkey_refused',
        target: who.id ? { type: 'admin', id: who.id } : undefined,
        clientIp: request.ip,
        details,
      }),
    );
  }
  request.log.warn({ reason: refusal.reason, during }, 'passkey refused');
}

/**
 * Checks a passkey's answer at the second-factor step of a password sign-in: the ceremony of this
 * browser (purpose second_factor), a passkey of `user`. A refusal counts as a failed attempt of
 * `throttleKey`, is audited and answered 401 invalid_second_factor naming `passkey`. Returns the
 * method that passed.
 */
export async function passkeySecondFactor(
  app: FastifyInstance,
  signIn: SignInKit,
  request: FastifyRequest,
  reply: FastifyReply,
  check: { user: { id: string; email: string }; credential: typeof AssertionCredential.static; throttleKey: string },
): Promise<'passkey'> {
  const { db } = app.ctx.database;
  clearPasskeyCeremonyCookie(reply, app.ctx.config);
  try {
    await finishAuthentication(db, app.ctx.config, {
      purpose: 'second_factor',
      cookie: passkeyCeremonyOf(request),
      response: asAssertion(check.credential),
      nowMs: (app.ctx.now ?? Date.now)(),
      adminUserId: check.user.id,
    });
    return 'passkey';
  } catch (error) {
    if (!(error instanceof PasskeyRefusal)) throw error;
    await signIn.failed(request, check.throttleKey);
    await auditPasskeyRefusal(app, request, error, 'sign_in', {
      id: check.user.id,
      email: check.user.email,
      audit: (details) => signIn.auditOwn(request, check.user, 'admin.passkey_refused', details),
    });
    throw new ApiError('invalid_second_factor', error.message, [{ param: 'passkey', message: error.reason.replace(/_/g, ' ') }]);
  }
}

export async function passkeySessionRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const signIn = signInRoutes(app);
  const tags = SESSION_TAGS;
  const now = () => (app.ctx.now ?? Date.now)();

  app.post(
    '/session/passkey/options',
    {
      schema: {
        tags,
        operationId: 'startPasskeySignIn',
        summary: 'Start signing in with a passkey: the options for navigator.credentials.get()',
        description:
          'The challenge is kept server-side for ADMIN_PASSKEY_CHALLENGE_TTL_MS, bound to this browser by an HttpOnly cookie (`store_admin_passkey`), for one answer.',
        security: [],
        body: OptionsBody,
        response: { 200: dataOf(CeremonyOptions) },
      },
    },
    async (request, reply) => {
      const { purpose } = request.body as { purpose: 'sign_in' | 'second_factor' };
      const { options, ceremony } = await startAuthentication(db, config, { purpose, nowMs: now(), previous: passkeyCeremonyOf(request) });
      setPasskeyCeremonyCookie(reply, config, ceremony);
      return { data: options };
    },
  );

  app.post(
    '/session/passkey',
    {
      schema: {
        tags,
        operationId: 'signInWithPasskey',
        summary: 'Sign in with a passkey (usernameless): the browser answer to the options',
        description:
          'User verification is required, so the passkey proves both factors: no password or code is asked. A session cookie the request carries is ended and replaced.',
        security: [],
        body: PasskeySignInBody,
        response: { 200: startedSessionResponse('Signed in: the session, and its cookie in Set-Cookie.') },
      },
    },
    async (request, reply) => {
      const { credential } = request.body as typeof PasskeySignInBody.static;
      await signIn.refuseWhileThrottled(request, passkeyThrottleKey(request), 'refused passkeys');
      clearPasskeyCeremonyCookie(reply, config);
      let passed: Awaited<ReturnType<typeof finishAuthentication>>;
      try {
        passed = await finishAuthentication(db, config, {
          purpose: 'sign_in',
          cookie: passkeyCeremonyOf(request),
          response: asAssertion(credential),
          nowMs: now(),
        });
      } catch (error) {
        if (!(error instanceof PasskeyRefusal)) throw error;
        await signIn.failed(request, passkeyThrottleKey(request));
        await auditPasskeyRefusal(app, request, error, 'sign_in', { id: null, email: null });
        throw new ApiError('unauthorized', error.message, [{ param: 'credential', message: error.reason.replace(/_/g, ' ') }]);
      }
      const user = await findAdminUserById(db, passed.adminUserId);
      if (!user) throw new ApiError('unauthorized', 'This account no longer exists.');
      // A passkey is a credential of this service, as a password is: where single sign-on is
      // required it opens a session only in the account's other stores (decision 0062).
      const storeId = await signIn.localSignInStore(request, user, 'passkey');
      await clearSignInFailures(db, passkeyThrottleKey(request), request.ip);
      const session = await signIn.replaceSession(request, reply, user, storeId, {
        message: 'administrator signed in with a passkey',
        details: { method: 'passkey', passkey: { id: passed.passkeyId, name: passed.name } },
      });
      return { data: sessionBody(session) };
    },
  );
}
