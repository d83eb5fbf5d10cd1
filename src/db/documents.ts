/**
 * Stored documents: every record's JSON, kept next to its row and served as it is.
 *
 * Each resource's JSON is built by one SQL expression, named by its declaration's `document`
 * (resources/resource.ts; the kinds are derived in resources/store-schema.ts and passed in here).
 * Reads used to run that expression for every record on every request (three tables for a product).
 * Now the database runs it once per write: statement-level AFTER triggers on every table a document
 * reads from (products, variants, images, orders, order_items, customers, stock_movements) rebuild
 * the documents of the records that statement touched, in the same transaction, after the
 * last_modified forward trigger (migration 0006) has fixed the row's stamp. So after every commit
 * the stored document is what the expression says about the tables, whichever code path wrote
 * them. Lists, single GETs, exports and events serve the stored bytes (`json`, kept verbatim).
 *
 * A few bulk writes store the documents themselves, built by the same expressions in the statement
 * that writes the row, with the triggers silenced (`documentsBuilt`, `withDocumentsRebuiltLater`;
 * the stock writes, decision 0047): one row version instead of two.
 *
 * The same rebuild counts the record's versions and keeps what a write changed (decision 0057): it
 * bumps the row's `version` once per transaction (`version_xact`), appends it to the document, and
 * stores in `<column>_previous` the fields whose values before the transaction differ, which the
 * event writer copies into an `*.updated` event's `previous`.
 *
 * The trigger functions are generated from the same TypeScript expressions (`documentTriggersSql`),
 * so there is one definition of each document. Changing an expression needs a migration that calls
 * `installDocumentTriggers` and `rebuildDocuments` again; `checkDocuments` (run by the test suite
 * after every test app, and by `store-api documents check`) catches a document that differs.
 * Decision: docs/decisions/0012-stored-documents.md.
 */
import { EventEmitter } from 'node:events';
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import { ownStoreIs } from './store-scope.ts';

/**
 * One stored document: the column holding it, on which table (alias), built by which expression, and
 * the other tables the expression reads (each with its column naming the owning row). The kinds come
 * from the resource declarations (resources/store-schema.ts); this file knows no resource.
 */
export interface DocumentKind {
  /** Name used by the CLI and the check's report. */
  readonly name: string;
  /** The table holding the document (its owner). */
  readonly table: string;
  /** The alias the build expression refers to. */
  readonly alias: string;
  readonly column: string;
  readonly build: RawBuilder<unknown>;
  readonly children?: readonly { readonly table: string; readonly key: string }[];
  /**
   * Whether the owner's rows belong to a store (`store_id`, decision 0051): the rebuild and the check
   * then take the rows of the statement's store only (`ownStoreIs`), and `build` joins the children
   * by their store too (`childOfStore`). False on a database before migration 0031.
   */
  readonly stores?: boolean;
  /**
   * Whether the owner's rows have a `version` (decision 0057): the stored document then ends with
   * `"version": n`, the rebuild of a write's documents bumps it once per transaction and keeps what
   * the write changed in `<column>_previous`. False on a database before migration 0039.
   */
  readonly versions?: boolean;
}

/**
 * The document of `kind` as stored, for a row whose version is the SQL expression `version`: its
 * build with `"version": n` appended as the last field (the build is one JSON object), so every
 * declared document carries its record's version without any declaration naming it.
 */
export function storedDocument(kind: DocumentKind, version: RawBuilder<unknown>): RawBuilder<unknown> {
  if (!kind.versions) return sql`(${kind.build})::json`;
  return sql`(left((${kind.build})::text, -1) || ',"version":' || (${version})::text || '}')::json`;
}

/** The column holding what the last write changed in a document of column `column` (decision 0057). */
export function previousColumn(column: string): string {
  return `${column}_previous`;
}

/**
 * `<child>.store_id = <owner>.store_id AND ` with `stores` (a build expression's child rows are its
 * owner's store's: on a sharded database they live with it, decision 0051), nothing without (the
 * expression as a database before migration 0031 runs it: migrations 0009 and 0016 install the
 * triggers from the declarations of today, over tables without a store).
 */
