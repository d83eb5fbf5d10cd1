/**
 * All SQL of the mirror: applying records (the highest version wins), the sync state per resource,
 * and the log of received webhook events. Functions take the Kysely instance or transaction first.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { PoolClient } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { recordKey, type MirrorRecord, type ResourceName, type SyncResource } from '../sync-resources.ts';
import { inTransaction, type MirrorDatabase } from './mirror-database.ts';

const table = (resource: SyncResource) => sql.raw(`store_mirror.${resource.name}`);
const key = (resource: SyncResource) => sql.raw(resource.key);

/**
 * Which of two payloads of one record is newer: the higher `version` (the service's count of the
 * record's changes, decision 0057), then the later last_modified (records of a service without
 * versions count as version 0). A payload with a lower version never replaces a higher one, whatever
 * its last_modified says; the same version is the same record, so a redelivery changes nothing.
 */
const versionOf = (record: MirrorRecord): number => (typeof record.version === 'number' ? record.version : 0);
function newer(a: MirrorRecord, b: MirrorRecord): boolean {
  // The API's timestamps are fixed-width ISO text (microseconds, Z), so text order is time order.
  return versionOf(a) > versionOf(b) || (versionOf(a) === versionOf(b) && a.last_modified > b.last_modified);
}

/** The SQL of `newer`: the version of the record JSON `r` (0 without one). */
const versionSql = (r: RawBuilder<unknown>) => sql`coalesce((${r}->>'version')::bigint, 0)`;

/** ON CONFLICT's condition: the incoming row (EXCLUDED) is newer than the stored one, as `newer` says. */
function incomingIsNewer(resource: SyncResource): RawBuilder<unknown> {
  const held = table(resource);
  return sql`(${versionSql(sql`EXCLUDED.record`)}, EXCLUDED.last_modified) > (${versionSql(sql`${held}.record`)}, ${held}.last_modified)`;
}

/**
 * Upserts `records` into the resource's table in one statement. A record is written only when it
 * is newer than the stored one (`newer`: by version, then last_modified; the same version is the
 * same record, so a redelivery or a re-pull changes nothing). Returns the keys actually written.
 */
export async function applyRecords(db: Kysely<unknown>, resource: SyncResource, records: readonly MirrorRecord[]): Promise<string[]> {
  if (records.length === 0) return [];
  // One row per key (the newest) so a batch never touches a row twice.
  const newest = new Map<string, MirrorRecord>();
  for (const record of records) {
    const k = recordKey(resource, record);
    const held = newest.get(k);
    if (!held || newer(record, held)) newest.set(k, record);
  }
  const { rows } = await sql<{ k: string }>`
    INSERT INTO ${table(resource)} (${key(resource)}, last_modified, record)
    SELECT r->>${resource.key}, (r->>'last_modified')::timestamptz, r
    FROM jsonb_array_elements(${JSON.stringify([...newest.values()])}::jsonb) AS r
    ON CONFLICT (${key(resource)}) DO UPDATE SET last_modified = EXCLUDED.last_modified, record = EXCLUDED.record, mirrored_at = now()
      WHERE ${incomingIsNewer(resource)}
    RETURNING ${key(resource)} AS k`.execute(db);
  return rows.map((r) => r.k);
}

/** Where the initial sync stands after a batch (stored with the batch, see exportProgressQuery). */
export interface ExportProgress {
  cursor: string | null;
  records: number;
  done: boolean;
}

/**
 * Writes a batch of the initial sync, given as the NDJSON lines the service sent (one record's JSON
 * each, stored as its text), and the export position after it, in one transaction. Same rule as
 * applyRecords (the highest version wins; of one key's lines in the batch only the newest counts)
 * but the text goes to the database as it came. On PostgreSQL by `COPY … FROM STDIN`: first
 * straight into the resource's table under a savepoint, which is right whenever every key of the
 * batch is new and appears once (an initial sync into an empty table); a key already there or twice
 * in the batch is a unique violation, and then the batch goes into a temporary table merged into the
 * resource's table by one newest-wins statement. On PGlite (no COPY from a client stream) as one
 * JSON array parameter through the same merge. Commits without waiting for the WAL flush: the batch
 * takes its cursor with it, so a mirror that loses the last commits in a crash re-reads exactly them.
 */
