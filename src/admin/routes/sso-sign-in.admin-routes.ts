/**
 * Single sign-on into the dashboard (decision 0062), at /admin/sso, outside the admin API (nobody
 * is signed in yet). Browser navigations, not API calls:
 *   GET /admin/sso/start?email=…[&store=…]   finds the store whose SSO allows the email's domain
 *        (several: a page to pick one), starts an attempt (state, nonce, PKCE verifier kept in the
 *        database under the SHA-256 of a reference the browser holds in an HttpOnly, SameSite=Lax
 *        cookie on /admin/sso for 10 minutes) and redirects (303) to the store's provider
 *   GET /admin/sso/callback?code=…&state=…    takes the attempt of the browser's cookie (once),
 *        has openid-client check the answer and the ID token, checks the email (verified, an
 *        allowed domain), maps the role claim, makes the account or its membership just in time
 *        (never for an email an owner removed), updates the role, opens a dashboard session in
 *        that store and redirects (303) to /admin
 * Every refusal is a page saying what was wrong (a 4xx problem+json to a client that asks for
 * JSON), grants nothing and is recorded in the audit log (session.sso_refused).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ApiError, type ErrorCode } from '../../shared/problem.ts';
import { publicUrl } from '../../config/config.ts';
import { credentialKeys, SealedCredentialsError } from '../../webhooks/endpoint-credentials.ts';
import { addMembership, changeAdminRole, createAdminUser, findAdminUser, normalizeEmail } from '../sessions/admin-user.service.ts';
import {
  beginSignIn,
  domainAllowed,
  finishSignIn,
  removedFromStore,
  roleFromClaim,
  ssoClientSettings,
  ssoStoresForEmail,
  SsoRefusal,
  SSO_ATTEMPT_TTL_MS,
  takeAttempt,
} from '../sessions/sso.service.ts';
import { recordAudit } from '../audit/audit-log.ts';
import { inStore } from '../../db/store-scope.ts';
import { inHomeStore } from '../../stores/store.service.ts';
import { signInRoutes } from './session-routes-kit.ts';

/** The cookie holding a started sign-in's reference (never the state, nonce or verifier themselves). */
export const SSO_COOKIE = 'store_admin_sso';
const SSO_COOKIE_PATH = '/admin/sso';

const StartQuery = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 254, description: 'The work email typed on the sign-in page' }),
    store: Type.Optional(Type.String({ format: 'uuid', description: 'The store, when several use SSO for that domain' })),
  },
  { additionalProperties: false },
);
const CallbackQuery = Type.Object(
  {
    code: Type.Optional(Type.String({ maxLength: 2048 })),
    state: Type.Optional(Type.String({ maxLength: 512 })),
    iss: Type.Optional(Type.String({ maxLength: 2048 })),
    error: Type.Optional(Type.String({ maxLength: 256 })),
    error_description: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  // A provider may add its own parameters (session_state, …): they are ignored.
  { additionalProperties: true },
);

/** A refusal: its status and problem code, a reason for the audit log, what the person reads. */
class Refusal extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly reason: string,
    message: string,
    readonly storeId?: string,
    readonly email?: string,
  ) {
    super(message);
  }
}

