/**
 * Roles of administrators, and what each may do through the admin API (the dashboard hides what a
 * role may not do, but the API is what enforces it):
 *
 *   owner   everything, including administrators (invite, remove, change roles, reset passwords)
 *   admin   every read and write of the store, keys and webhooks; not administrators
 *   viewer  reads only (GET); any write is 403
 *
 * What a route needs is declared on the route itself (`config.permission`, no default: the admin
 * API refuses to start with a route that names none, and the authorization matrix test derives its
 * expectations from it):
 *
 *   read     any administrator, signed in or by a key whose maker may read
 *   write    owner or admin, signed in or by a key whose maker is one
 *   owner    an owner signed in to the dashboard; never an API key (decision 0026)
 *   account  one's own account (password): any administrator signed in; never an API key
 *
 * An API key (with the `admin` scope) acts with its maker's role as it is at each request, and at
 * most `admin`: an owner's key is an admin, an admin's key demoted to viewer reads only, a removed
 * maker's key has no admin power at all (its read scopes on the read API keep working). A key made
 * by the machine's operator (the CLI) acts as an admin: whoever runs the machine holds the database
 * anyway, but owner-only actions stay with an owner's signed-in session (decision 0026).
 */
export const ADMIN_ROLES = ['owner', 'admin', 'viewer'] as const;
export type AdminRole = (typeof ADMIN_ROLES)[number];

/** What a route needs (see above). */
export const PERMISSIONS = ['read', 'write', 'owner', 'account'] as const;
export type Permission = (typeof PERMISSIONS)[number];

const RANK: Record<AdminRole, number> = { viewer: 0, admin: 1, owner: 2 };
const NEEDS: Record<Exclude<Permission, 'account'>, number> = { read: 0, write: 1, owner: 2 };

/** The most a key may act as, whoever made it. */
const KEY_CEILING: AdminRole = 'admin';

/** Whether `role` may do what `permission` names, signed in (keys: see `keyAllows`). */
export function allows(role: AdminRole, permission: Permission): boolean {
  return permission === 'account' || RANK[role] >= NEEDS[permission];
}

/** Who made a key, as far as its powers go: an administrator's role now (null: removed), or the operator. */
export type KeyMakerRole = { kind: 'operator' } | { kind: 'administrator'; role: AdminRole | null; secondFactorMissing?: boolean };

/**
 * The role an admin-scoped key acts with: its maker's role now, at most `admin`; null when its maker
 * was removed; `viewer` while the store requires a second factor its maker has not set up (the key
 * must not do what its maker's session may not, decision 0028 amended).
 */
export function keyRole(maker: KeyMakerRole): AdminRole | null {
  if (maker.kind === 'operator') return KEY_CEILING;
  if (maker.role === null) return null;
  if (maker.secondFactorMissing) return 'viewer';
  return RANK[maker.role] > RANK[KEY_CEILING] ? KEY_CEILING : maker.role;
}

/** Whether a key acting as `role` may do what `permission` names: never owner-only or own-account actions. */
export function keyAllows(role: AdminRole, permission: Permission): boolean {
  return permission !== 'owner' && permission !== 'account' && allows(role, permission);
}