export function childOfStore(stores: boolean, child: string, owner: string): RawBuilder<unknown> {
  return stores ? sql`${sql.ref(`${child}.store_id`)} = ${sql.ref(`${owner}.store_id`)} AND ` : sql``;
}

/** The condition restricting the owner rows of `kind` (aliased `alias`) to the statement's store, when they have one. */
function ownRows(kind: Pick<DocumentKind, 'stores'>, alias: string): RawBuilder<unknown> {
  return kind.stores ? ownStoreIs(`${alias}.store_id`) : sql`true`;
}

/** The tables holding documents, in the kinds' order. */
function ownersOf(kinds: readonly DocumentKind[]): string[] {
  return [...new Set(kinds.map((k) => k.table))];
}

/**
 * Which owner's documents a change to `table` touches, through which column of the changed row: every
 * owner through its id, every child table through its key. These are also the tables whose writes can
 * change a list page: each gets the cache-notify trigger (migration 0016's notify_store_changed).
 */
export function documentSources(kinds: readonly DocumentKind[]): { table: string; owner: string; key: string }[] {
  const sources = new Map<string, { table: string; owner: string; key: string }>();
  for (const owner of ownersOf(kinds)) {
    sources.set(owner, { table: owner, owner, key: 'id' });
    for (const kind of kinds.filter((k) => k.table === owner)) {
      for (const child of kind.children ?? []) {
        const known = sources.get(child.table);
        if (known && (known.owner !== owner || known.key !== child.key)) {
          throw new Error(`documents: ${child.table} is read by documents of ${known.owner} (${known.key}) and ${owner} (${child.key})`);
        }
        sources.set(child.table, { table: child.table, owner, key: child.key });
      }
    }
  }
  return [...sources.values()];
}

/** Runs the DDL of documentTriggersSql (creates or replaces the functions and triggers). */
export async function installDocumentTriggers<DB>(db: Kysely<DB>, kinds: readonly DocumentKind[]): Promise<void> {
  for (const statement of documentTriggersSql(db, kinds)) await sql.raw(statement).execute(db);
}

/**
 * (Re)installs the cache-notify trigger (decision 0016) on every table of `kinds`' documentSources:
 * a statement writing one NOTIFYs `store_changed` at commit, so every process's page caches learn of it.
 */
export async function installStoreNotifyTriggers<DB>(db: Kysely<DB>, kinds: readonly DocumentKind[]): Promise<void> {
  for (const { table } of documentSources(kinds)) {
    await sql.raw(`DROP TRIGGER IF EXISTS ${table}_notify_store_changed ON ${table}`).execute(db);
    await sql
      .raw(
        `CREATE TRIGGER ${table}_notify_store_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION notify_store_changed()`,
      )
      .execute(db);
  }
}

/** SQL text of an expression that has no parameters (the build expressions have none). */
function sqlText<DB>(db: Kysely<DB>, expression: RawBuilder<unknown>): string {
  const compiled = expression.compile(db);
  if (compiled.parameters.length > 0) throw new Error('a document expression must not take parameters');
  return compiled.sql;
}

/** `col = (expr)::json, …` for every document stored on `owner`'s rows. */
function setList<DB>(db: Kysely<DB>, kinds: readonly DocumentKind[], owner: string): string {
  return kinds
    .filter((k) => k.table === owner)
    .map((k) => `${k.column} = ${sqlText(db, storedDocument(k, sql.ref(`${k.alias}.version`)))}`)
    .join(', ');
}

/**
 * The new documents of the owner row aliased as the kinds' alias, as a FROM item `built` to join
 * laterally: `built.version` (the row's version, one more than before unless this transaction bumped
 * it already: `version_xact` names the transaction that did) and one column per document, named as
 * its column, holding the document at that version.
 */
