/**
 * What the dashboard's sign-in routes share (session, setup, one-time links): their OpenAPI tag,
 * answers never cached, the sign-in throttle (sessions/sign-in-throttle.ts) with its 429, and the
 * session a successful one starts (its cookie set on the answer).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../shared/problem.ts';
import { recordSignInFailure, signInRetryAfterMs, type ThrottlePolicy } from '../sessions/sign-in-throttle.ts';
import { createAdminSession, deleteAdminSession, type AdminSession } from '../sessions/admin-session.service.ts';
import { SESSION_COOKIE, SESSION_COOKIE_PATH, sessionIdOf, setSessionCookie } from '../sessions/session-cookie.ts';
import { DashboardSession, dataOf } from '../admin-responses.ts';
import { verifySecondFactor } from '../sessions/second-factor.service.ts';
import { recordAudit, type AuditAction } from '../audit/audit-log.ts';
import { accountStores } from '../sessions/admin-user.service.ts';
import { inStore } from '../../db/store-scope.ts';
import { inHomeStore } from '../../stores/store.service.ts';
import { SSO_REQUIRED_MESSAGE, storesRequiringSso } from '../sessions/sso.service.ts';

export const SESSION_TAGS = ['Admin: dashboard session'];

/** A session as the sign-in routes answer it (`DashboardSession`). */
export function sessionBody(session: AdminSession): typeof DashboardSession.static {
  return {
    email: session.email,
    role: session.role,
    csrf_token: session.csrfToken,
    expires_at: session.expiresAt,
    // The dashboard sends an administrator the store requires it of to set one up first.
    second_factor: { enabled: session.secondFactor, required: session.secondFactorRequired },
    // The store the session acts in (the switcher, POST /admin/api/v1/session/store, changes it).
    store: { id: session.storeId, name: session.storeName, status: session.storeStatus },
  };
}

/** The answer of a route that starts a session: `{ data: DashboardSession }`, and the cookie in Set-Cookie. */
export function startedSessionResponse(description: string) {
  return {
    ...dataOf(DashboardSession),
    description,
    headers: {
      'Set-Cookie': {
        type: 'string',
        description: `The session cookie: \`${SESSION_COOKIE}=…; Path=${SESSION_COOKIE_PATH}; HttpOnly; SameSite=Lax\` (Secure when COOKIE_SECURE), sent back by the browser on every /admin request.`,
      },
    },
  };
}

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
  startSession(
    request: FastifyRequest,
    reply: FastifyReply,
    adminUserId: string,
    /** The store it acts in; default: the account's first (the home store first). */
    storeId?: string,
  ): Promise<Awaited<ReturnType<typeof createAdminSession>>['session']>;
  /**
   * A sign-in's end, whatever proved it (password, passkey, SSO): the browser's previous session
   * (if any) deleted, a new one started in `storeId` (startSession), the sign-in logged with
   * `message` and audited as `session.signed_in` with the browser's user agent and `details`, in the
   * log of the store the session acts in.
   */
  replaceSession(
    request: FastifyRequest,
    reply: FastifyReply,
    user: { id: string; email: string },
    storeId: string | undefined,
    signedIn: { message: string; details: Record<string, unknown> },
  ): Promise<Awaited<ReturnType<typeof createAdminSession>>['session']>;
  /**
   * The store a session signed in with a credential of this service (a password or a passkey) may
   * act in: where single sign-on is required, only the account's other stores (or any, for a
   * break-glass owner); undefined when none requires it (the default store). None left: refused
   * 403 with an audit entry (decision 0062).
   */
  localSignInStore(request: FastifyRequest, user: { id: string; email: string }, method: 'password' | 'passkey'): Promise<string | undefined>;
  /**
   * Checks the second-factor `code` of an administrator who has one (sign-in, password reset):
   * 401 second_factor_required naming `param` when it is missing (nothing counted); a wrong code
   * counts as a failed attempt of `throttleKey` and is audited; a recovery code used is audited.
   * Returns the method that passed.
   */
  checkSecondFactor(
    request: FastifyRequest,
    check: { user: { id: string; email: string }; code: string | undefined; param: string; during: string; throttleKey: string },
  ): Promise<string>;
  /**
   * Records what the administrator just did to her own account (signed in, set up, joined, reset
   * her password, used a recovery code) in the audit log: by her session, on her, from the
   * request's address, in the log of `storeId` (default: the account's first store, the home store first).
   */
  auditOwn(
    request: FastifyRequest,
    user: { id: string; email: string },
    action: AuditAction,
    details: Record<string, unknown>,
    storeId?: string,
  ): Promise<void>;
}

