/**
 * Dashboard sessions. The cookie carries a random 256-bit id; the table keeps only its SHA-256, so a
 * leaked table cannot be replayed as cookies. Each session has its own CSRF token (synchronizer
 * token pattern): the dashboard reads it from GET /admin/session and sends it back in the
 * X-CSRF-Token header of every state-changing request. Sessions end at a fixed time after sign-in
 * (ADMIN_SESSION_TTL_MS; no sliding renewal), at sign-out, or when the administrator (or an owner of
 * one of her stores) ends it. Each session keeps what its administrator needs to recognise it
 * (migration 0043, decision 0061): the browser's user agent, the address and time it was last used;
 * "last used" is written at most once a minute (`SEEN_EVERY`), so a busy dashboard costs no write
 * per request.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type {} from './admin-user.table.ts';
import type { AdminRole } from './admin-roles.ts';
import { ApiError } from '../../shared/problem.ts';
import { asPlatform } from '../../db/store-scope.ts';

export interface AdminSession {
  /** The session's public id (migration 0043): what the admin API names it by. */
  id: string;
  adminUserId: string;
  email: string;
  /** The role in the session's store (its membership, migration 0033). */
  role: AdminRole;
  /** The store the session acts in (the switcher changes it), its name and status. */
  storeId: string;
  storeName: string;
  storeStatus: 'active' | 'suspended' | 'deleting';
  csrfToken: string;
  expiresAt: string;
  /** When this session last proved its administrator (sign-in, password or code), ms; null: never. */
  provenAtMs: number | null;
  /** Whether the administrator has a second factor, and whether the store requires one (migration 0019). */
  secondFactor: boolean;
  secondFactorRequired: boolean;
  /** Whether its last use was recorded more than `SEEN_EVERY` ago (`touchAdminSession` records this one). */
  seenLongAgo: boolean;
}

/** How old a session's "last used" may get before a request writes it again. */
const SEEN_EVERY = '1 minute';

const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

function hashSessionId(sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('hex');
}

/** Starts a session for an administrator; returns the cookie value (shown to nobody else). */
export async function createAdminSession(
  db: Kysely<Database>,
  input: { adminUserId: string; ttlMs: number; userAgent?: string; clientIp?: string; provenAtMs?: number; storeId?: string },
): Promise<{ sessionId: string; session: AdminSession }> {
  const storeId = input.storeId ?? (await firstStoreOf(db, input.adminUserId));
  if (storeId === undefined) {
    throw new ApiError('forbidden', 'This account administers no store any more: an owner of a store can invite it again.');
  }
  const sessionId = randomBytes(32).toString('base64url');
  await db
    .insertInto('admin_sessions')
    .values({
      id_hash: hashSessionId(sessionId),
      admin_user_id: input.adminUserId,
      store_id: storeId,
      csrf_token: randomBytes(32).toString('base64url'),
      created_at: sql<string>`now()`,
      expires_at: sql<string>`now() + make_interval(secs => ${input.ttlMs / 1000})`,
      user_agent: input.userAgent?.slice(0, 300) ?? null,
      client_ip: input.clientIp ?? null,
      last_seen_at: sql<string>`now()`,
      proven_at: input.provenAtMs === undefined ? null : new Date(input.provenAtMs).toISOString(),
    })
    .execute();
  // Every new session is a sign-in, whichever way it came (password, invitation or reset link,
  // setup link): the administrators page's "last sign-in" says so.
  await db.updateTable('admin_users').set({ last_sign_in_at: sql<string>`now()` }).where('id', '=', input.adminUserId).execute();
  // Sign-in is rare; sweeping expired sessions here keeps the table small without a timer.
  await db.deleteFrom('admin_sessions').where('expires_at', '<=', sql<string>`now()`).execute();
  const session = await findAdminSession(db, sessionId);
  if (!session) throw new ApiError('forbidden', 'This account is no administrator of that store.');
  return { sessionId, session };
}

/** The store a new session of the account acts in: its first membership, the home store (oldest) first. */
async function firstStoreOf(db: Kysely<Database>, adminUserId: string): Promise<string | undefined> {
  const row = await asPlatform(() =>
    db
      .selectFrom('admin_memberships as m')
      .innerJoin('stores as st', 'st.id', 'm.store_id')
      .select('st.id')
      .where('m.admin_user_id', '=', adminUserId)
      .where('st.status', '<>', 'deleting')
      .orderBy('st.created_at')
      .orderBy('st.id')
      .limit(1)
      .executeTakeFirst(),
  );
  return row?.id;
}

/** Moves a session to another store (the switcher); the caller checked the membership. */
export async function setSessionStore(db: Kysely<Database>, sessionId: string, storeId: string): Promise<void> {
  if (!SESSION_ID.test(sessionId)) return;
  await db.updateTable('admin_sessions').set({ store_id: storeId }).where('id_hash', '=', hashSessionId(sessionId)).execute();
}

