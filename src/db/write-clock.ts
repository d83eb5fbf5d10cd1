/**
 * The write clock and the read horizon: how an incremental pull never misses a change.
 *
 * Problem: a writer stamps `last_modified = T` and commits later. A reader that ran in between
 * returned rows up to some T' > T and handed out a cursor past T; the late commit lands behind the
 * cursor and is never seen.
 *
 * Protocol:
 *  - Writer (`runWrite`): first takes a *shared* transaction-level advisory lock WRITE_LOCK_KEY, then
 *    reads `clock_timestamp()` as its stamp. Every row it writes carries that stamp. Writers do not
 *    block each other (shared lock).
 *  - Reader (`readHorizon`): first fixes t (its statement's start), then reads the oldest `xact_start`
 *    of any backend holding the write lock. horizon = min(t, that xact_start). Lists return only rows with
 *    `last_modified < horizon`.
 *  Why it holds: a writer holding the lock when the reader looked has stamp ≥ its xact_start ≥
 *  horizon. A writer that took the lock after the reader looked read its stamp after that, so stamp
 *  > t ≥ horizon. Either way no row can still commit below the horizon. The cost is a wait of at most
 *  one write transaction's length before a change shows up in lists.
 *  A stamp is taken before the row locks, so a writer can update a row after a later-stamped writer
 *  committed it; a trigger (migration 0006) then moves the row one microsecond past the version it
 *  replaces, so a record's last_modified never goes back and "newest wins" consumers stay right.
 *
 * Per store (decision 0051, "One store's long write holds only its own horizon"): a writer acting
 * for a store takes the shared lock (WRITE_LOCK_KEY, hashtext(store id)) instead, and a reader
 * acting for a store looks only at the holders of its store's key and of the deployment-wide key
 * (writers with no store); a reader across stores (the event poller's scan) looks at every holder.
 * So one store's 30-second import holds back its own lists and events, not every other store's.
 * Two stores whose ids hash alike only wait for each other, as every store did before.
 *
 * PGlite has one connection that Kysely serialises, so a reader never runs inside someone else's
 * open write and the lock table is empty; the same code holds there trivially.
 */
import { EventEmitter } from 'node:events';
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { Database } from './schema.ts';
import { activeRequestTransaction } from './request-transaction.ts';
import { currentStoreId } from './store-scope.ts';

/** Advisory lock key shared by all writers of store data ('SIAW' as an int). */
export const WRITE_LOCK_KEY = 0x53494157;

export interface WriteContext {
  readonly trx: Transaction<Database>;
  /** The stamp of this transaction: the `last_modified` of everything it writes (timestamptz text). */
  readonly stamp: string;
}

/**
 * In-process signal 'commit' (arguments: the Kysely instance written to, the store written for or
 * undefined) after every write-clock
 * transaction commits, so a worker in the same process (the `all` role, PGlite) can look at the
 * event log at once instead of at its next poll. Other processes learn of writes by NOTIFY.
 */
export const writeCommits = new EventEmitter();
writeCommits.setMaxListeners(0);

/** SQLSTATEs after which the whole transaction is run again: it was rolled back and changed nothing. */
const RETRYABLE = new Set(['40P01', '40001']); // deadlock_detected, serialization_failure
/** Runs of one write before its deadlock is given up (then answered 503, shared/db-errors.ts). */
export const WRITE_ATTEMPTS = 4;

/**
 * Runs `fn` in one transaction that takes part in the write-clock protocol. Keep it short and never
 * do network I/O inside: PGlite runs one query at a time for the whole process. A transaction that
 * loses a deadlock (or a serialization race) is rolled back by the server and run again from the
 * start, up to WRITE_ATTEMPTS times, so `fn` may run more than once: keep its effects inside `trx`.
 */
export async function runWrite<T>(db: Kysely<Database>, fn: (ctx: WriteContext) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await db.transaction().execute(async (trx) => {
        const store = currentStoreId();
        if (store === undefined) await sql`SELECT pg_advisory_xact_lock_shared(${WRITE_LOCK_KEY}::bigint)`.execute(trx);
        else await sql`SELECT pg_advisory_xact_lock_shared(${WRITE_LOCK_KEY}::int, hashtext(${store}::uuid::text))`.execute(trx);
        const { rows } = await sql<{ stamp: string }>`SELECT clock_timestamp() AS stamp`.execute(trx);
        return fn({ trx, stamp: rows[0]!.stamp });
      });
      // Inside a request transaction (db/request-transaction.ts) this was a savepoint: the change is
      // not visible before the request commits, so the signal waits for that commit.
      const request = activeRequestTransaction();
      const store = currentStoreId();
      if (request) request.afterCommit(() => writeCommits.emit('commit', db, store));
      else writeCommits.emit('commit', db, store);
      return result;
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (attempt >= WRITE_ATTEMPTS || typeof code !== 'string' || !RETRYABLE.has(code)) throw error;
      // A short random pause so the two losers of one race do not meet again at once.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
    }
  }
}

/**
 * The read horizon (timestamptz text): rows with `last_modified < horizon` are final. In a store's
 * scope, that store's (its writers and those of no store); otherwise every writer's.
 */