export async function applyRecordLines(mirror: MirrorDatabase, resource: SyncResource, lines: readonly string[], progress: ExportProgress): Promise<void> {
  if (!mirror.pool) {
    await inTransaction(mirror, async (trx) => {
      await sql`SET LOCAL synchronous_commit = off`.execute(trx);
      if (lines.length > 0) await mergeRecords(resource, sql`jsonb_array_elements(${`[${lines.join(',')}]`}::jsonb) AS r`).execute(trx);
      await exportProgressQuery(resource.name, progress).execute(trx);
    });
    return;
  }
  const client = await mirror.pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    try {
      // The merge sorts the batch's rows by key to keep the newest of each: in memory, not in temporary files.
      await client.query(`SET LOCAL synchronous_commit = off; SET LOCAL work_mem = '64MB'`);
      if (lines.length > 0 && !(await copyNew(client, resource, lines))) {
        // One per session, emptied at every commit (or rollback), so the next batch finds it empty.
        await client.query('CREATE TEMPORARY TABLE IF NOT EXISTS mirror_batch (record jsonb NOT NULL) ON COMMIT DELETE ROWS');
        await pipeline(Readable.from(copyText(lines.map((line) => [line]))), client.query(copyFrom('COPY mirror_batch (record) FROM STDIN')));
        const merge = mergeRecords(resource, sql`(SELECT record AS r FROM mirror_batch) AS batch`).compile(mirror.db);
        await client.query(merge.sql, [...merge.parameters]);
      }
      const save = exportProgressQuery(resource.name, progress).compile(mirror.db);
      await client.query(save.sql, [...save.parameters]);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch((rollback: Error) => (broken = rollback));
      throw error;
    }
  } finally {
    // A connection whose rollback failed is in an unknown state: the pool drops it.
    client.release(broken);
  }
}

/**
 * COPYs the batch straight into the resource's table (key, last_modified and the line) under a
 * savepoint. False, with nothing written, when a key is already stored or repeats in the batch
 * (unique violation): the caller merges instead. Any other failure is the batch's.
 */
async function copyNew(client: PoolClient, resource: SyncResource, lines: readonly string[]): Promise<boolean> {
  const rows = lines.map((line) => {
    const record = JSON.parse(line) as MirrorRecord;
    return [recordKey(resource, record), record.last_modified, line];
  });
  await client.query('SAVEPOINT copy_new');
  try {
    const copy = client.query(copyFrom(`COPY store_mirror.${resource.name} (${resource.key}, last_modified, record) FROM STDIN`));
    await pipeline(Readable.from(copyText(rows)), copy);
  } catch (error) {
    if ((error as { code?: unknown }).code !== UNIQUE_VIOLATION) throw error;
    await client.query('ROLLBACK TO SAVEPOINT copy_new');
    return false;
  }
  await client.query('RELEASE SAVEPOINT copy_new');
  return true;
}

const UNIQUE_VIOLATION = '23505';

/** COPY's text format of `rows`: columns split by tabs, a backslash, tab, carriage return or line break in a value escaped. */
function* copyText(rows: readonly (readonly string[])[], chunk = 1000): Generator<string> {
  for (let i = 0; i < rows.length; i += chunk) {
    let text = '';
    for (const row of rows.slice(i, i + chunk)) text += `${row.map(copyValue).join('\t')}\n`;
    yield text;
  }
}