/** Sets up a plugin of sign-in routes: `Cache-Control: no-store` on every answer, and its throttle. */
export function signInRoutes(app: FastifyInstance): SignInKit {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const policy: ThrottlePolicy = { maxFailures: config.ADMIN_SIGN_IN_MAX_FAILURES, windowMs: config.ADMIN_SIGN_IN_WINDOW_MS };
  app.addHook('onSend', async (_request, reply) => {
    reply.header('Cache-Control', 'no-store');
  });
  /** Runs `fn` in the account's first store (the home store first; else the home store): where its audit entries go. */
  const inAccountStore = async <T>(adminUserId: string, fn: () => Promise<T>): Promise<T> => {
    const [first] = await accountStores(db, adminUserId);
    return first ? inStore(first.id, fn) : inHomeStore(db, fn);
  };
  const auditOwn: SignInKit['auditOwn'] = async (request, user, action, details, storeId) => {
    const write = () =>
      recordAudit(db, {
        actor: { kind: 'session', id: user.id, name: user.email },
        action,
        target: { type: 'admin', id: user.id },
        clientIp: request.ip,
        details,
      });
    await (storeId === undefined ? inAccountStore(user.id, write) : inStore(storeId, write));
  };
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
    async checkSecondFactor(request, { user, code, param, during, throttleKey }) {
      if (code === undefined || code.trim() === '') {
        throw new ApiError(
          'second_factor_required',
          `This administrator has a second factor: send the 6-digit code of the authenticator app (or a recovery code) in \`${param}\`.`,
          [{ param, message: 'is required' }],
        );
      }
      try {
        const used = await verifySecondFactor(db, { adminUserId: user.id, code, nowMs: (app.ctx.now ?? Date.now)() });
        if (used.method === 'recovery_code') await auditOwn(request, user, 'admin.recovery_code_used', { during, left: used.recoveryCodesLeft ?? 0 });
        return used.method;
      } catch (error) {
        if (error instanceof ApiError && error.code === 'invalid_second_factor') {
          const reason = error.errors?.[0]?.message ?? 'wrong';
          await recordSignInFailure(db, throttleKey, request.ip, policy);
          await inAccountStore(user.id, () =>
            recordAudit(db, {
              actor: { kind: 'anonymous', id: null, name: throttleKey },
              action: 'admin.second_factor_failed',
              target: { type: 'admin', id: user.id },
              clientIp: request.ip,
              details: { during, reason },
            }),
          );
          request.log.warn({ admin: user.email, reason, during }, 'second-factor code refused');
        }
        throw error;
      }
    },
    auditOwn,
    async localSignInStore(request, user, method) {
      const ssoOnly = await storesRequiringSso(db, user.id);
      if (ssoOnly.size === 0) return undefined;
      const storeId = (await accountStores(db, user.id)).find((store) => !ssoOnly.has(store.id))?.id;
      if (storeId !== undefined) return storeId;
      await inHomeStore(db, () =>
        recordAudit(db, {
          actor: { kind: 'anonymous', id: null, name: user.email },
          action: 'session.sign_in_failed',
          clientIp: request.ip,
          details: { email: user.email, reason: 'sso_required', method },
        }),
      );
      throw new ApiError('forbidden', SSO_REQUIRED_MESSAGE);
    },
    async replaceSession(request, reply, user, storeId, signedIn) {
      const previous = sessionIdOf(request);
      if (previous) await deleteAdminSession(db, previous);
      const session = await this.startSession(request, reply, user.id, storeId);
      request.log.info({ admin: user.email, store: session.storeId, role: session.role }, signedIn.message);
      await this.auditOwn(
        request,
        user,
        'session.signed_in',
        { user_agent: request.headers['user-agent']?.slice(0, 300) ?? null, ...signedIn.details },
        session.storeId,
      );
      return session;
    },
    async startSession(request, reply, adminUserId, storeId) {
      const { sessionId, session } = await createAdminSession(db, {
        adminUserId,
        storeId,
        ttlMs: config.ADMIN_SESSION_TTL_MS,
        userAgent: request.headers['user-agent'],
        clientIp: request.ip,
        provenAtMs: (app.ctx.now ?? Date.now)(),
      });
      setSessionCookie(reply, config, sessionId);
      return session;
    },
  };
}
