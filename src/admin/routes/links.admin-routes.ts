/**
 * Using a one-time link an owner handed out (sessions/admin-links.service.ts), at /admin/links
 * (outside the admin API: the person opening it is not signed in):
 *   POST /admin/links/check  { code } → 200 { data: { purpose, email, role, expires_at } }, or a
 *                            problem saying why not (404 unknown or expired, 409 used)
 *   POST /admin/links/use    { code, password } → 200 { data: session } and the session cookie:
 *                            an invitation creates the administrator, a reset sets the password
 *                            (every other session of theirs ends); the link is spent
 * Refusals count as failed sign-ins from that address (429 with Retry-After once the budget is
 * spent), like setup links. Uses are recorded in the audit log (admin.joined, admin.password_reset).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../shared/problem.ts';
import { createAdminSession } from '../sessions/admin-session.service.ts';
import { recordSignInFailure, signInRetryAfterMs } from '../sessions/sign-in-throttle.ts';
import { setSessionCookie } from '../sessions/session-cookie.ts';
import { LINK_MESSAGES, LINK_STATUS, LINK_THROTTLE_KEY, checkLink, useLink, type LinkState } from '../sessions/admin-links.service.ts';
import { recordAudit } from '../audit/audit-log.ts';

const Code = Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_-]+$' });
const CheckBody = Type.Object({ code: Code }, { additionalProperties: false });
const UseBody = Type.Object({ code: Code, password: Type.String({ minLength: 1, maxLength: 1024 }) }, { additionalProperties: false });

export async function linkAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const policy = { maxFailures: config.ADMIN_SIGN_IN_MAX_FAILURES, windowMs: config.ADMIN_SIGN_IN_WINDOW_MS };
  const tags = ['Admin: dashboard session'];

  app.addHook('onSend', async (_request, reply) => {
    reply.header('Cache-Control', 'no-store');
  });

  async function throttle(request: FastifyRequest): Promise<void> {
    const waitMs = await signInRetryAfterMs(db, LINK_THROTTLE_KEY, request.ip, policy);
    if (waitMs > 0) {
      const seconds = Math.ceil(waitMs / 1000);
      throw new ApiError('rate_limited', `Too many attempts with invalid links. Try again in ${seconds} seconds.`, undefined, {
        'Retry-After': String(seconds),
      });
    }
  }
  async function refuse(request: FastifyRequest, state: Exclude<LinkState, 'valid'>): Promise<never> {
    await recordSignInFailure(db, LINK_THROTTLE_KEY, request.ip, policy);
    throw new ApiError(LINK_STATUS[state], LINK_MESSAGES[state], [{ param: 'code', message: state }]);
  }

  app.post(
    '/links/check',
    { schema: { tags, summary: 'What a one-time invitation or password-reset link is for, if still valid', body: CheckBody } },
    async (request) => {
      await throttle(request);
      const { state, link } = await checkLink(db, (request.body as typeof CheckBody.static).code);
      if (state !== 'valid' || !link) return refuse(request, state === 'valid' ? 'unknown' : state);
      return { data: { purpose: link.purpose, email: link.email, role: link.role, expires_at: link.expires_at } };
    },
  );

  app.post(
    '/links/use',
    { schema: { tags, summary: 'Accept an invitation or reset a password with a one-time link', body: UseBody } },
    async (request, reply) => {
      await throttle(request);
      const body = request.body as typeof UseBody.static;
      const result = await useLink(db, body);
      if (result.state !== 'valid') return refuse(request, result.state);
      const { user } = result;
      await recordAudit(db, {
        actor: { kind: 'session', id: user.id, name: user.email },
        action: result.purpose === 'invitation' ? 'admin.joined' : 'admin.password_reset',
        target: { type: 'admin', id: user.id },
        clientIp: request.ip,
        details: { email: user.email, role: user.role },
      });
      const { sessionId, session } = await createAdminSession(db, {
        adminUserId: user.id,
        ttlMs: config.ADMIN_SESSION_TTL_MS,
        userAgent: request.headers['user-agent'],
        // The password was set just now: as good a proof as a sign-in.
        provenAtMs: (app.ctx.now ?? Date.now)(),
      });
      setSessionCookie(reply, config, sessionId);
      return { data: { email: session.email, role: session.role, csrf_token: session.csrfToken, expires_at: session.expiresAt } };
    },
  );
}
