/**
 * The audit log (table admin_audit_log, migration 0012): every administrative action, with who
 * (the administrator's email or the API token's name), when, from where (the client address as the
 * server sees it: behind a proxy, set TRUST_PROXY) and what changed. Secrets never enter it:
 * `details` passes through `redactDetails`, which drops every field whose name says it holds one
 * (password, secret, token, code, authorization) at any depth.
 *
 * Entries are written in the request that does the action, inside its transaction (they commit with
 * the action or not at all, decision 0027), read newest first with a cursor, and pruned after
 * AUDIT_LOG_RETENTION_MS by the retention pruner.
 */
import { sql, type Kysely } from 'kysely';
import { ownStore, ownStoreIs } from '../../db/store-scope.ts';
import type { Database } from '../../db/schema.ts';
import type {} from '../sessions/admin-user.table.ts';
import { uuidv7 } from '../../shared/uuid-v7.ts';
import { formatCursor, parseCursor } from '../../shared/cursor.ts';
import { invalidParameter } from '../../shared/problem.ts';
import { parseIsoTimestamp } from '../../shared/time.ts';

/** Every action the log records (the filter of the admin API and the dashboard offers these). */
export const AUDIT_ACTIONS = [
  'session.signed_in',
  'session.sign_in_failed',
  'session.signed_out',
  'session.store_switched',
  'session.ended',
  'session.others_ended',
  'session.sso_refused',
  'setup.completed',
  'admin.invited',
  'admin.invitation_revoked',
  'admin.joined',
  'admin.role_changed',
  'admin.removed',
  'admin.sessions_ended',
  'admin.password_changed',
  'admin.password_reset_issued',
  'admin.password_reset',
  'admin.second_factor_enrolled',
  'admin.second_factor_removed',
  'admin.recovery_code_used',
  'admin.recovery_codes_regenerated',
  'admin.second_factor_failed',
  'admin.reauthenticated',
  'admin.reauthentication_failed',
  'admin.passkey_added',
  'admin.passkey_renamed',
  'admin.passkey_removed',
  'admin.passkey_refused',
  'settings.second_factor_requirement_changed',
  'settings.sso_changed',
  'settings.sso_removed',
  'key.created',
  'key.rolled',
  'key.revoked',
  'key.updated',
  'key.transferred',
  'endpoint.created',
  'endpoint.updated',
  'endpoint.enabled',
  'endpoint.disabled',
  'endpoint.deleted',
  'endpoint.secret_rotated',
  'endpoint.pinged',
  'endpoint.test_event_sent',
  'endpoint.replayed',
  'deliveries.retried',
  'store.written',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export interface AuditActor {
  kind: 'session' | 'token' | 'anonymous';
  id: string | null;
  /** Email of an administrator, name of a token, or what an anonymous caller claimed to be. */
  name: string;
}

export interface AuditEntryInput {
  actor: AuditActor;
  action: AuditAction;
  target?: { type: string; id: string | null };
  clientIp?: string;
  details?: Record<string, unknown>;
}

export interface AuditEntry {
  id: string;
  at: string;
  actor: { kind: AuditActor['kind']; id: string | null; name: string };
  action: string;
  target: { type: string; id: string | null } | null;
  client_ip: string | null;
  details: Record<string, unknown>;
}

const SECRET_FIELD = /password|secret|token|code|authorization|cookie|csrf/i;

/** `details` without any field that may hold a secret, at any depth. */
export function redactDetails(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactDetails);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => !SECRET_FIELD.test(key))
        .map(([key, v]) => [key, redactDetails(v)]),
    );
  }
  return value;
}

export async function recordAudit(db: Kysely<Database>, entry: AuditEntryInput): Promise<void> {
  await db
    .insertInto('admin_audit_log')
    .values({
      store_id: ownStore(),
      id: uuidv7(),
      at: sql<string>`now()`,
      actor_kind: entry.actor.kind,
      actor_id: entry.actor.id,
      actor: entry.actor.name.slice(0, 300),
      action: entry.action,
      target_type: entry.target?.type ?? null,
      target_id: entry.target?.id ?? null,
      client_ip: entry.clientIp ?? null,
      details: JSON.stringify(redactDetails(entry.details ?? {})),
    })
    .execute();
}

export interface AuditQuery {
  actor?: string;
  action?: string;
  from?: string;
  to?: string;
  cursor?: string;
  limit: number;
}

function timestamp(value: string | undefined, param: string): string | undefined {
  if (value === undefined) return undefined;
  const ts = parseIsoTimestamp(value, { dateOnly: true });
  if (!ts) throw invalidParameter(param, 'must be an ISO 8601 timestamp or date (e.g. 2026-01-31 or 2026-01-31T12:00:00Z)');
  return ts;
}

/** A page of the log, newest first, filtered by actor (exact, case-insensitive), action and [from, to). */
export async function listAudit(
  db: Kysely<Database>,
  q: AuditQuery,
): Promise<{ data: AuditEntry[]; pagination: { limit: number; has_more: boolean; next_cursor: string | null } }> {
  const from = timestamp(q.from, 'from');
  const to = timestamp(q.to, 'to');
  if (from && to && new Date(from) >= new Date(to)) throw invalidParameter('to', 'must be after from');
  const cursor = q.cursor === undefined ? undefined : parseCursor(q.cursor);
  let query = db
    .selectFrom('admin_audit_log')
    .select(['id', sql<string>`iso_utc(at)`.as('at'), 'actor_kind', 'actor_id', 'actor', 'action', 'target_type', 'target_id', 'client_ip', 'details'])
    .where(ownStoreIs('store_id'));
  if (q.actor) query = query.where(sql<boolean>`lower(actor) = ${q.actor.trim().toLowerCase()}`);
  if (q.action) query = query.where('action', '=', q.action);
  if (from) query = query.where('at', '>=', sql<string>`${from}::timestamptz`);
  if (to) query = query.where('at', '<', sql<string>`${to}::timestamptz`);
  if (cursor) {
    query =
      cursor.id === undefined
        ? query.where('at', '<', sql<string>`${cursor.ts}::timestamptz`)
        : query.where(sql<boolean>`(at, id) < (${cursor.ts}::timestamptz, ${cursor.id}::uuid)`);
  }
  const rows = await query
    .orderBy('at', 'desc')
    .orderBy('id', 'desc')
    .limit(q.limit + 1)
    .execute();
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  return {
    data: page.map((r) => ({
      id: r.id,
      at: r.at,
      actor: { kind: r.actor_kind, id: r.actor_id, name: r.actor },
      action: r.action,
      target: r.target_type ? { type: r.target_type, id: r.target_id } : null,
      client_ip: r.client_ip,
      details: typeof r.details === 'string' ? JSON.parse(r.details) : r.details,
    })),
    pagination: { limit: q.limit, has_more: rows.length > q.limit, next_cursor: rows.length > q.limit && last ? formatCursor(last.at, last.id) : null },
  };
}