export async function readHorizon(db: Kysely<Database> | Transaction<Database>): Promise<string> {
  // One statement: t = statement_timestamp() is fixed when the statement arrives, before its lock
  // table look, which is all the protocol needs (an earlier t is only more conservative). It replaced
  // clock_timestamp() in a statement of its own: one round trip per list instead of two.
  // pg_stat_get_activity(pid) reads only the lock holders' entries; the pg_stat_activity view built
  // every backend's row and cost ~3× more per list request (measured with pgbench, bench/README.md).
  // A bigint advisory key shows as classid = high 32 bits, objid = low 32 bits, objsubid = 1.
  const store = currentStoreId();
  const { rows } = await sql<{ horizon: string }>`SELECT ${horizonExpression(store === undefined ? undefined : sql`${store}::uuid`)} AS horizon`.execute(db);
  return rows[0]!.horizon;
}

/**
 * The read horizon as an SQL expression (timestamptz), evaluated when its statement starts: of the
 * store `store` (an SQL uuid expression: a parameter, or a column of the statement), or of every
 * store when undefined. A two-key advisory lock shows as classid = key 1, objid = key 2 (as an
 * unsigned 32-bit oid), objsubid = 2.
 */
export function horizonExpression(store: RawBuilder<unknown> | undefined): RawBuilder<string> {
  const storeKey =
    store === undefined
      ? sql`l.objsubid = 2 AND l.classid = ${WRITE_LOCK_KEY}::bigint::oid`
      : sql`l.objsubid = 2 AND l.classid = ${WRITE_LOCK_KEY}::bigint::oid AND l.objid = (hashtext((${store})::text)::bigint & 4294967295)::oid`;
  return sql<string>`least(statement_timestamp(), (
      SELECT min(a.xact_start)
      FROM pg_locks l CROSS JOIN LATERAL pg_stat_get_activity(l.pid) a
      WHERE l.locktype = 'advisory' AND l.granted
        AND ((l.objsubid = 1 AND l.classid = 0 AND l.objid = ${WRITE_LOCK_KEY}::bigint::oid) OR (${storeKey}))
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    ))`;
}

/**
 * The read horizon of one statement that reads its page in the same statement (decision 0037,
 * amended), on the embedded database ONLY: `statement_timestamp()`. Its one connection runs a
 * statement only while no write transaction is open (a transaction holds the connection from BEGIN
 * to COMMIT, and the data directory admits one process), so the lock table holds no writer and
 * readHorizon's answer would be exactly the statement's start; every write that committed before it
 * is in its snapshot and none can commit during it. The page then costs one turn of the connection
 * instead of two, and nothing to plan for the horizon (planning readHorizon's lock-table look
 * inside the page statement cost more than the statement it saved). On PostgreSQL a writer can
 * commit between a statement's snapshot and its look at the lock table, its rows below the horizon
 * yet not in the snapshot: there the horizon is a statement of its own (sharedHorizon), read before
 * the page.
 */
export function inStatementHorizon(backend: 'pglite' | 'postgres'): RawBuilder<string> | undefined {
  return backend === 'pglite' ? sql<string>`statement_timestamp()` : undefined;
}

/**
 * One horizon statement shared by the requests that wait for it (decision 0037): a read
 * of the list or an export needs a horizon read AFTER it arrived (an earlier one would hide a write
 * its client committed just before asking), not one of its own. The first caller starts a read;
 * callers arriving while it runs wait for the next one, which starts when it ends and serves all of
 * them. Under load N concurrent pages cost one horizon statement per round trip instead of N, and
 * each gets a horizon read after its arrival, which is all the protocol above needs (any horizon
 * read later than a request's arrival is correct for it; a slightly older one than its own would
 * be is only more conservative). Per database handle.
 */
interface HorizonSlot {
  running?: Promise<string>;
  next?: Promise<string>;
}
const horizonReaders = new WeakMap<object, Map<string, HorizonSlot>>();

/** Per database handle and store (each store has its own horizon; '' for no store). */
export function sharedHorizon(db: Kysely<Database>): Promise<string> {
  let slots = horizonReaders.get(db);
  if (!slots) {
    slots = new Map();
    horizonReaders.set(db, slots);
  }
  const scope = currentStoreId() ?? '';
  let state = slots.get(scope);
  if (!state) {
    state = {};
    slots.set(scope, state);
  }
  const slot = state;
  const all = slots;
  // An idle store's slot is dropped once its reads are done: the map holds the stores being read.
  const forget = () => {
    if (!slot.running && !slot.next && all.get(scope) === slot) all.delete(scope);
  };
  if (!slot.running) {
    const read = readHorizon(db).finally(() => {
      if (slot.running === read) slot.running = undefined;
      forget();
    });
    slot.running = read;
    return read;
  }
  // A read is under way, begun before this caller arrived: wait for it, then share the next one.
  if (!slot.next) {
    const previous = slot.running;
    const next = previous
      .catch(() => undefined)
      .then(() => {
        slot.next = undefined;
        const read = readHorizon(db).finally(() => {
          if (slot.running === read) slot.running = undefined;
          forget();
        });
        slot.running = read;
        return read;
      });
    slot.next = next;
  }
  return slot.next;
}
