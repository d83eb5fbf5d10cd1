/**
 * What the dashboard's sign-in routes share (session, setup, one-time links): their OpenAPI tag,
 * answers never cached, the sign-in throttle (sessions/sign-in-throttle.ts) with its 429, and the
 * session a successful one starts (its cookie set on the answer).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../shared/problem.ts';
import { recordSignInFailure, signInRetryAfterMs, type ThrottlePolicy } from '../sessions/sign-in-throttle.ts';
import { createAdminSession } from '../sessions/admin-session.service.ts';
import { setSessionCookie } from '../sessions/session-cookie.ts';

export const SESSION_TAGS = ['Admin: dashboard session'];

export interface SignInKit {
  readonly policy: ThrottlePolicy;
  /** 429 rate_limited with Retry-After while `key` is throttled for the request's address; `what` names the attempts. */
  refuseWhileThrottled(request: FastifyRequest, key: string, what: string): Promise<void>;
  /** Counts a failed attempt of `key` from the request's address. */
  failed(request: FastifyRequest, key: string): Promise<void>;
  /**
   * Starts a session for the administrator and sets its cookie on `reply`. It counts as a fresh
   * proof (a sign-in, or a password set just now): the most sensitive actions need no second one for
   * a few minutes.
   */
  startSession(request: FastifyRequest, reply: FastifyReply, adminUserId: string): Promise<Awaited<ReturnType<typeof createAdminSession>>['session']>;
}

/** Sets up a plugin of sign-in routes: `Cache-Control: no-store` on every answer, and its throttle. */
export function signInRoutes(app: FastifyInstance): SignInKit {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const policy: ThrottlePolicy = { maxFailures: config.ADMIN_SIGN_IN_MAX_FAILURES, windowMs: config.ADMIN_SIGN_IN_WINDOW_MS };
  app.addHook('onSend', async (_request, reply) => {
    reply.header('Cache-Control', 'no-store');
  });
  return {
    policy,
    async refuseWhileThrottled(request, key, what) {
      const waitMs = await signInRetryAfterMs(db, key, request.ip, policy);
      if (waitMs <= 0) return;
      const seconds = Math.ceil(waitMs / 1000);
      throw new ApiError('rate_limited', `Too many ${what}. Try again in ${seconds} seconds.`, undefined, { 'Retry-After': String(seconds) });
    },
    async failed(request, key) {
      await recordSignInFailure(db, key, request.ip, policy);
    },
    async startSession(request, reply, adminUserId) {
      const { sessionId, session } = await createAdminSession(db, {
        adminUserId,
        ttlMs: config.ADMIN_SESSION_TTL_MS,
        userAgent: request.headers['user-agent'],
        provenAtMs: (app.ctx.now ?? Date.now)(),
      });
      setSessionCookie(reply, config, sessionId);
      return session;
    },
  };
}