export function documentsBuilt(kinds: readonly DocumentKind[], owner: string): RawBuilder<unknown> {
  const a = aliasOf(kinds, owner);
  const own = kinds.filter((k) => k.table === owner);
  const columns = own.map((k) => sql`${storedDocument(k, sql.ref('v.version'))} AS ${sql.ref(k.column)}`);
  return sql`CROSS JOIN LATERAL (SELECT v.version, ${sql.join(columns, sql`, `)} FROM (SELECT ${sql.ref(`${a}.version`)}
    + CASE WHEN ${sql.ref(`${a}.version_xact`)} = pg_current_xact_id() THEN 0 ELSE 1 END AS version) v) AS built`;
}

/**
 * The SET list storing `documentsBuilt` over the row aliased `target` (its values before the
 * statement): the version, the transaction that bumped it, every document and, in each document's
 * `<column>_previous`, the fields whose values before this transaction differ from the new document
 * (`document_previous`, migration 0039). Within one transaction the values before it are those kept
 * in `_previous` so far, else the document as the statement found it; a record created in the
 * transaction has none (null).
 */
export function documentsSetFromBuilt(kinds: readonly DocumentKind[], owner: string, target: string): RawBuilder<unknown> {
  aliasOf(kinds, owner);
  const t = (column: string) => sql.ref(`${target}.${column}`);
  return sql.join(
    [
      sql`version = built.version`,
      sql`version_xact = pg_current_xact_id()`,
      ...kinds
        .filter((k) => k.table === owner)
        .flatMap((k) => [
          sql`${sql.ref(k.column)} = ${sql.ref(`built.${k.column}`)}`,
          sql`${sql.ref(previousColumn(k.column))} = CASE
            WHEN ${t('version_xact')} IS DISTINCT FROM pg_current_xact_id() THEN document_previous('{}'::json, ${t(k.column)}, ${sql.ref(`built.${k.column}`)})
            WHEN ${t(previousColumn(k.column))} IS NOT NULL THEN document_previous(${t(previousColumn(k.column))}, ${t(k.column)}, ${sql.ref(`built.${k.column}`)})
          END`,
        ]),
    ],
    sql`, `,
  );
}

function aliasOf(kinds: readonly DocumentKind[], owner: string): string {
  const aliases = new Set(kinds.filter((k) => k.table === owner).map((k) => k.alias));
  if (aliases.size !== 1) throw new Error(`documents on ${owner} must share one alias, got ${[...aliases].join(', ')}`);
  return [...aliases][0]!;
}

/**
 * The DDL of the document columns' maintenance: one `refresh_<owner>_documents(uuid[])` per owner
 * and, per source table, AFTER INSERT / UPDATE / DELETE statement triggers with transition tables
 * that refresh the owners of the touched rows. The refresh's own UPDATE fires the owner's triggers
 * again one level deeper; they return at once (pg_trigger_depth() > 1). No other trigger writes
 * these tables, so every write by the application is at depth 1. rebuildDocuments sets
 * store_api.rebuilding_documents for its own transactions so its UPDATEs are not rebuilt twice.
 */