/** The live session of a cookie value, or undefined (unknown, malformed or expired). */
export async function findAdminSession(db: Kysely<Database>, sessionId: string): Promise<AdminSession | undefined> {
  if (!SESSION_ID.test(sessionId)) return undefined;
  // Across stores: the session names its store (and `stores` shows a store's scope its own row only).
  const row = await asPlatform(() =>
    db
      .selectFrom('admin_sessions as s')
      .innerJoin('admin_users as u', 'u.id', 's.admin_user_id')
      // The role and the second-factor policy are the session's store's (migration 0033): a session
      // whose account is no longer a member of its store (or whose store is being deleted) is none.
      .innerJoin('admin_memberships as m', (join) => join.onRef('m.admin_user_id', '=', 's.admin_user_id').onRef('m.store_id', '=', 's.store_id'))
      .innerJoin('stores as store', 'store.id', 's.store_id')
      .leftJoin('store_admin_settings as st', 'st.store_id', 's.store_id')
      .select([
        's.id',
        's.admin_user_id',
        'u.email',
        'm.role',
        'store.id as store_id',
        'store.name as store_name',
        'store.status as store_status',
        's.csrf_token',
        sql<string>`iso_utc(s.expires_at)`.as('expires_at'),
        sql<string | null>`(extract(epoch from s.proven_at) * 1000)::float8`.as('proven_at_ms'),
        // TOTP or a passkey (decision 0063).
        sql<boolean>`(u.totp_secret IS NOT NULL OR EXISTS (SELECT 1 FROM admin_passkeys pk WHERE pk.admin_user_id = u.id))`.as('second_factor'),
        sql<boolean>`coalesce(st.require_second_factor, false)`.as('require_second_factor'),
        sql<boolean>`s.last_seen_at < now() - ${SEEN_EVERY}::interval`.as('seen_long_ago'),
      ])
      .where('s.id_hash', '=', hashSessionId(sessionId))
      .where('store.status', '<>', 'deleting')
      .where('s.expires_at', '>', sql<string>`now()`)
      .executeTakeFirst(),
  );
  if (!row) return undefined;
  return {
    id: row.id,
    adminUserId: row.admin_user_id,
    email: row.email,
    role: row.role as AdminRole,
    storeId: row.store_id,
    storeName: row.store_name,
    storeStatus: row.store_status,
    csrfToken: row.csrf_token,
    expiresAt: row.expires_at,
    provenAtMs: row.proven_at_ms === null ? null : Number(row.proven_at_ms),
    secondFactor: Boolean(row.second_factor),
    secondFactorRequired: Boolean(row.require_second_factor),
    seenLongAgo: Boolean(row.seen_long_ago),
  };
}

/**
 * Records that a session was used just now, from `clientIp`, when its last use was recorded more
 * than a minute ago (`session.seenLongAgo`); otherwise writes nothing. The condition is repeated in
 * the statement, so two requests at once write it once.
 */
export async function touchAdminSession(db: Kysely<Database>, session: AdminSession, clientIp: string | undefined): Promise<void> {
  if (!session.seenLongAgo) return;
  await db
    .updateTable('admin_sessions')
    .set({ last_seen_at: sql<string>`now()`, client_ip: clientIp ?? null })
    .where('id', '=', session.id)
    .where('last_seen_at', '<', sql<string>`now() - ${SEEN_EVERY}::interval`)
    .execute();
}

/** A live session as its administrator (or an owner) sees it in a list. */
export interface SessionListing {
  id: string;
  device: string;
  user_agent: string | null;
  client_ip: string | null;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
  /** Whether it is the session that asks. */
  current: boolean;
}

/** What a listing shows of a session row (`listSessionsOf`, and the one `endSessionOf` ends). */
const LISTING_COLUMNS = [
  'id',
  'user_agent',
  'client_ip',
  sql<string>`iso_utc(created_at)`.as('created_at'),
  sql<string>`iso_utc(last_seen_at)`.as('last_seen_at'),
  sql<string>`iso_utc(expires_at)`.as('expires_at'),
] as const;

/** The live sessions of an administrator, most recently used first; `currentId` marks the asking one. */
export async function listSessionsOf(db: Kysely<Database>, adminUserId: string, currentId?: string): Promise<SessionListing[]> {
  const rows = await db
    .selectFrom('admin_sessions')
    .select(LISTING_COLUMNS)
    .where('admin_user_id', '=', adminUserId)
    .where('expires_at', '>', sql<string>`now()`)
    .orderBy('last_seen_at', 'desc')
    .orderBy('id')
    .execute();
  return rows.map((row) => ({ ...row, device: describeUserAgent(row.user_agent), current: row.id === currentId }));
}

