/**
 * Who may use the admin API, decided in one place. Two ways in:
 *  - a bearer token with the `admin` scope (scripts, the CLI's peers): no CSRF check, since a
 *    browser never attaches an Authorization header on its own;
 *  - a dashboard session cookie: state-changing methods (anything but GET, HEAD, OPTIONS) must also
 *    carry the session's CSRF token in X-CSRF-Token, else 403. The cookie being SameSite=Lax and
 *    JSON bodies needing a CORS preflight are further layers, not the defence.
 * An Authorization header wins over a cookie, so a bad token is never rescued by a session.
 *
 * A key acts with its maker's role as it is now, at most `admin` (sessions/admin-roles.ts, decision
 * 0026): the token look-up reads the maker's role with the key, and the token cache forgets it the
 * moment that role changes or the maker is removed (migration 0017's NOTIFY). Refusals of a key
 * are logged with the key's id and its maker, never its secret.
 */
import type { FastifyRequest } from 'fastify';
import { setScope } from '../db/store-scope.ts';
import { requireToken } from '../api/plugins/bearer-auth.ts';
import { ApiError } from '../shared/problem.ts';
import { csrfTokenMatches, findAdminSession, touchAdminSession } from './sessions/admin-session.service.ts';
import { CSRF_HEADER, sessionIdOf } from './sessions/session-cookie.ts';
import { allows, keyAllows, keyRole, type AdminRole, type Permission } from './sessions/admin-roles.ts';
import type { AuthenticatedToken, TokenMaker } from '../tokens/token.service.ts';

