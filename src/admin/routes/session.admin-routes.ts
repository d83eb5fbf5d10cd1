/**
 * Dashboard sign-in, at /admin/session (outside the admin API, whose every route needs a signed-in
 * caller):
 *   GET    /admin/session   who is signed in: { data: { email, role, csrf_token, expires_at } | null,
 *                           setup_required } — always 200, so a signed-out page load is no error
 *   POST   /admin/session   sign in with { email, password }: sets the session cookie; 401 on wrong
 *                           credentials, 429 with Retry-After when throttled (sign-in-throttle.ts)
 *   DELETE /admin/session   sign out: needs the CSRF token when a live session is presented; 204
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../shared/problem.ts';
import { countAdminUsers, normalizeEmail, verifyAdminCredentials } from '../sessions/admin-user.service.ts';
import { createAdminSession, csrfTokenMatches, deleteAdminSession, findAdminSession, type AdminSession } from '../sessions/admin-session.service.ts';
import { clearSignInFailures, recordSignInFailure, signInRetryAfterMs } from '../sessions/sign-in-throttle.ts';
import { recordAudit } from '../audit/audit-log.ts';
import { CSRF_HEADER, clearSessionCookie, sessionIdOf, setSessionCookie } from '../sessions/session-cookie.ts';

const SignInBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
  },
  { additionalProperties: false },
);

function sessionBody(session: AdminSession) {
  return { email: session.email, role: session.role, csrf_token: session.csrfToken, expires_at: session.expiresAt };
}

export async function sessionAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const policy = { maxFailures: config.ADMIN_SIGN_IN_MAX_FAILURES, windowMs: config.ADMIN_SIGN_IN_WINDOW_MS };
  const tags = ['Admin: dashboard session'];

  app.addHook('onSend', async (_request, reply) => {
    reply.header('Cache-Control', 'no-store');
  });

  app.get('/session', { schema: { tags, summary: 'The signed-in administrator, if any' } }, async (request) => {
    const sessionId = sessionIdOf(request);
    const session = sessionId ? await findAdminSession(db, sessionId) : undefined;
    if (session) return { data: sessionBody(session), setup_required: false };
    return { data: null, setup_required: (await countAdminUsers(db)) === 0 };
  });

  app.post('/session', { schema: { tags, summary: 'Sign in to the dashboard', body: SignInBody } }, async (request, reply) => {
    const body = request.body as typeof SignInBody.static;
    const email = normalizeEmail(body.email);
    const waitMs = await signInRetryAfterMs(db, email, request.ip, policy);
    if (waitMs > 0) {
      const seconds = Math.ceil(waitMs / 1000);
      throw new ApiError('rate_limited', `Too many failed sign-ins. Try again in ${seconds} seconds.`, undefined, { 'Retry-After': String(seconds) });
    }
    const user = await verifyAdminCredentials(db, email, body.password);
    if (!user) {
      await recordSignInFailure(db, email, request.ip, policy);
      // The email typed is recorded (it may be nobody's); the password never is.
      await recordAudit(db, {
        actor: { kind: 'anonymous', id: null, name: email },
        action: 'session.sign_in_failed',
        clientIp: request.ip,
        details: { email },
      });
      throw new ApiError('unauthorized', 'Wrong email or password.');
    }
    await clearSignInFailures(db, email, request.ip);
    const previous = sessionIdOf(request);
    if (previous) await deleteAdminSession(db, previous);
    const { sessionId, session } = await createAdminSession(db, {
      adminUserId: user.id,
      ttlMs: config.ADMIN_SESSION_TTL_MS,
      userAgent: request.headers['user-agent'],
    });
    setSessionCookie(reply, config, sessionId);
    request.log.info({ admin: user.email }, 'administrator signed in');
    await recordAudit(db, {
      actor: { kind: 'session', id: user.id, name: user.email },
      action: 'session.signed_in',
      target: { type: 'admin', id: user.id },
      clientIp: request.ip,
      details: { user_agent: request.headers['user-agent']?.slice(0, 300) ?? null },
    });
    return { data: sessionBody(session) };
  });

  app.delete('/session', { schema: { tags, summary: 'Sign out of the dashboard' } }, async (request, reply) => {
    const sessionId = sessionIdOf(request);
    const session = sessionId ? await findAdminSession(db, sessionId) : undefined;
    if (session) {
      // Without this check any site could sign an administrator out (a nuisance, not a breach).
      if (!csrfTokenMatches(request.headers[CSRF_HEADER], session.csrfToken)) {
        throw new ApiError('forbidden', `Missing or wrong CSRF token in the ${CSRF_HEADER} header.`);
      }
      await deleteAdminSession(db, sessionId!);
      await recordAudit(db, {
        actor: { kind: 'session', id: session.adminUserId, name: session.email },
        action: 'session.signed_out',
        target: { type: 'admin', id: session.adminUserId },
        clientIp: request.ip,
      });
    }
    clearSessionCookie(reply, config);
    return reply.code(204).send();
  });
}
