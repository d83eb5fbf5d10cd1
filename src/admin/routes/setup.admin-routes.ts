/**
 * Creating the first administrator from the dashboard with the one-time setup code the server
 * printed at start (sessions/setup-code.service.ts), at /admin/setup (outside the admin API: there
 * is nobody to sign in yet):
 *   POST /admin/setup/check   { code } → 200 { data: { valid: true } }, or a problem saying why not
 *   POST /admin/setup         { code, email, password } → 201 { data: DashboardSession } and the session
 *                             cookie, as a sign-in would; the code is spent
 * A wrong or expired code is a 404 problem, a used one (or any once an administrator exists) a 409,
 * each with a message the page shows as is; each counts as a failed sign-in from that address
 * (429 with Retry-After once the budget is spent).
 * Like sign-in, these take JSON only: a cross-site form cannot send it without a CORS preflight.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError, type ErrorCode } from '../../shared/problem.ts';
import { SESSION_TAGS, sessionBody, signInRoutes, startedSessionResponse } from './session-routes-kit.ts';
import { dataOf } from '../admin-responses.ts';
import { SETUP_CODE_MESSAGES, SETUP_THROTTLE_KEY, checkSetupCode, completeSetup, type SetupCodeState } from '../sessions/setup-code.service.ts';

const Code = Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_-]+$' });
const CheckBody = Type.Object({ code: Code }, { additionalProperties: false });
const ValidCode = dataOf(Type.Object({ valid: Type.Literal(true) }, { additionalProperties: false }));
const SetupBody = Type.Object(
  {
    code: Code,
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
  },
  { additionalProperties: false },
);

/** The problem code of each refusal. */
const STATUS: Record<Exclude<SetupCodeState, 'valid'>, ErrorCode> = {
  unknown: 'not_found',
  expired: 'not_found',
  used: 'conflict',
  administrator_exists: 'conflict',
};

export async function setupAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const signIn = signInRoutes(app);
  const tags = SESSION_TAGS;
  const throttle = (request: FastifyRequest) => signIn.refuseWhileThrottled(request, SETUP_THROTTLE_KEY, 'attempts with setup links');
  async function refuse(request: FastifyRequest, state: Exclude<SetupCodeState, 'valid'>): Promise<never> {
    await signIn.failed(request, SETUP_THROTTLE_KEY);
    request.log.warn({ setup_code: state }, 'setup link refused');
    throw new ApiError(STATUS[state], SETUP_CODE_MESSAGES[state], [{ param: 'code', message: state }]);
  }

  // No credential: the one-time code in the body is the proof (security: []).
  app.post(
    '/setup/check',
    {
      schema: {
        tags,
        operationId: 'checkSetupCode',
        summary: 'Whether a first-administrator setup code is still valid',
        security: [],
        body: CheckBody,
        response: { 200: ValidCode },
      },
    },
    async (request) => {
      await throttle(request);
      const { code } = request.body as typeof CheckBody.static;
      const state = await checkSetupCode(db, code);
      if (state !== 'valid') return refuse(request, state);
      return { data: { valid: true } };
    },
  );

  app.post(
    '/setup',
    {
      schema: {
        tags,
        operationId: 'completeSetup',
        summary: 'Create the first administrator with a setup code',
        security: [],
        body: SetupBody,
        response: { 201: startedSessionResponse('The administrator is created and signed in: the session, and its cookie in Set-Cookie.') },
      },
    },
    async (request, reply) => {
      await throttle(request);
      const body = request.body as typeof SetupBody.static;
      let result: Awaited<ReturnType<typeof completeSetup>>;
      try {
        result = await completeSetup(db, body);
      } catch (error) {
        // A wrong password of the existing account a store's setup link would make its owner: a failed sign-in.
        if (error instanceof ApiError && error.code === 'unauthorized') await signIn.failed(request, SETUP_THROTTLE_KEY);
        throw error;
      }
      if (result.state !== 'valid') return refuse(request, result.state);
      const { user, storeId } = result;
      const session = await signIn.startSession(request, reply, user.id, storeId);
      request.log.info({ admin: user.email, store: session.storeId }, 'first administrator created with the setup link');
      // Recorded in the audit log of the store it set up.
      await signIn.auditOwn(request, user, 'setup.completed', { email: user.email, role: user.role }, session.storeId);
      return reply.code(201).send({ data: sessionBody(session) });
    },
  );
}
