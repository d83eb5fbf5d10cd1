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
import { SESSION_TAGS, signInRoutes } from './session-routes-kit.ts';
import { LINK_MESSAGES, LINK_STATUS, LINK_THROTTLE_KEY, checkLink, useLink, type LinkState } from '../sessions/admin-links.service.ts';
import { recordAudit } from '../audit/audit-log.ts';

const Code = Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_-]+$' });
const CheckBody = Type.Object({ code: Code }, { additionalProperties: false });
const UseBody = Type.Object({ code: Code, password: Type.String({ minLength: 1, maxLength: 1024 }) }, { additionalProperties: false });

export async function linkAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const signIn = signInRoutes(app);
  const tags = SESSION_TAGS;
  const throttle = (request: FastifyRequest) => signIn.refuseWhileThrottled(request, LINK_THROTTLE_KEY, 'attempts with invalid links');
  async function refuse(request: FastifyRequest, state: Exclude<LinkState, 'valid'>): Promise<never> {
    await signIn.failed(request, LINK_THROTTLE_KEY);
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
      const session = await signIn.startSession(request, reply, user.id);
      return { data: { email: session.email, role: session.role, csrf_token: session.csrfToken, expires_at: session.expiresAt } };
    },
  );
}