export function documentTriggersSql<DB>(db: Kysely<DB>, kinds: readonly DocumentKind[]): string[] {
  const parts: string[] = [];
  for (const owner of ownersOf(kinds)) {
    const a = aliasOf(kinds, owner);
    const own = kinds.find((k) => k.table === owner)!;
    if (own.versions && a === 't') throw new Error(`documents on ${owner}: the alias t is the refresh's own`);
    // With versions: the documents built once per row (FROM … built), stored with the version and
    // what changed (documentsSetFromBuilt over the row as the statement found it, `t`).
    const update = own.versions
      ? `UPDATE ${owner} t SET ${sqlText(db, documentsSetFromBuilt(kinds, owner, 't'))}
        FROM ${owner} ${a} ${sqlText(db, documentsBuilt(kinds, owner))}
        WHERE ${a}.id = ANY(ids) AND t.id = ${a}.id${own.stores ? ` AND t.store_id = ${a}.store_id` : ''}`
      : `UPDATE ${owner} ${a} SET ${setList(db, kinds, owner)} WHERE ${a}.id = ANY(ids)`;
    parts.push(`
    CREATE OR REPLACE FUNCTION refresh_${owner}_documents(ids uuid[]) RETURNS void LANGUAGE sql AS $fn$
      ${update}
    $fn$;`);
  }
  for (const { table, owner, key } of documentSources(kinds)) {
    const fn = `${table}_documents_after`;
    parts.push(`
    CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        IF pg_trigger_depth() > 1 OR current_setting('store_api.rebuilding_documents', true) = 'on' THEN RETURN NULL; END IF;
        IF TG_OP = 'INSERT' THEN
          PERFORM refresh_${owner}_documents(ARRAY(SELECT DISTINCT ${key} FROM new_rows));
        ELSIF TG_OP = 'UPDATE' THEN
          PERFORM refresh_${owner}_documents(ARRAY(SELECT ${key} FROM new_rows UNION SELECT ${key} FROM old_rows));
        ELSE
          PERFORM refresh_${owner}_documents(ARRAY(SELECT DISTINCT ${key} FROM old_rows));
        END IF;
        RETURN NULL;
      END
    $fn$;
    DROP TRIGGER IF EXISTS ${table}_documents_insert ON ${table};
    DROP TRIGGER IF EXISTS ${table}_documents_update ON ${table};
    DROP TRIGGER IF EXISTS ${table}_documents_delete ON ${table};
    CREATE TRIGGER ${table}_documents_insert AFTER INSERT ON ${table}
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}();
    CREATE TRIGGER ${table}_documents_update AFTER UPDATE ON ${table}
      REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}();
    CREATE TRIGGER ${table}_documents_delete AFTER DELETE ON ${table}
      REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}();`);
  }
  // One statement per element; whitespace collapsed so each is one line.
  return parts.flatMap((p) => p.split(/;\n(?= {4}(?:CREATE|DROP) )/)).map((p) => p.replace(/\s+/g, ' ').trim().replace(/;$/, ''));
}

/**
 * Runs `write` inside the caller's transaction with the stored documents' triggers silenced: for
 * writes whose owners the caller updates again later in the SAME transaction (which rebuilds
 * their documents then), so each document is built once instead of once per statement, and for
 * writes that store the documents themselves, built by the kind's own expression over the rows
 * they write (stock movements, inventory/stock.repository.ts), so each row is written once. The
 * setting is transaction-local and put back when `write` ends; when it throws, the transaction (or
 * its savepoint) is rolled back, which puts the setting back too.
 */
export async function withDocumentsRebuiltLater<DB, T>(trx: Transaction<DB>, write: () => Promise<T>): Promise<T> {
  await sql`SELECT set_config('store_api.rebuilding_documents', 'on', true)`.execute(trx);
  const result = await write();
  await sql`SELECT set_config('store_api.rebuilding_documents', 'off', true)`.execute(trx);
  return result;
}

/** Rows rebuilt per statement by rebuildDocuments: short statements, so the embedded database yields between them. */
export const REBUILD_BATCH = 2000;

export interface RebuildProgress {
  /** Table being filled. */
  table: string;
  /** Rows of that table done so far. */
  done: number;
  /** Rows of that table in all. */
  total: number;
}

/**
 * Emits 'progress' (RebuildProgress) for every batch of every rebuild, the migration's included, so
 * `store-api documents backfill` can show a progress bar while the migration fills a big store.
 */
export const rebuildEvents = new EventEmitter();

/**
 * Rebuilds the stored documents of every row (or only rows whose documents are missing), table by
 * table in id order, REBUILD_BATCH rows per statement, each statement its own transaction unless
 * `db` is one. Resumable: a run stopped half way leaves every finished batch stored. Returns the
 * rows rebuilt.
 */
