/**
 * Administrators (owners manage them) and one's own account, under /admin/api/v1:
 *   GET    /admins                          every administrator with role and last sign-in (any role)
 *   PATCH  /admins/:id                      { role } (owner); their sessions end; never the last owner
 *   DELETE /admins/:id                      remove (owner); their sessions end; never the last owner
 *   POST   /admins/:id/password-reset       one-time reset link for them (owner), shown once
 *   GET    /admins/invitations              open invitations (owner)
 *   POST   /admins/invitations              { email, role } → one-time invitation link (owner), shown once
 *   DELETE /admins/invitations/:id          withdraw an invitation (owner)
 *   GET    /account/stores                  the stores of the signed-in account, its role in each (sessions)
 *   POST   /session/store                   { store_id }: the session acts in that store from now on
 *                                           (a member only, else 404 naming it); recorded in the
 *                                           audit log of the store entered
 *   GET    /admins/:id/sessions             an administrator's live sessions (owner)
 *   DELETE /admins/:id/sessions             end every session of an administrator (owner, fresh proof;
 *                                           the asking session itself, if it is hers, stays)
 *   GET    /account/sessions                the signed-in account's live sessions, this one marked
 *   DELETE /account/sessions/:id            end one of them (fresh proof; not this one: sign out)
 *   POST   /account/sessions/end-others     end all of them but this one (fresh proof)
 *   POST   /account/password                { current_password, new_password }: one's own password
 *                                           (any role, sessions only); one's other sessions end;
 *                                           a wrong current password counts like a failed sign-in
 * The links carry their code in the URL fragment (/admin#/link?code=…); it is in the answer once and
 * never in the audit log. Using a link is at /admin/links (links.admin-routes.ts): the person using
 * it is not signed in.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { ADMIN_ROLES, type AdminRole } from '../sessions/admin-roles.ts';
import { accountStores, changeAdminRole, changeOwnPassword, findMember, listAdminUsers, removeAdminUser } from '../sessions/admin-user.service.ts';
import { endSessionOf, endSessionsOf, listSessionsOf, setSessionStore } from '../sessions/admin-session.service.ts';
import { setScope } from '../../db/store-scope.ts';
import { isStoreId } from '../../stores/store.service.ts';
import { createInvitation, createPasswordReset, listInvitations, revokeInvitation } from '../sessions/admin-links.service.ts';
import { ApiError } from '../../shared/problem.ts';
import { requireFreshProof } from '../admin-auth.ts';
import { storesRequiringSso } from '../sessions/sso.service.ts';
import { recordSignInFailure, signInRetryAfterMs } from '../sessions/sign-in-throttle.ts';

const strict = { additionalProperties: false } as const;
const IdParam = Type.Object({ id: Type.String({ format: 'uuid' }) }, strict);
const Role = Type.Unsafe<AdminRole>({
  type: 'string',
  enum: [...ADMIN_ROLES],
  description: 'owner: everything; admin: everything but administrators; viewer: read only',
});
/** An administrator as the admin API shows one (also the answer of the second-factor reset). */
export const AdminUserSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    email: Type.String(),
    role: Role,
    created_at: Type.String({ format: 'date-time' }),
    last_sign_in_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    second_factor: Type.Boolean({ description: 'Whether a second factor (TOTP) is set up' }),
  },
  { title: 'Administrator' },
);
const LinkSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  purpose: Type.Unsafe<string>({ type: 'string', enum: ['invitation', 'password_reset'] }),
  email: Type.String(),
  role: Type.Union([Role, Type.Null()]),
  created_by: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  expires_at: Type.String({ format: 'date-time' }),
  used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});
const IssuedLink = Type.Intersect([LinkSchema, Type.Object({ url: Type.String({ description: 'The one-time link; shown once, never stored' }) })]);
const data = <T extends ReturnType<typeof Type.Object> | ReturnType<typeof Type.Array> | ReturnType<typeof Type.Intersect>>(schema: T) =>
  Type.Object({ data: schema });

const InviteBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    role: Role,
  },
  strict,
);
const RoleBody = Type.Object({ role: Role }, strict);
const PasswordBody = Type.Object(
  {
    current_password: Type.String({ minLength: 1, maxLength: 1024 }),
    new_password: Type.String({ minLength: 1, maxLength: 1024 }),
  },
  strict,
);

/** The dashboard URL of a one-time link, on the host the owner used. */
export function linkUrl(request: FastifyRequest, code: string): string {
  return `${request.protocol}://${request.host}/admin#/link?code=${code}`;
}

const AccountStoreSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    status: Type.Unsafe<string>({ type: 'string', enum: ['active', 'suspended', 'deleting'] }),
    role: Role,
    selected: Type.Boolean({ description: 'Whether the session acts in this store now' }),
  },
  { title: 'AccountStore' },
);
const SwitchBody = Type.Object({ store_id: Type.String({ format: 'uuid' }) }, strict);

/** A live dashboard session as its administrator, or an owner, sees it (decision 0061). */
const SessionSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid', description: "The session's public id (never its cookie)" }),
    device: Type.String({ description: 'What the user agent says it is, e.g. "Chrome 131 on Linux" (a hint: a browser says what it likes)' }),
    user_agent: Type.Union([Type.String(), Type.Null()], { description: 'The user agent of the sign-in, at most 300 characters' }),
    client_ip: Type.Union([Type.String(), Type.Null()], { description: 'The address it was last used from (behind a proxy: set TRUST_PROXY)' }),
    created_at: Type.String({ format: 'date-time', description: 'When it began (the sign-in)' }),
    last_seen_at: Type.String({ format: 'date-time', description: 'When it was last used (recorded at most once a minute)' }),
    expires_at: Type.String({ format: 'date-time' }),
    current: Type.Boolean({ description: 'Whether it is the session that asks' }),
  },
  { title: 'DashboardSessionListing' },
);
const SessionIdParam = Type.Object({ id: Type.String({ format: 'uuid' }) }, strict);
const EndedCount = Type.Object({ ended: Type.Integer({ minimum: 0, description: 'How many sessions ended' }) });

/** The signed-in session asking, or 403: keys have no sessions. */
function ownSession(request: FastifyRequest) {
  const admin = request.admin!;
  if (admin.kind !== 'session' || admin.sessionPublicId === undefined)
    throw new ApiError('forbidden', 'Only an administrator signed in to the dashboard has sessions; API keys have none.');
  return { ...admin, sessionPublicId: admin.sessionPublicId };
}

/** The membership of the signed-in session's account in `storeId`, or a 404 naming the store. */
async function membershipIn(request: FastifyRequest, storeId: string) {
  const admin = request.admin!;
  const stores = await accountStores(request.server.ctx.database.db, admin.id);
  const found = stores.find((store) => store.id === storeId);
  if (!found) throw new ApiError('not_found', `You are no administrator of the store ${storeId} (or it does not exist).`);
  return found;
}

