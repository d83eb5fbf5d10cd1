/**
 * The dashboard session cookie: HttpOnly (scripts never see it), SameSite=Lax (not sent on
 * cross-site subrequests), Path=/admin (not sent to the read API), Secure when COOKIE_SECURE.
 * Needs @fastify/cookie, registered by the dashboard plugin before the admin API.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type {} from '@fastify/cookie';
import type { Config } from '../../config/config.ts';

export const SESSION_COOKIE = 'store_admin_session';
export const SESSION_COOKIE_PATH = '/admin';
/** Header in which the dashboard returns its session's CSRF token on state-changing requests. */
export const CSRF_HEADER = 'x-csrf-token';

/**
 * The OpenAPI security schemes of a dashboard session (`components.securitySchemes`): the cookie,
 * and the CSRF header its state-changing requests add, named together in one security requirement
 * (admin-auth.ts, `dashboardSessionSecurity`).
 */
export const SESSION_SECURITY_SCHEMES = {
  dashboardSession: {
    type: 'apiKey',
    in: 'cookie',
    name: SESSION_COOKIE,
    description:
      "The dashboard's session: the HttpOnly cookie a sign-in sets (POST /admin/session, or a setup or one-time link), sent by the browser to /admin paths only.",
  },
  csrfToken: {
    type: 'apiKey',
    in: 'header',
    name: 'X-CSRF-Token',
    description:
      "The session's CSRF token (`csrf_token` of the sign-in's answer and of GET /admin/session): a request made with the session cookie that changes something (any method but GET, HEAD, OPTIONS) must carry it, else 403.",
  },
} as const;

/** The session id the request presents, if any. */
export function sessionIdOf(request: FastifyRequest): string | undefined {
  return request.cookies?.[SESSION_COOKIE] || undefined;
}

export function setSessionCookie(reply: FastifyReply, config: Config, sessionId: string): void {
  reply.setCookie(SESSION_COOKIE, sessionId, {
    path: SESSION_COOKIE_PATH,
    httpOnly: true,
    sameSite: 'lax',
    secure: config.COOKIE_SECURE,
    maxAge: Math.floor(config.ADMIN_SESSION_TTL_MS / 1000),
  });
}

export function clearSessionCookie(reply: FastifyReply, config: Config): void {
  reply.clearCookie(SESSION_COOKIE, { path: SESSION_COOKIE_PATH, httpOnly: true, sameSite: 'lax', secure: config.COOKIE_SECURE });
}

/** The cookie naming a passkey ceremony under way in this browser (passkey.service.ts): HttpOnly, /admin, short-lived. */
export const PASSKEY_CEREMONY_COOKIE = 'store_admin_passkey';

/** The passkey ceremony the request's browser has under way, if any. */
export function passkeyCeremonyOf(request: FastifyRequest): string | undefined {
  return request.cookies?.[PASSKEY_CEREMONY_COOKIE] || undefined;
}

export function setPasskeyCeremonyCookie(reply: FastifyReply, config: Config, value: string): void {
  reply.setCookie(PASSKEY_CEREMONY_COOKIE, value, {
    path: SESSION_COOKIE_PATH,
    httpOnly: true,
    sameSite: 'strict',
    secure: config.COOKIE_SECURE,
    maxAge: Math.ceil(config.ADMIN_PASSKEY_CHALLENGE_TTL_MS / 1000),
  });
}

export function clearPasskeyCeremonyCookie(reply: FastifyReply, config: Config): void {
  reply.clearCookie(PASSKEY_CEREMONY_COOKIE, { path: SESSION_COOKIE_PATH, httpOnly: true, sameSite: 'strict', secure: config.COOKIE_SECURE });
}
