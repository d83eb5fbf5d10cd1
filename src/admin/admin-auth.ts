/**
 * Who may use the admin API: a bearer token with the `admin` scope. (The dashboard adds its
 * session cookie here, so both ways in are decided in one place.)
 */
import type { FastifyRequest } from 'fastify';
import { requireToken } from '../api/plugins/bearer-auth.ts';

/** The identity of an admin request, for audit and logs. */
export interface AdminPrincipal {
  kind: 'token' | 'session';
  id: string;
  name: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set on admin API requests once authenticated. */
    admin?: AdminPrincipal;
  }
}

/** Authenticates an admin API request or throws 401/403. */
export async function authenticateAdmin(request: FastifyRequest): Promise<AdminPrincipal> {
  const token = await requireToken(request.server.ctx.database.db, request, 'admin');
  request.admin = { kind: 'token', id: token.id, name: token.name };
  return request.admin;
}