export async function accountAdminRoutes(app: FastifyInstance): Promise<void> {
  const { db } = app.ctx.database;
  const { config } = app.ctx;
  const tags = ['Admin: administrators'];
  const id = (params: unknown) => (params as { id: string }).id;

  app.get(
    '/account/stores',
    {
      config: { permission: 'account', duringEnrolment: true, whileSuspended: true },
      schema: {
        tags,
        operationId: 'listAccountStores',
        summary: 'The stores the signed-in administrator belongs to, with the role in each',
        response: { 200: data(Type.Array(AccountStoreSchema)) },
      },
    },
    async (request) => {
      const admin = request.admin!;
      if (admin.kind !== 'session') throw new ApiError('forbidden', 'Only an administrator signed in to the dashboard has stores to switch between.');
      const stores = await accountStores(db, admin.id);
      return { data: stores.map((store) => ({ ...store, selected: store.id === admin.storeId })) };
    },
  );

  app.post(
    '/session/store',
    {
      config: { permission: 'account', duringEnrolment: true, whileSuspended: true, audit: 'session.store_switched' },
      schema: {
        tags,
        operationId: 'switchStore',
        summary: 'Act in another store of the signed-in administrator (the store switcher)',
        body: SwitchBody,
        response: { 200: data(AccountStoreSchema) },
      },
      // Before the write's transaction begins (preHandler): it and the audit entry belong to the
      // store entered, once the account is known to be a member of it (else the handler's 404).
      preValidation: async (request) => {
        const storeId = (request.body as { store_id?: unknown } | undefined)?.store_id;
        if (request.admin?.kind !== 'session' || typeof storeId !== 'string' || !isStoreId(storeId)) return;
        const stores = await accountStores(db, request.admin.id);
        if (stores.some((store) => store.id === storeId && store.status !== 'deleting')) setScope({ kind: 'store', storeId });
      },
    },
    async (request) => {
      const admin = request.admin!;
      if (admin.kind !== 'session' || admin.sessionId === undefined)
        throw new ApiError('forbidden', 'Only a dashboard session acts in a selected store; an API key acts in its own store.');
      const { store_id: storeId } = request.body as typeof SwitchBody.static;
      const store = await membershipIn(request, storeId);
      // A store that requires single sign-on is entered by signing in through it, never by switching
      // a session begun with a password or passkey (or in another store) into it; its break-glass
      // owners excepted (decision 0062).
      if (store.id !== admin.storeId && (await storesRequiringSso(db, admin.id)).has(store.id))
        throw new ApiError('forbidden', `${store.name} requires single sign-on: sign out, then use 'Continue with SSO' with your work address to act in it.`);
      const from = admin.storeId;
      await setSessionStore(db, admin.sessionId, store.id);
      request.audit = { target: { type: 'store', id: store.id }, details: { from_store: from ?? null, to_store: store.id, role: store.role } };
      return { data: { ...store, selected: true } };
    },
  );

  app.get(
    '/admins',
    {
      config: { permission: 'read' },
      schema: { tags, operationId: 'listAdmins', summary: 'List administrators', response: { 200: data(Type.Array(AdminUserSchema)) } },
    },
    async () => ({
      data: await listAdminUsers(db),
    }),
  );

  app.get(
    '/admins/invitations',
    {
      config: { permission: 'owner' },
      schema: { tags, operationId: 'listInvitations', summary: 'Open invitations (not yet used)', response: { 200: data(Type.Array(LinkSchema)) } },
    },
    async () => ({ data: await listInvitations(db) }),
  );

  app.post(
    '/admins/invitations',
    {
      config: { permission: 'owner', audit: 'admin.invited' },
      schema: {
        tags,
        operationId: 'inviteAdmin',
        summary: 'Invite an administrator: a one-time link (shown once)',
        body: InviteBody,
        response: { 201: data(IssuedLink) },
      },
    },
    async (request, reply) => {
      const body = request.body as typeof InviteBody.static;
      // The link makes an administrator, an owner included (a stale cookie must not).
      requireFreshProof(request, 'inviting an administrator');
      const { code, link } = await createInvitation(db, {
        email: body.email,
        role: body.role,
        createdBy: request.admin!.name,
        ttlMs: config.ADMIN_INVITATION_TTL_MS,
      });
      request.audit = { target: { type: 'invitation', id: link.id }, details: { email: link.email, role: link.role, expires_at: link.expires_at } };
      reply.header('Cache-Control', 'no-store');
      return reply.code(201).send({ data: { ...link, url: linkUrl(request, code) } });
    },
  );

  app.delete(
    '/admins/invitations/:id',
    {
      config: { permission: 'owner', audit: 'admin.invitation_revoked' },
      schema: { tags, operationId: 'revokeInvitation', summary: 'Withdraw an invitation', params: IdParam, response: { 200: data(LinkSchema) } },
    },
    async (request) => {
      const link = await revokeInvitation(db, id(request.params));
      request.audit = { target: { type: 'invitation', id: link.id }, details: { email: link.email, role: link.role } };
      return { data: link };
    },
  );

  app.patch(
    '/admins/:id',
    {
      config: { permission: 'owner', audit: 'admin.role_changed' },
      schema: {
        tags,
        operationId: 'changeAdminRole',
        summary: "Change an administrator's role (their sessions end)",
        params: IdParam,
        body: RoleBody,
        response: { 200: data(AdminUserSchema) },
      },
    },
    async (request) => {
      requireFreshProof(request, 'changing a role');
      const { before, after } = await changeAdminRole(db, id(request.params), (request.body as typeof RoleBody.static).role);
      request.audit =
        before.role === after.role
          ? { record: false }
          : { target: { type: 'admin', id: after.id }, details: { email: after.email, role: { from: before.role, to: after.role } } };
      return { data: after };
    },
  );

  app.delete(
    '/admins/:id',
    {
      config: { permission: 'owner', audit: 'admin.removed' },
      schema: {
        tags,
        operationId: 'removeAdmin',
        summary: 'Remove an administrator (their sessions end at once)',
        params: IdParam,
        response: { 200: data(AdminUserSchema) },
      },
    },
    async (request) => {
      requireFreshProof(request, 'removing an administrator');
      const removed = await removeAdminUser(db, id(request.params));
      request.audit = { target: { type: 'admin', id: removed.id }, details: { email: removed.email, role: removed.role } };
      return { data: removed };
    },
  );

  app.post(
    '/admins/:id/password-reset',
    {
      config: { permission: 'owner', audit: 'admin.password_reset_issued' },
      schema: {
        tags,
        operationId: 'createPasswordReset',
        summary: 'A one-time password-reset link for an administrator (shown once)',
        params: IdParam,
        response: { 201: data(IssuedLink) },
      },
    },
    async (request, reply) => {
      // The link sets the account's password: a stale cookie must not hand one out.
      requireFreshProof(request, 'issuing a password-reset link');
      const { code, link, user } = await createPasswordReset(db, {
        adminUserId: id(request.params),
        createdBy: request.admin!.name,
        ttlMs: config.ADMIN_PASSWORD_RESET_TTL_MS,
      });
      request.audit = { target: { type: 'admin', id: user.id }, details: { email: user.email, expires_at: link.expires_at } };
      reply.header('Cache-Control', 'no-store');
      return reply.code(201).send({ data: { ...link, url: linkUrl(request, code) } });
    },
  );

  app.get(
    '/account/sessions',
    {
      config: { permission: 'account', duringEnrolment: true, whileSuspended: true },
      schema: {
        tags,
        operationId: 'listOwnSessions',
        summary: "The signed-in administrator's live dashboard sessions, the asking one marked current",
        response: { 200: data(Type.Array(SessionSchema)) },
      },
    },
    async (request) => {
      const admin = ownSession(request);
      return { data: await listSessionsOf(db, admin.id, admin.sessionPublicId) };
    },
  );

  app.delete(
    '/account/sessions/:id',
    {
      config: { permission: 'account', duringEnrolment: true, whileSuspended: true, audit: 'session.ended' },
      schema: {
        tags,
        operationId: 'endOwnSession',
        summary: 'End one of your other dashboard sessions (this one: sign out)',
        params: SessionIdParam,
        response: { 200: data(SessionSchema) },
      },
    },
    async (request) => {
      const admin = ownSession(request);
      const sessionId = id(request.params);
      if (sessionId === admin.sessionPublicId)
        throw new ApiError('conflict', 'This is the session you are using: sign out instead (DELETE /admin/session).', [
          { param: 'id', message: 'is the current session' },
        ]);
      // Proof first: a stolen cookie must not sign the rightful administrator out of her own sessions.
      requireFreshProof(request, 'ending a session');
      const ended = await endSessionOf(db, admin.id, sessionId);
      if (!ended) throw new ApiError('not_found', `You have no live session with id '${sessionId}'.`, [{ param: 'id', message: 'names no session of yours' }]);
      request.audit = {
        target: { type: 'session', id: ended.id },
        details: { device: ended.device, client_ip: ended.client_ip, started_at: ended.created_at },
      };
      return { data: ended };
    },
  );

  app.post(
    '/account/sessions/end-others',
    {
      config: { permission: 'account', duringEnrolment: true, whileSuspended: true, audit: 'session.others_ended' },
      schema: {
        tags,
        operationId: 'endOtherOwnSessions',
        summary: 'End every dashboard session of yours but this one',
        response: { 200: data(EndedCount) },
      },
    },
    async (request) => {
      const admin = ownSession(request);
      requireFreshProof(request, 'ending your other sessions');
      const ended = await endSessionsOf(db, admin.id, admin.sessionPublicId);
      request.audit = { target: { type: 'admin', id: admin.id }, details: { ended } };
      return { data: { ended } };
    },
  );

  app.get(
    '/admins/:id/sessions',
    {
      config: { permission: 'owner' },
      schema: {
        tags,
        operationId: 'listAdminSessions',
        summary: "An administrator's live dashboard sessions (in every store of hers: any of them can switch to this one)",
        params: IdParam,
        response: { 200: data(Type.Array(SessionSchema)) },
      },
    },
    async (request) => {
      const member = await findMember(db, id(request.params));
      if (!member) throw new ApiError('not_found', `No administrator with id '${id(request.params)}' in this store.`);
      return { data: await listSessionsOf(db, member.id, request.admin!.sessionPublicId) };
    },
  );

  app.delete(
    '/admins/:id/sessions',
    {
      config: { permission: 'owner', audit: 'admin.sessions_ended' },
      schema: {
        tags,
        operationId: 'endAdminSessions',
        summary: 'End every dashboard session of an administrator (she signs in again; her keys are untouched)',
        params: IdParam,
        response: { 200: data(EndedCount) },
      },
    },
    async (request) => {
      requireFreshProof(request, "ending an administrator's sessions");
      const member = await findMember(db, id(request.params));
      if (!member) throw new ApiError('not_found', `No administrator with id '${id(request.params)}' in this store.`);
      // Every session of the account, in whichever store it acts now: any of them could switch into
      // this store in a click. The owner's own asking session, when she ends her own, stays.
      const ended = await endSessionsOf(db, member.id, request.admin!.sessionPublicId);
      request.audit = { target: { type: 'admin', id: member.id }, details: { email: member.email, ended } };
      return { data: { ended } };
    },
  );

  app.post(
    '/account/password',
    {
      config: { permission: 'account', audit: 'admin.password_changed' },
      schema: {
        tags,
        operationId: 'changeOwnPassword',
        summary: "Change one's own password (dashboard sessions; other sessions end)",
        body: PasswordBody,
        response: { 200: data(AdminUserSchema) },
      },
    },
    async (request) => {
      const admin = request.admin!;
      if (admin.kind !== 'session')
        throw new ApiError('forbidden', 'Only an administrator signed in to the dashboard has a password to change; API tokens have none.');
      const body = request.body as typeof PasswordBody.static;
      // The current password is guessed no faster here than at the sign-in or the re-proof: the
      // same budgets, counted under the administrator's email and the client address (decision 0028).
      const policy = { maxFailures: config.ADMIN_SIGN_IN_MAX_FAILURES, windowMs: config.ADMIN_SIGN_IN_WINDOW_MS };
      const waitMs = await signInRetryAfterMs(db, admin.name, request.ip, policy);
      if (waitMs > 0) {
        const seconds = Math.ceil(waitMs / 1000);
        throw new ApiError('rate_limited', `Too many failed attempts. Try again in ${seconds} seconds.`, undefined, { 'Retry-After': String(seconds) });
      }
      let user;
      try {
        user = await changeOwnPassword(db, {
          adminUserId: admin.id,
          currentPassword: body.current_password,
          newPassword: body.new_password,
          keepSessionId: admin.sessionId,
        });
      } catch (error) {
        if (error instanceof ApiError && error.errors?.[0]?.param === 'current_password') await recordSignInFailure(db, admin.name, request.ip, policy);
        throw error;
      }
      request.audit = { target: { type: 'admin', id: user.id }, details: { email: user.email } };
      return { data: user };
    },
  );
}