const copyValue = (value: string): string =>
  /[\\\t\r\n]/.test(value) ? value.replace(/[\\\t\r\n]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\r' ? '\\r' : '\\n')) : value;

/**
 * INSERT … ON CONFLICT of the records `rows` yields (a FROM item naming each record `r`): of one key
 * the newest only (highest version, then last_modified), and over a stored one only when newer, as applyRecords.
 */
function mergeRecords(resource: SyncResource, rows: RawBuilder<unknown>) {
  return sql`
    INSERT INTO ${table(resource)} (${key(resource)}, last_modified, record)
    SELECT DISTINCT ON (k) k, lm, r FROM (SELECT r->>${resource.key} AS k, (r->>'last_modified')::timestamptz AS lm, r FROM ${rows}) AS records
    ORDER BY k, ${versionSql(sql`r`)} DESC, lm DESC
    ON CONFLICT (${key(resource)}) DO UPDATE SET last_modified = EXCLUDED.last_modified, record = EXCLUDED.record, mirrored_at = now()
      WHERE ${incomingIsNewer(resource)}`;
}

/** Every record of the resource as stored, ordered by key. */
export async function* readRecords(db: Kysely<unknown>, resource: SyncResource, batch = 1000): AsyncGenerator<MirrorRecord> {
  let after = '';
  for (;;) {
    const { rows } = await sql<{ k: string; record: MirrorRecord }>`
      SELECT ${key(resource)} AS k, record FROM ${table(resource)} WHERE ${key(resource)} > ${after}
      ORDER BY ${key(resource)} COLLATE "C" LIMIT ${batch}`.execute(db);
    for (const row of rows) yield row.record;
    if (rows.length < batch) return;
    after = rows[rows.length - 1]!.k;
  }
}

/** A range's count and checksum (the server's /checksums answer, decision 0038). */
export interface RangeChecksum {
  range: string;
  count: number;
  checksum: string;
}

/** One record's key, last_modified (ISO text) and checksum (the server's /checksums/records answer). */
export interface KeyChecksum {
  key: string;
  last_modified: string;
  checksum: string;
}

/**
 * The mirror's side of the server's /checksums: per range (the key's first `length` characters)
 * among keys starting with `prefix`, its count and the sum of its records'
 * `jsonb_hash_extended(record, 0)` (the function the server applies to the record it sends).
 */
export async function rangeChecksums(db: Kysely<unknown>, resource: SyncResource, prefix: string, length: number): Promise<RangeChecksum[]> {
  const { rows } = await sql<RangeChecksum>`
    SELECT left(${key(resource)}, ${length}) AS range, count(*)::int AS count, sum(jsonb_hash_extended(record, 0))::text AS checksum
    FROM ${table(resource)} WHERE starts_with(${key(resource)}, ${prefix})
    GROUP BY 1`.execute(db);
  return rows;
}

/** Each record's checksum among keys starting with one of `prefixes` (as the server's /checksums/records). */
export async function keyChecksums(db: Kysely<unknown>, resource: SyncResource, prefixes: readonly string[]): Promise<KeyChecksum[]> {
  if (prefixes.length === 0) return [];
  const length = prefixes[0]!.length;
  const { rows } = await sql<KeyChecksum>`
    SELECT ${key(resource)} AS key, to_char(last_modified AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last_modified,
      jsonb_hash_extended(record, 0)::text AS checksum
    FROM ${table(resource)}
    WHERE ${prefixes.length === 1 ? sql`starts_with(${key(resource)}, ${prefixes[0]!})` : sql`left(${key(resource)}, ${length}) = ANY(${[...prefixes]}::text[])`}`.execute(
    db,
  );
  return rows;
}

/** Number of records of the resource in the mirror. */
export async function countRecords(db: Kysely<unknown>, resource: SyncResource): Promise<number> {
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${table(resource)}`.execute(db);
  return rows[0]!.n;
}

/** Sync state of one resource (see the sync_state table). */
export interface SyncState {
  resource: ResourceName;
  export_cursor: string | null;
  initial_done: boolean;
  initial_records: number;
  cursor: string | null;
  last_reconcile_at: string | null;
  last_reconcile_pulled: number | null;
  last_reconcile_applied: number | null;
  /** The scope the token lacked when a run or an init last skipped the resource (null: not skipped). */
  skipped_scope: string | null;
  /** Since when it has been skipped (ISO 8601), while it is. */
  skipped_since: string | null;
}

export async function readSyncState(db: Kysely<unknown>, resource: ResourceName): Promise<SyncState> {
  const { rows } = await sql<SyncState>`SELECT resource, export_cursor, initial_done, initial_records::int AS initial_records, cursor,
      last_reconcile_at, last_reconcile_pulled::int AS last_reconcile_pulled, last_reconcile_applied::int AS last_reconcile_applied,
      skipped_scope, to_char(skipped_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS skipped_since
    FROM store_mirror.sync_state WHERE resource = ${resource}`.execute(db);
  return (
    rows[0] ?? {
      resource,
      export_cursor: null,
      initial_done: false,
      initial_records: 0,
      cursor: null,
      last_reconcile_at: null,
      last_reconcile_pulled: null,
      last_reconcile_applied: null,
      skipped_scope: null,
      skipped_since: null,
    }
  );
}

/** Notes that the token lacks `scope` for the resource (kept since the first time it was skipped). */
export async function markSkipped(db: Kysely<unknown>, resource: ResourceName, scope: string): Promise<void> {
  await sql`INSERT INTO store_mirror.sync_state (resource, skipped_scope, skipped_since) VALUES (${resource}, ${scope}, now())
    ON CONFLICT (resource) DO UPDATE SET skipped_scope = EXCLUDED.skipped_scope,
      skipped_since = coalesce(store_mirror.sync_state.skipped_since, EXCLUDED.skipped_since), updated_at = now()`.execute(db);
}

/** Forgets that the resource was skipped: the token reads it now. */
export async function clearSkipped(db: Kysely<unknown>, resource: ResourceName): Promise<void> {
  await sql`UPDATE store_mirror.sync_state SET skipped_scope = NULL, skipped_since = NULL, updated_at = now()
    WHERE resource = ${resource} AND skipped_scope IS NOT NULL`.execute(db);
}

/** The initial sync's position after a batch of `records`, for the batch's transaction (added to the records so far). */
function exportProgressQuery(resource: ResourceName, { cursor, records, done }: ExportProgress) {
  return sql`INSERT INTO store_mirror.sync_state (resource, export_cursor, initial_records, initial_done, cursor)
    VALUES (${resource}, ${cursor}, ${records}, ${done}, ${done ? cursor : null})
    ON CONFLICT (resource) DO UPDATE SET export_cursor = EXCLUDED.export_cursor,
      initial_records = store_mirror.sync_state.initial_records + EXCLUDED.initial_records,
      initial_done = EXCLUDED.initial_done,
      cursor = CASE WHEN EXCLUDED.initial_done THEN EXCLUDED.export_cursor ELSE store_mirror.sync_state.cursor END,
      updated_at = now()`;
}

/** Stores the reconcile cursor after a page (in the page's transaction). */
export async function saveReconcileCursor(db: Kysely<unknown>, resource: ResourceName, cursor: string | null): Promise<void> {
  await sql`INSERT INTO store_mirror.sync_state (resource, cursor) VALUES (${resource}, ${cursor})
    ON CONFLICT (resource) DO UPDATE SET cursor = EXCLUDED.cursor, updated_at = now()`.execute(db);
}

/** Records the totals of a finished reconcile run of one resource. */
export async function saveReconcileRun(db: Kysely<unknown>, resource: ResourceName, pulled: number, applied: number): Promise<void> {
  await sql`UPDATE store_mirror.sync_state SET last_reconcile_at = now(), last_reconcile_pulled = ${pulled},
    last_reconcile_applied = ${applied}, updated_at = now() WHERE resource = ${resource}`.execute(db);
}

/** Clears the initial sync state of the resource so `init --restart` walks the export again. */
export async function resetInitialSync(db: Kysely<unknown>, resource: ResourceName): Promise<void> {
  await sql`DELETE FROM store_mirror.sync_state WHERE resource = ${resource}`.execute(db);
}

/**
 * Notes a received event. Returns false when its id was seen before (a redelivery): the caller
 * then changes nothing else.
 */
export async function recordEvent(db: Kysely<unknown>, event: { id: string; type: string; created_at: string }): Promise<boolean> {
  const { rows } = await sql<{ inserted: boolean }>`
    INSERT INTO store_mirror.received_events (event_id, type, created_at, applied) VALUES (${event.id}, ${event.type}, ${event.created_at}, false)
    ON CONFLICT (event_id) DO UPDATE SET deliveries = store_mirror.received_events.deliveries + 1
    RETURNING (xmax = 0) AS inserted`.execute(db);
  return rows[0]!.inserted;
}

export async function markEventApplied(db: Kysely<unknown>, eventId: string): Promise<void> {
  await sql`UPDATE store_mirror.received_events SET applied = true WHERE event_id = ${eventId}`.execute(db);
}

export interface EventSummary {
  received: number;
  applied: number;
  duplicates: number;
  last: { event_id: string; type: string; created_at: string; received_at: string } | null;
}

/** Totals of the received events and the newest one. */
export async function eventSummary(db: Kysely<unknown>): Promise<EventSummary> {
  const { rows } = await sql<{ received: number; applied: number; duplicates: number }>`
    SELECT count(*)::int AS received, count(*) FILTER (WHERE applied)::int AS applied, coalesce(sum(deliveries - 1), 0)::int AS duplicates
    FROM store_mirror.received_events`.execute(db);
  const { rows: last } = await sql<{ event_id: string; type: string; created_at: string; received_at: string }>`
    SELECT event_id, type, created_at, received_at FROM store_mirror.received_events ORDER BY received_at DESC, created_at DESC LIMIT 1`.execute(db);
  return { ...rows[0]!, last: last[0] ?? null };
}

/** Ids of every received event (the chaos test compares them with the service's deliveries). */
export async function receivedEventIds(db: Kysely<unknown>): Promise<Set<string>> {
  const { rows } = await sql<{ event_id: string }>`SELECT event_id FROM store_mirror.received_events`.execute(db);
  return new Set(rows.map((r) => r.event_id));
}
