/**
 * Roles of administrators, and what each may do through the admin API (the dashboard hides what a
 * role may not do, but the API is what enforces it):
 *
 *   owner   everything, including administrators (invite, remove, change roles, reset passwords)
 *   admin   every read and write of the store, keys and webhooks; not administrators
 *   viewer  reads only (GET); any write is 403
 *
 * An API token with the `admin` scope keeps full rights (it acts as an owner): scripts and the CLI
 * used it before roles existed, and a token is itself a credential an owner handed out.
 */
export const ADMIN_ROLES = ['owner', 'admin', 'viewer'] as const;
export type AdminRole = (typeof ADMIN_ROLES)[number];

/** What a route needs: `read` (any role), `write` (owner or admin), `owner`. */
export type Permission = 'read' | 'write' | 'owner';

const RANK: Record<AdminRole, number> = { viewer: 0, admin: 1, owner: 2 };
const NEEDS: Record<Permission, number> = { read: 0, write: 1, owner: 2 };

/** Whether `role` may do what `permission` names. */
export function allows(role: AdminRole, permission: Permission): boolean {
  return RANK[role] >= NEEDS[permission];
}

/** The permission a request needs when its route names none: reads for safe methods, else writes. */
export function defaultPermission(method: string): Permission {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? 'read' : 'write';
}
