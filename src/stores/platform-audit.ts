/**
 * The platform audit log (migration 0032, decision 0051): each action of the platform's operator on
 * a store, recorded by the platform API and the `store-api stores …` commands, read newest first
 * (`GET /platform/api/v1/audit-log`, `store-api stores audit-log`). The deployment's own: written
 * and read in the platform scope, never by a store's scope (its role may not read the table).
 */
import { randomUUID } from 'node:crypto';
import { sql, type ColumnType, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { asPlatform } from '../db/store-scope.ts';
import { formatCursor, parseCursor } from '../shared/cursor.ts';

export interface PlatformAuditTable {
  id: string;
  at: ColumnType<string, string | undefined, never>;
  actor: 'platform_api' | 'cli';
  actor_detail: string | null;
  action: string;
  store_id: string;
  store_name: string;
  details: ColumnType<Record<string, unknown>, string | undefined, never>;
}

declare module '../db/schema.ts' {
  interface Database {
    platform_audit_log: PlatformAuditTable;
  }
}

export const PLATFORM_ACTIONS = ['store.created', 'store.key_created', 'store.suspended', 'store.resumed', 'store.deletion_started', 'store.deleted'] as const;
export type PlatformAction = (typeof PLATFORM_ACTIONS)[number];

/** Who acted: the platform API (with the client's address) or the CLI (with the OS user). */
export interface PlatformActor {
  actor: 'platform_api' | 'cli';
  detail?: string;
}

export interface PlatformAuditEntry {
  id: string;
  at: string;
  actor: 'platform_api' | 'cli';
  actor_detail: string | null;
  action: string;
  store_id: string;
  store_name: string;
  details: Record<string, unknown>;
}

/** Records one action on a store. */
export async function recordPlatformAction(
  db: Kysely<Database>,
  who: PlatformActor,
  action: PlatformAction,
  store: { id: string; name: string },
  details: Record<string, unknown> = {},
): Promise<void> {
  await asPlatform(() =>
    db
      .insertInto('platform_audit_log')
      .values({
        id: randomUUID(),
        actor: who.actor,
        actor_detail: who.detail?.slice(0, 200) ?? null,
        action,
        store_id: store.id,
        store_name: store.name,
        details: JSON.stringify(details),
      })
      .execute(),
  );
}

/** A page of the log, newest first; `store` keeps one store's entries; `cursor` is a page's next_cursor. */
export async function listPlatformAudit(
  db: Kysely<Database>,
  query: { limit: number; cursor?: string; store?: string },
): Promise<{ data: PlatformAuditEntry[]; pagination: { limit: number; has_more: boolean; next_cursor: string | null } }> {
  const cursor = query.cursor === undefined ? undefined : parseCursor(query.cursor);
  const rows = await asPlatform(() => {
    let select = db
      .selectFrom('platform_audit_log')
      .select(['id', sql<string>`iso_utc(at)`.as('at'), 'actor', 'actor_detail', 'action', 'store_id', 'store_name', 'details'])
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(query.limit + 1);
    if (query.store !== undefined) select = select.where('store_id', '=', query.store);
    if (cursor !== undefined) {
      select = select.where(sql<boolean>`(at, id) < (${cursor.ts}::timestamptz, ${cursor.id ?? 'ffffffff-ffff-ffff-ffff-ffffffffffff'}::uuid)`);
    }
    return select.execute();
  });
  const page = rows.slice(0, query.limit);
  const last = page.at(-1);
  const hasMore = rows.length > query.limit;
  return {
    data: page as PlatformAuditEntry[],
    pagination: { limit: query.limit, has_more: hasMore, next_cursor: hasMore && last ? formatCursor(last.at, last.id) : null },
  };
}