/** Ends one session of an administrator by its public id; the ended session, or undefined when she has no such live one. */
export async function endSessionOf(db: Kysely<Database>, adminUserId: string, id: string): Promise<SessionListing | undefined> {
  const row = await db
    .deleteFrom('admin_sessions')
    .where('admin_user_id', '=', adminUserId)
    .where('id', '=', id)
    .where('expires_at', '>', sql<string>`now()`)
    .returning(LISTING_COLUMNS)
    .executeTakeFirst();
  return row && { ...row, device: describeUserAgent(row.user_agent), current: false };
}

/**
 * Ends every live session of an administrator but the one whose public id is `keepId` (if any);
 * answers how many ended.
 */
export async function endSessionsOf(db: Kysely<Database>, adminUserId: string, keepId?: string): Promise<number> {
  let query = db.deleteFrom('admin_sessions').where('admin_user_id', '=', adminUserId).where('expires_at', '>', sql<string>`now()`);
  if (keepId !== undefined) query = query.where('id', '!=', keepId);
  const rows = await query.returning('id').execute();
  return rows.length;
}

const BROWSERS: [RegExp, string][] = [
  [/\bEdg(?:e|A|iOS)?\/(\d+)/, 'Edge'],
  [/\bOPR\/(\d+)/, 'Opera'],
  [/\bFirefox\/(\d+)/, 'Firefox'],
  [/\bFxiOS\/(\d+)/, 'Firefox'],
  [/\bCriOS\/(\d+)/, 'Chrome'],
  [/\bHeadlessChrome\/(\d+)/, 'Headless Chrome'],
  [/\bChrom(?:e|ium)\/(\d+)/, 'Chrome'],
  [/\bVersion\/(\d+)[^ ]* (?:Mobile\/\S+ )?Safari\//, 'Safari'],
  [/^curl\/(\d+)/, 'curl'],
];
const SYSTEMS: [RegExp, string][] = [
  [/\b(?:iPhone|iPad|iPod)\b/, 'iOS'],
  [/\bAndroid\b/, 'Android'],
  [/\bCrOS\b/, 'ChromeOS'],
  [/\bWindows\b/, 'Windows'],
  [/\bMac OS X\b|\bMacintosh\b/, 'macOS'],
  [/\bLinux\b/, 'Linux'],
];

/**
 * What a person recognises of a user agent: "Chrome 131 on Linux", "Safari 17 on iOS"; the first
 * 60 characters of one it does not know; "Unknown device" for none. A hint, not a proof: the
 * browser says what it likes.
 */
export function describeUserAgent(userAgent: string | null | undefined): string {
  const ua = userAgent?.trim() ?? '';
  if (ua === '') return 'Unknown device';
  const browser = BROWSERS.map(([re, name]) => {
    const match = re.exec(ua);
    return match ? `${name} ${match[1]}` : undefined;
  }).find((found) => found !== undefined);
  const system = SYSTEMS.find(([re]) => re.test(ua))?.[1];
  if (browser && system) return `${browser} on ${system}`;
  if (browser) return browser;
  if (system) return `A browser on ${system}`;
  return ua.length > 60 ? `${ua.slice(0, 59)}…` : ua;
}

/** Records that a session proved its administrator at `nowMs` (password or code): the fresh proof. */
export async function markSessionProven(db: Kysely<Database>, sessionId: string, nowMs: number): Promise<void> {
  if (!SESSION_ID.test(sessionId)) return;
  await db
    .updateTable('admin_sessions')
    .set({ proven_at: new Date(nowMs).toISOString() })
    .where('id_hash', '=', hashSessionId(sessionId))
    .execute();
}

/** Ends a session (sign-out). Unknown ids are ignored. */
export async function deleteAdminSession(db: Kysely<Database>, sessionId: string): Promise<void> {
  if (!SESSION_ID.test(sessionId)) return;
  await db.deleteFrom('admin_sessions').where('id_hash', '=', hashSessionId(sessionId)).execute();
}

/** Constant-time comparison of a presented CSRF token with the session's. */
export function csrfTokenMatches(presented: string | string[] | undefined, expected: string): boolean {
  if (typeof presented !== 'string') return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Ends every session of an administrator (removed, demoted, password changed or reset). */
export async function deleteSessionsOf(db: Kysely<Database>, adminUserId: string, exceptSessionId?: string): Promise<void> {
  let query = db.deleteFrom('admin_sessions').where('admin_user_id', '=', adminUserId);
  if (exceptSessionId !== undefined && SESSION_ID.test(exceptSessionId)) query = query.where('id_hash', '!=', hashSessionId(exceptSessionId));
  await query.execute();
}