/** The identity of an admin request, for audit and logs. */
export interface AdminPrincipal {
  kind: 'token' | 'session';
  id: string;
  name: string;
  /** A session's role; a key's maker's role now, at most `admin` (admin-roles.ts). */
  role: AdminRole;
  /** The session's cookie value (sessions only), so "end my other sessions" can keep this one. */
  sessionId?: string;
  /** Sessions only: the session's public id (what the list of sessions calls it). */
  sessionPublicId?: string;
  /** Sessions only: the store the session acts in (its selected store). */
  storeId?: string;
  /** Who made the key (keys only). */
  maker?: TokenMaker;
  /** Sessions only: when the session last proved its administrator (ms), for requireFreshProof. */
  provenAtMs?: number | null;
  /** Sessions only: whether the administrator has a second factor / the store requires one. */
  secondFactor?: boolean;
  secondFactorRequired?: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set on admin API requests once authenticated. */
    admin?: AdminPrincipal;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** An OpenAPI security requirement: each scheme named must be satisfied (its scopes listed). */
type SecurityRequirement = Record<string, string[]>;

/**
 * A dashboard session's security requirement for a route of `methods`: its cookie, and the CSRF
 * header unless every method is safe (the check in `authenticateAdmin` below).
 */
export function dashboardSessionSecurity(methods: string | readonly string[]): SecurityRequirement {
  return [methods].flat().every((method) => SAFE_METHODS.has(method.toUpperCase())) ? { dashboardSession: [] } : { dashboardSession: [], csrfToken: [] };
}

/**
 * What an admin API route accepts, as the OpenAPI document's security requirements (any one of
 * them), from the rules enforced below: an `admin`-scoped key, unless no key may do what the route
 * needs (owner-only and own-account routes, `keyAllows`: not even the operator's key, the most a
 * key acts as), and a dashboard session. The document cannot say more: whether a given key's maker
 * or a given session's role may is decided per request.
 */
export function adminSecurity(permission: Permission, methods: string | readonly string[]): SecurityRequirement[] {
  const session = dashboardSessionSecurity(methods);
  return keyAllows(keyRole({ kind: 'operator' })!, permission) ? [{ bearerAuth: ['admin'] }, session] : [session];
}

/** Authenticates an admin API request or throws 401/403. */
export async function authenticateAdmin(request: FastifyRequest): Promise<AdminPrincipal> {
  const db = request.server.ctx.database.db;
  const sessionId = sessionIdOf(request);
  if (request.headers.authorization !== undefined || sessionId === undefined) {
    const token = await requireToken(db, request, 'admin');
    const role = keyRole(token.maker);
    if (role === null) {
      refuseKey(request, token, 'maker_removed');
      throw new ApiError(
        'forbidden',
        `This API key was made by ${token.maker.email}, who is no longer an administrator of this store: its admin powers ended with that removal (its read scopes still read store data). An owner can transfer the key to another administrator or revoke it.`,
      );
    }
    request.admin = { kind: 'token', id: token.id, name: token.name, role, maker: token.maker };
    return request.admin;
  }
  const session = await findAdminSession(db, sessionId);
  if (!session) {
    throw new ApiError('unauthorized', 'The dashboard session has expired or was signed out. Sign in again.');
  }
  // A session acts in its selected store, with the account's role there (decision 0051,
  // "Administrators per store"): every statement of the request is held to that store.
  setScope({ kind: 'store', storeId: session.storeId });
  // The switcher's routes stay open, so an administrator can leave a suspended store for another.
  if (session.storeStatus === 'suspended' && request.routeOptions.config?.whileSuspended !== true) {
    throw new ApiError('store_suspended', "This store is suspended by the platform's operator: its data cannot be read or changed until it is resumed.");
  }
  if (!SAFE_METHODS.has(request.method) && !csrfTokenMatches(request.headers[CSRF_HEADER], session.csrfToken)) {
    throw new ApiError(
      'forbidden',
      `Missing or wrong CSRF token. Requests made with a dashboard session must send the session's token in the ${CSRF_HEADER} header.`,
    );
  }
  // Its "last used" and address, for the administrator's list of sessions (at most once a minute).
  await touchAdminSession(db, session, request.ip);
  request.admin = {
    kind: 'session',
    id: session.adminUserId,
    name: session.email,
    role: session.role,
    sessionId,
    sessionPublicId: session.id,
    storeId: session.storeId,
    provenAtMs: session.provenAtMs,
    secondFactor: session.secondFactor,
    secondFactorRequired: session.secondFactorRequired,
  };
  return request.admin;
}

/** The clock of second-factor time steps and fresh proofs (AppContext.now, default Date.now). */
export function nowMs(request: FastifyRequest): number {
  return (request.server.ctx.now ?? Date.now)();
}

/**
 * When the owner requires a second factor, a signed-in administrator without one may do nothing
 * but set one up (routes marked `config.duringEnrolment`), read who they are, and sign out: 403
 * second_factor_enrolment_required. API keys have no second factor to set up and are not affected.
 */
export function requireEnrolledWhenRequired(request: FastifyRequest, allowedDuringEnrolment: boolean): void {
  const admin = request.admin;
  if (admin?.kind !== 'session' || allowedDuringEnrolment) return;
  if (admin.secondFactorRequired && !admin.secondFactor) {
    throw new ApiError(
      'second_factor_enrolment_required',
      'An owner requires a second factor of every administrator. Set one up first (Your account → Two-factor authentication, or POST /admin/api/v1/account/second-factor).',
    );
  }
}

/**
 * The most sensitive actions (revealing a signing secret, minting a write or admin key, changing
 * roles) need a session that proved its administrator within ADMIN_REAUTH_WINDOW_MS: signing in,
 * or POST /account/reauthenticate with the password or a code. Else 403 reauthentication_required,
 * which the dashboard answers by asking for the proof and retrying. Keys (API tokens) have no
 * session to prove; what they may reach is the key authorization's business (decision 0028).
 */
export function requireFreshProof(request: FastifyRequest, what: string): void {
  const admin = request.admin;
  if (admin?.kind !== 'session') return;
  const windowMs = request.server.ctx.config.ADMIN_REAUTH_WINDOW_MS;
  const proven = admin.provenAtMs;
  const now = nowMs(request);
  // A proof from "the future" (a clock set back) counts as none.
  if (proven === null || proven === undefined || now - proven > windowMs || now < proven - 60_000) {
    throw new ApiError(
      'reauthentication_required',
      `Confirm it is you before ${what}: send your password or a second-factor code to POST /admin/api/v1/account/reauthenticate, then retry. A proof counts for ${Math.round(windowMs / 60_000)} minutes.`,
    );
  }
}

const PERMISSION_WORDING: Record<Permission, string> = {
  read: 'read',
  write: 'make changes (owner or admin role)',
  owner: 'do this owner-only action (administrators, invitations, key transfers: owner role)',
  account: "change an administrator's own account",
};

/** Logs a key's refusal: which key, whose, what for; never the secret. */
function refuseKey(request: FastifyRequest, token: AuthenticatedToken, reason: 'maker_removed' | 'owner_only' | 'account_only' | 'maker_role'): void {
  request.log.warn(
    {
      key: { id: token.id, name: token.name },
      maker: token.maker.kind === 'operator' ? 'operator' : { id: token.maker.id, email: token.maker.email, role: token.maker.role },
      method: request.method,
      route: request.routeOptions.url,
      reason,
    },
    'admin API refused an API key',
  );
}

/** Throws 403 when the authenticated caller may not do what `permission` names. */
export function requirePermission(request: FastifyRequest, permission: Permission): void {
  const admin = request.admin;
  if (!admin) throw new ApiError('unauthorized', 'Sign in first.');
  if (admin.kind === 'token') {
    if (keyAllows(admin.role, permission)) return;
    const token = request.token!;
    if (permission === 'owner') {
      refuseKey(request, token, 'owner_only');
      throw new ApiError(
        'forbidden',
        'This is an owner-only action (roles, removing administrators, inviting, password resets, key transfers): it needs an owner signed in to the dashboard, never an API key, whoever made it.',
      );
    }
    if (permission === 'account') {
      refuseKey(request, token, 'account_only');
      throw new ApiError('forbidden', 'Only an administrator signed in to the dashboard can change their own account; an API key has none.');
    }
    refuseKey(request, token, 'maker_role');
    const maker =
      admin.maker?.kind === 'administrator'
        ? admin.maker.secondFactorMissing
          ? `its maker ${admin.maker.email} has no second factor, which an owner of this store requires, so it acts as a viewer until she sets one up`
          : `its maker ${admin.maker.email} is now ${admin.role}`
        : `it acts as ${admin.role}`;
    throw new ApiError(
      'forbidden',
      `This API key may not ${PERMISSION_WORDING[permission]}: ${maker}, and a key never does more than its maker's role allows.`,
    );
  }
  if (!allows(admin.role, permission)) {
    throw new ApiError('forbidden', `Your role (${admin.role}) may not ${PERMISSION_WORDING[permission]}. Ask an owner to change your role.`);
  }
}