const STATUS: Partial<Record<ErrorCode, number>> = { invalid_parameter: 400, unauthorized: 401, forbidden: 403, not_found: 404, conflict: 409 };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title></head><body><main><h1>${escapeHtml(title)}</h1>${body}<p><a href="/admin">Back to the sign-in page</a></p></main></body></html>`;
}

function wantsJson(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return /application\/(problem\+)?json/.test(accept) && !/text\/html/.test(accept);
}

export async function ssoSignInRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const keys = credentialKeys(config.WEBHOOK_CREDENTIALS_KEY);
  const signIn = signInRoutes(app);
  const redirectUri = `${publicUrl(config)}/admin/sso/callback`;

  function clearAttemptCookie(reply: FastifyReply) {
    reply.clearCookie(SSO_COOKIE, { path: SSO_COOKIE_PATH, httpOnly: true, sameSite: 'lax', secure: config.COOKIE_SECURE });
  }

  /** Answers a refusal (page or problem+json) and records it; nothing was granted. */
  async function refuse(request: FastifyRequest, reply: FastifyReply, refusal: Refusal) {
    const write = () =>
      recordAudit(db, {
        actor: { kind: 'anonymous', id: null, name: refusal.email ?? 'unknown' },
        action: 'session.sso_refused',
        clientIp: request.ip,
        details: { reason: refusal.reason, email: refusal.email ?? null, message: refusal.message },
      });
    await (refusal.storeId ? inStore(refusal.storeId, write) : inHomeStore(db, write));
    request.log.warn({ reason: refusal.reason, email: refusal.email, store: refusal.storeId }, 'single sign-on refused');
    if (wantsJson(request)) throw new ApiError(refusal.code, refusal.message);
    reply.header('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
    reply.header('X-Content-Type-Options', 'nosniff');
    return reply
      .code(STATUS[refusal.code] ?? 400)
      .type('text/html; charset=utf-8')
      .send(page('Single sign-on refused', `<p>${escapeHtml(refusal.message)}</p><p>Nothing was granted.</p>`));
  }

  app.get('/sso/start', { schema: { hide: true, querystring: StartQuery } }, async (request, reply) => {
    const query = request.query as typeof StartQuery.static;
    const email = normalizeEmail(query.email);
    try {
      const stores = await ssoStoresForEmail(db, email);
      const chosen = query.store === undefined ? stores : stores.filter((s) => s.id === query.store);
      if (chosen.length === 0) {
        throw new Refusal(
          'not_found',
          'sso_not_configured',
          `No store uses single sign-on for '${email}'. Sign in with your password instead.`,
          undefined,
          email,
        );
      }
      if (chosen.length > 1) {
        const links = chosen
          .map((s) => `<li><a href="/admin/sso/start?email=${encodeURIComponent(email)}&amp;store=${s.id}">${escapeHtml(s.name)}</a></li>`)
          .join('');
        return reply.type('text/html; charset=utf-8').send(page('Pick a store', `<p>Several stores use single sign-on for this email:</p><ul>${links}</ul>`));
      }
      const storeId = chosen[0]!.id;
      let settings: Awaited<ReturnType<typeof ssoClientSettings>>;
      try {
        settings = await ssoClientSettings(db, storeId, keys);
      } catch (error) {
        if (error instanceof SealedCredentialsError) {
          throw new Refusal('conflict', 'misconfigured', `This store's single sign-on cannot be used: ${error.message}. Ask the operator.`, storeId, email);
        }
        throw error;
      }
      if (!settings) throw new Refusal('not_found', 'sso_not_configured', 'This store does not use single sign-on.', storeId, email);
      let started: { reference: string; url: string };
      try {
        started = await beginSignIn(db, { settings, redirectUri, loginHint: email });
      } catch (error) {
        throw new Refusal('conflict', 'provider_unreachable', `The identity provider could not be reached (${(error as Error).message}).`, storeId, email);
      }
      reply.setCookie(SSO_COOKIE, started.reference, {
        path: SSO_COOKIE_PATH,
        httpOnly: true,
        sameSite: 'lax',
        secure: config.COOKIE_SECURE,
        maxAge: SSO_ATTEMPT_TTL_MS / 1000,
      });
      return reply.redirect(started.url, 303);
    } catch (error) {
      if (error instanceof Refusal) return refuse(request, reply, error);
      throw error;
    }
  });

  app.get('/sso/callback', { schema: { hide: true, querystring: CallbackQuery } }, async (request, reply) => {
    const query = request.query as typeof CallbackQuery.static;
    const reference = request.cookies?.[SSO_COOKIE];
    clearAttemptCookie(reply);
    try {
      // Taken (deleted) first: whatever follows, this attempt is spent, so a replay finds nothing.
      const attempt = reference ? await takeAttempt(db, reference) : undefined;
      if (!attempt) {
        throw new Refusal(
          'invalid_parameter',
          reference ? 'unknown_attempt' : 'no_attempt',
          'This sign-in was not started in this browser, took longer than 10 minutes, or was already used. Start again from the sign-in page.',
        );
      }
      const { storeId } = attempt;
      if (query.error) {
        throw new Refusal('forbidden', 'provider_error', `The identity provider refused: ${query.error_description ?? query.error}.`, storeId);
      }
      if (!query.state)
        throw new Refusal(
          'invalid_parameter',
          'missing_state',
          'The answer of the identity provider has no state: it is not the answer to this sign-in.',
          storeId,
        );
      if (!query.code) throw new Refusal('invalid_parameter', 'missing_code', 'The answer of the identity provider has no code.', storeId);
      const settings = await ssoClientSettings(db, storeId, keys).catch((error: unknown) => {
        if (error instanceof SealedCredentialsError) throw new Refusal('conflict', 'misconfigured', error.message, storeId);
        throw error;
      });
      if (!settings) throw new Refusal('not_found', 'sso_not_configured', 'This store no longer uses single sign-on.', storeId);
      let claims: Awaited<ReturnType<typeof finishSignIn>>;
      try {
        const search = new URLSearchParams(request.url.slice(request.url.indexOf('?') + 1));
        claims = await finishSignIn(settings, attempt, new URL(`${redirectUri}?${search}`));
      } catch (error) {
        if (error instanceof SsoRefusal) throw new Refusal('unauthorized', error.reason, error.message, storeId);
        throw error;
      }
      const email = typeof claims.email === 'string' ? normalizeEmail(claims.email) : undefined;
      if (!email) throw new Refusal('forbidden', 'no_email', 'The identity provider sent no email for this person.', storeId);
      if (claims.email_verified !== true) {
        throw new Refusal('forbidden', 'email_not_verified', `The identity provider does not say '${email}' is verified.`, storeId, email);
      }
      if (!domainAllowed(email, settings.allowedDomains)) {
        throw new Refusal('forbidden', 'domain_not_allowed', `'${email}' is not in a domain this store allows for single sign-on.`, storeId, email);
      }
      const mapped = roleFromClaim(claims[settings.roleClaim], settings.roleMap, settings.defaultRole);
      if (!mapped) {
        throw new Refusal(
          'forbidden',
          'no_role',
          `No role of this store is given to '${email}' by the claim '${settings.roleClaim}'. Ask an owner.`,
          storeId,
          email,
        );
      }
      if (await removedFromStore(db, storeId, email)) {
        throw new Refusal(
          'forbidden',
          'removed',
          `'${email}' was removed from this store by an owner; only an owner's invitation lets them back.`,
          storeId,
          email,
        );
      }
      const user = await inStore(storeId, () => provision(request, { email, role: mapped, storeId, breakGlass: settings.breakGlass }));
      await signIn.replaceSession(request, reply, user, storeId, { message: 'administrator signed in with SSO', details: { method: 'sso' } });
      return reply.redirect('/admin', 303);
    } catch (error) {
      if (error instanceof Refusal) return refuse(request, reply, error);
      throw error;
    }
  });

  /**
   * The account and its membership of the statement's store, made or updated from the provider's
   * word: a new account (no password anyone knows), a membership added, or the role changed; a
   * break-glass owner stays an owner, and the last owner is never demoted by a claim.
   */
  async function provision(request: FastifyRequest, input: { email: string; role: 'owner' | 'admin' | 'viewer'; storeId: string; breakGlass: string[] }) {
    const audit = (user: { id: string; email: string }, action: 'admin.joined' | 'admin.role_changed', details: Record<string, unknown>) =>
      signIn.auditOwn(request, user, action, { via: 'sso', ...details }, input.storeId);
    const existing = await findAdminUser(db, input.email, input.storeId);
    if (!existing) {
      const user = await createAdminUser(db, { email: input.email, password: randomBytes(32).toString('base64url'), role: input.role, storeId: input.storeId });
      await audit(user, 'admin.joined', { role: input.role });
      return user;
    }
    if (existing.role === null) {
      await addMembership(db, { adminUserId: existing.id, role: input.role, storeId: input.storeId });
      await audit(existing, 'admin.joined', { role: input.role });
      return existing;
    }
    if (existing.role === input.role || (existing.role === 'owner' && input.breakGlass.includes(existing.id))) return existing;
    try {
      await changeAdminRole(db, existing.id, input.role);
      await audit(existing, 'admin.role_changed', { from: existing.role, to: input.role });
    } catch (error) {
      // The store's only owner keeps the role: a claim never leaves a store without an owner.
      if (!(error instanceof ApiError && error.code === 'conflict')) throw error;
    }
    return existing;
  }
}