export async function rebuildDocuments<DB>(
  db: Kysely<DB>,
  kinds: readonly DocumentKind[],
  options: { onlyMissing?: boolean; batch?: number; onProgress?: (p: RebuildProgress) => void } = {},
): Promise<number> {
  const batch = options.batch ?? REBUILD_BATCH;
  let rebuilt = 0;
  for (const owner of ownersOf(kinds)) {
    const a = aliasOf(kinds, owner);
    const missing = options.onlyMissing
      ? `(${kinds
          .filter((k) => k.table === owner)
          .map((k) => `${a}.${k.column} IS NULL`)
          .join(' OR ')})`
      : 'true';
    // The owner's documents share one alias and one table: its rows have a store or none.
    const own = () => ownRows(kinds.find((k) => k.table === owner)!, a);
    const { rows: counted } = await sql<{ n: string }>`
      SELECT count(*)::text AS n FROM ${sql.raw(`${owner} ${a}`)} WHERE ${own()} AND ${sql.raw(missing)}`.execute(db);
    const total = Number(counted[0]!.n);
    let done = 0;
    let after = '00000000-0000-0000-0000-000000000000';
    const report = (p: RebuildProgress) => {
      options.onProgress?.(p);
      rebuildEvents.emit('progress', p);
    };
    report({ table: owner, done, total });
    for (;;) {
      // Each batch in its own short transaction (or inside the caller's, e.g. a migration), flagged
      // so that the owner's triggers do not rebuild the rows this UPDATE just rebuilt.
      const rows = await inTransaction(db, async (trx) => {
        await sql`SELECT set_config('store_api.rebuilding_documents', 'on', true)`.execute(trx);
        const result = await sql<{ id: string }>`
          UPDATE ${sql.raw(`${owner} ${a}`)} SET ${sql.raw(setList(db, kinds, owner))}
          WHERE ${own()} AND ${sql.raw(`${a}.id`)} IN (
            SELECT id FROM ${sql.raw(owner)} ${sql.raw(a)} WHERE ${own()} AND ${sql.raw(`${a}.id`)} > ${after}::uuid AND ${sql.raw(missing)}
            ORDER BY id LIMIT ${batch})
          RETURNING ${sql.raw(`${a}.id`)}::text AS id
        `.execute(trx);
        await sql`SELECT set_config('store_api.rebuilding_documents', 'off', true)`.execute(trx);
        return result.rows;
      });
      if (rows.length === 0) break;
      done += rows.length;
      rebuilt += rows.length;
      // biome-ignore lint/complexity/useMathMinMax: ids are uuid text compared as strings, not numbers.
      after = rows.reduce((max, r) => (r.id > max ? r.id : max), after);
      report({ table: owner, done, total });
      if (rows.length < batch) break;
    }
  }
  return rebuilt;
}

async function inTransaction<DB, T>(db: Kysely<DB>, fn: (trx: Kysely<DB>) => Promise<T>): Promise<T> {
  return db.isTransaction ? fn(db) : db.transaction().execute(fn);
}

export interface DocumentDifference {
  kind: DocumentKind['name'];
  id: string;
  stored: string | null;
  rebuilt: string;
}

/**
 * Rebuilds every document from the tables and compares it, byte for byte, with the stored one.
 * Returns the records that differ (at most `limit`); empty when every stored document is right.
 */
export async function checkDocuments<DB>(db: Kysely<DB>, kinds: readonly DocumentKind[], { limit = 100 } = {}): Promise<DocumentDifference[]> {
  const differences: DocumentDifference[] = [];
  for (const kind of kinds) {
    if (differences.length >= limit) break;
    const a = sql.raw(kind.alias);
    const { rows } = await sql<{ id: string; stored: string | null; rebuilt: string }>`
      SELECT * FROM (
        SELECT ${a}.id::text AS id, ${sql.raw(`${kind.alias}.${kind.column}`)}::text AS stored, ${storedDocument(kind, sql.ref(`${kind.alias}.version`))}::text AS rebuilt
        FROM ${sql.raw(kind.table)} ${a} WHERE ${ownRows(kind, kind.alias)}) d
      WHERE d.stored IS DISTINCT FROM d.rebuilt
      ORDER BY d.id LIMIT ${limit - differences.length}
    `.execute(db);
    for (const row of rows) differences.push({ kind: kind.name, ...row });
  }
  return differences;
}
