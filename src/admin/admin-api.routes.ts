/**
 * The admin API, /admin/api/v1: the write side of the store (catalog, customers, orders, stock,
 * CSV import), API tokens, webhooks, administrators and the audit log. Each feature keeps its
 * routes in its own file under admin/routes/ and is registered here.
 *
 * Two rules hold for every route, decided here once:
 *  - permission: a route's `config.permission` (read, write, owner, account; sessions/admin-roles.ts),
 *    declared on every route: a route without one stops the app from starting. A caller that lacks
 *    it gets 403 problem+json; a key never does more than its maker's role allows now, and never an
 *    owner-only action (decision 0026). The README's authorization matrix is generated from these;
 *  - audit: every successful write is recorded in the audit log in the write's own transaction,
 *    committed with it before its answer is sent (admin-write-transaction.ts, decision 0027), as the
 *    route's `config.audit` action (else `store.written`), with its target and what changed
 *    (`request.audit` set by the handler, else the request body; secrets are dropped).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticateAdmin, requireEnrolledWhenRequired, requirePermission } from './admin-auth.ts';
import { PERMISSIONS, type Permission } from './sessions/admin-roles.ts';
import { recordAudit, type AuditAction } from './audit/audit-log.ts';
import { tokenAdminRoutes } from './routes/token.admin-routes.ts';
import { storeAdminRoutes } from './routes/store.admin-routes.ts';
import { webhookAdminRoutes } from './routes/webhook.admin-routes.ts';
import { overviewAdminRoutes } from './routes/overview.admin-routes.ts';
import { resourceAdminRoutes } from './routes/resource.admin-routes.ts';
import { eventTypeAdminRoutes } from './routes/event-type.admin-routes.ts';
import { recordAdminRoutes } from './routes/record.admin-routes.ts';
import { registerAdminWriteTransactions } from './admin-write-transaction.ts';
import { accountAdminRoutes } from './routes/account.admin-routes.ts';
import { auditAdminRoutes } from './routes/audit.admin-routes.ts';
import { alertsAdminRoutes } from './routes/alerts.admin-routes.ts';
import { secondFactorAdminRoutes } from './routes/second-factor.admin-routes.ts';
import { ssoAdminRoutes } from './routes/sso.admin-routes.ts';
import { passkeyAdminRoutes } from './routes/passkey.admin-routes.ts';

/** What a handler tells the audit log about its action (all optional). */
export interface AuditNote {
  action?: AuditAction;
  target?: { type: string; id: string | null };
  details?: Record<string, unknown>;
  /** Set to false when the request changed nothing worth recording. */
  record?: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What an admin API route needs (required there: sessions/admin-roles.ts). */
    permission?: Permission;
    audit?: AuditAction;
    /** The target type named in the audit log (its id is params.id or the answer's data.id). */
    auditTarget?: string;
    /** Reachable by a session whose administrator must still set up a required second factor. */
    duringEnrolment?: boolean;
    /** Open to a session whose store is suspended (the store switcher's routes). */
    whileSuspended?: boolean;
  }
  interface FastifyRequest {
    audit?: AuditNote;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function answerId(payload: unknown): string | null {
  if (typeof payload !== 'string') return null;
  try {
    const id = (JSON.parse(payload) as { data?: { id?: unknown } })?.data?.id;
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}

async function recordWrite(request: FastifyRequest, statusCode: number, payload: unknown): Promise<void> {
  if (SAFE_METHODS.has(request.method) || statusCode >= 400 || !request.admin) return;
  const note = request.audit ?? {};
  if (note.record === false) return;
  const config = request.routeOptions.config;
  const action = note.action ?? config.audit ?? 'store.written';
  const paramsId = (request.params as { id?: string } | undefined)?.id ?? null;
  const target =
    note.target ??
    (config.auditTarget || action === 'store.written'
      ? { type: config.auditTarget ?? String(request.routeOptions.url ?? '').split('/')[1] ?? 'store', id: paramsId ?? answerId(payload) }
      : undefined);
  let details = note.details;
  if (!details) {
    details =
      action === 'store.written'
        ? { method: request.method, route: request.routeOptions.url }
        : request.body && typeof request.body === 'object'
          ? (request.body as Record<string, unknown>)
          : {};
  }
  await recordAudit(request.server.ctx.database.db, {
    actor: { kind: request.admin.kind, id: request.admin.id, name: request.admin.name },
    action,
    target,
    clientIp: request.ip,
    details,
  });
}

export async function adminApiRoutes(app: FastifyInstance): Promise<void> {
  app.decorateRequest('admin', undefined);
  app.decorateRequest('audit', undefined);
  // No route without its rule: a default by method is how a DELETE once became a viewer's.
  app.addHook('onRoute', (route) => {
    const permission = (route.config as { permission?: unknown } | undefined)?.permission;
    if (!PERMISSIONS.includes(permission as Permission)) {
      throw new Error(`admin API route ${String(route.method)} ${route.url} declares no config.permission (one of ${PERMISSIONS.join(', ')})`);
    }
  });
  app.addHook('onRequest', async (request) => {
    await authenticateAdmin(request);
    requirePermission(request, request.routeOptions.config.permission!);
    requireEnrolledWhenRequired(request, request.routeOptions.config?.duringEnrolment === true);
  });
  // Every write is one transaction with its audit entry; every POST honours Idempotency-Key
  // (decisions 0013, 0027).
  registerAdminWriteTransactions(app, { audit: recordWrite, idempotency: true });
  await app.register(tokenAdminRoutes);
  await app.register(storeAdminRoutes);
  await app.register(webhookAdminRoutes);
  await app.register(overviewAdminRoutes);
  await app.register(resourceAdminRoutes);
  await app.register(eventTypeAdminRoutes);
  await app.register(recordAdminRoutes);
  await app.register(accountAdminRoutes);
  await app.register(auditAdminRoutes);
  await app.register(alertsAdminRoutes);
  await app.register(secondFactorAdminRoutes);
  await app.register(ssoAdminRoutes);
  await app.register(passkeyAdminRoutes);
}
