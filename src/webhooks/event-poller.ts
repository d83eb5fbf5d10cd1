/**
 * The event poller: reads new events from the event log and fans each out as one delivery per
 * subscribed, enabled endpoint, advancing its position in the same transaction, so a crash neither
 * drops nor double-queues an event.
 *
 * Reading order and positions follow the write-clock protocol (db/write-clock.ts): events are read
 * in (created_at, seq) order and only below readHorizon(), below which no in-flight write can still
 * commit. Reading by seq alone would miss a transaction that took its seq early and committed late.
 *
 * Fair across stores (decision 0051, migration 0034): a poll first scans the events after the
 * deployment's scan position (webhook_poller_state) up to the horizon, which only raises each
 * event's store's target (webhook_store_positions), then fans out the stores that are behind, least
 * recently served first, each up to a share of the batch, in its own (created_at, seq) order from its
 * own position. A store's 100,000-event import is fanned out a share per poll while another store's
 * next event goes out in the next poll, not after the import. Only the events some enabled endpoint
 * of the store wants are read; the others are crossed (a store's share not filled moves it to its
 * target), so a run of events nobody subscribed to (an import's stock movements) costs one poll
 * (decision 0022), and a store with no enabled endpoint moves with its target at the scan. The
 * stores whose share is not filled (little to fan out) go in a poll of their own before those whose
 * share is (decision 0065): a store's next change is not committed after a share of another store's
 * import.
 *
 * Several workers may poll one database: the scan's row is taken `FOR UPDATE SKIP LOCKED`, so one
 * of them scans and fans out a batch and the others skip that round. Ping events are never fanned
 * out (they are sent to one endpoint on demand), and an endpoint gets only events written after it
 * was registered (a replay sends older ones). A store's events go to that store's endpoints only
 * (joined on store_id), deliveries are inserted with the event's store and read back by
 * (store_id, id). A store being deleted gets no new deliveries.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { INDEX_READS } from '../db/index-reads.ts';
import { horizonExpression } from '../db/write-clock.ts';
import { isoFromMillis } from '../shared/time.ts';
import {
  ASYNC_COMMIT,
  STORE_ACTIVE,
  claimedColumns,
  claimedDelivery,
  eventOfDelivery,
  type ClaimedDelivery,
  type ClaimedRow,
  type ClaimOptions,
} from './delivery-queue.ts';
import './webhook.tables.ts';

export interface PollResult {
  /** False when another worker held the position (nothing done). */
  readonly polled: boolean;
  readonly events: number;
  readonly deliveries: number;
  /** True when a full batch was read: call again without waiting. */
  readonly more: boolean;
  /** Deliveries queued already leased to the polling worker (`handover`), ready to send. */
  readonly handedOver: readonly ClaimedDelivery[];
  /**
   * Of `deliveries`, those queued for an endpoint its breaker has paused (counted with `handover`
   * only, else 0): no claim takes them before the pause ends, so they need no claim now.
   */
  readonly paused: number;
}

/**
 * The polling worker's room for the deliveries it queues (as a claim's, delivery-queue.ts): they are
 * inserted already leased to it, up to `limit` and each endpoint's free slots, in rounds across
 * stores and then endpoints, and come back ready to send, so a fresh delivery costs no claim statement. Only
 * endpoints a claim would take from now (enabled, breaker closed) and with no free due first attempt
 * older than these (oldest first holds within an endpoint: a backlog is claimed, not overtaken).
 */
export type Handover = Pick<ClaimOptions, 'workerId' | 'leaseMs' | 'limit' | 'freeSlots' | 'endpointCapacity' | 'held' | 'heldByStore' | 'breaker'>;

const NOTHING: readonly ClaimedDelivery[] = [];

/**
 * Reads up to `batchSize` events after the position and queues their deliveries, in one transaction;
 * with `handover`, the first of them leased to that worker (see Handover). `handover` is asked only
 * once there are events to fan out (an idle poll costs the worker no room).
 */
export async function pollEvents(
  db: Kysely<Database>,
  now: number,
  batchSize = 500,
  handoverOf: () => Handover | undefined = () => undefined,
  known = false,
): Promise<PollResult> {
  const nowIso = isoFromMillis(now);
  // Most polls find nothing: answer those with one cheap query instead of a transaction (on the
  // embedded database every statement runs on the thread that also serves HTTP). Not when the
  // caller knows there is work (`known`: its last poll answered `more`): the check would only
  // delay the poll, and while another store's import is in flight it is not free (pollPending).
  if (!known && !(await pollPending(db))) return { polled: true, events: 0, deliveries: 0, more: false, handedOver: NOTHING, paused: 0 };
  return db.transaction().execute(async (trx) => {
    // The poll reads by index only (db/index-reads.ts): its first statement sets that. It reads the
    // horizon too, in a statement before the scan's (write-clock.ts: a statement that read both its
    // rows and the lock table could miss a write committed between the two).
    const { rows: state } = await sql<{ position_created_at: string; position_seq: number; horizon: string }>`
      SELECT position_created_at, position_seq, ${horizonExpression(undefined)} AS horizon
      FROM webhook_poller_state WHERE id = 1 AND ${ASYNC_COMMIT} AND ${INDEX_READS} FOR UPDATE SKIP LOCKED
    `.execute(trx);
    if (state.length === 0) return { polled: false, events: 0, deliveries: 0, more: false, handedOver: NOTHING, paused: 0 };
    const horizon = state[0]!.horizon;

    // 1. The scan: every event between its position and the horizon raises its store's target; past
    // it, the look-ahead raises those of the stores that wrote last; the scan's position moves. One
    // statement a round (each round is a round trip on a database the busy stores keep busy).
    let scanned = { created_at: state[0]!.position_created_at, seq: state[0]!.position_seq };
    let scanFull = false;
    for (let round = 0; round < SCAN_ROUNDS; round++) {
      const step = await scan(trx, scanned, horizon, nowIso);
      scanned = step.last;
      scanFull = step.full;
      if (!scanFull) break;
    }

    // 2. The fan-out's stores: those behind, least recently served first, a share of the batch each;
    // 3. each one's next events some enabled endpoint of its own wants, up to its share, in
    // (created_at, seq) order: in two parts, the rest of the position's stamp by seq, then the later
    // stamps (one import's events share one stamp, and a seek written as (created_at, seq) >
    // position let a planner without statistics scan that whole stamp for every batch). Events
    // nobody wants are never read into the batch: a store whose share is not filled moves to its
    // target (everything up to it was looked at). One statement: a row per event read, or one with
    // no event for a served store none of whose events was read.
    const wanted = sql`ev.type <> 'ping' AND NOT ev.test
      AND (ev.created_at >= w.everything_since OR ev.created_at >= (w.since_by_type ->> ev.type)::timestamptz)`;
    const { rows } = await sql<
      StorePosition & { rank: number; behind: number; share: number; id: string | null; created_at: string | null; seq: number | null }
    >`
      WITH behind AS (
        SELECT sp.store_id, sp.position_created_at, sp.position_seq, sp.target_created_at, sp.target_seq,
          row_number() OVER (ORDER BY sp.served_at, sp.store_id)::int AS rank
        FROM webhook_store_positions sp WHERE ${BEHIND} AND ${STORE_NOT_DELETING}
        ORDER BY sp.served_at, sp.store_id LIMIT ${STORES_PER_POLL + 1}
      ), counted AS (
        SELECT count(*)::int AS behind, greatest(1, ${batchSize}::int / greatest(1, least(count(*)::int, ${STORES_PER_POLL}::int)))::int AS share FROM behind
      )
      SELECT b.store_id, b.position_created_at, b.position_seq, b.target_created_at, b.target_seq, b.rank, c.behind, c.share,
        ev.id, ev.created_at, ev.seq
      FROM behind b CROSS JOIN counted c
      CROSS JOIN LATERAL (
        -- What the store's enabled endpoints want: everything since the first with no event types
        -- was registered, each type since the first that names it.
        SELECT
          (SELECT min(e.created_at) FROM webhook_endpoints e WHERE e.store_id = b.store_id AND e.enabled AND cardinality(e.event_types) = 0) AS everything_since,
          (SELECT coalesce(jsonb_object_agg(type, since), '{}'::jsonb) FROM (
            SELECT t AS type, min(e.created_at) AS since
            FROM webhook_endpoints e CROSS JOIN LATERAL unnest(e.event_types) AS t
            WHERE e.store_id = b.store_id AND e.enabled GROUP BY t) s) AS since_by_type
      ) w
      LEFT JOIN LATERAL (
        (SELECT ev.id, ev.created_at, ev.seq FROM events ev
          WHERE ev.store_id = b.store_id AND ev.created_at = b.position_created_at AND ev.seq > b.position_seq
            AND (ev.created_at, ev.seq) <= (b.target_created_at, b.target_seq) AND ${wanted}
          ORDER BY ev.seq LIMIT c.share)
        UNION ALL
        (SELECT ev.id, ev.created_at, ev.seq FROM events ev
          WHERE ev.store_id = b.store_id AND ev.created_at > b.position_created_at
            AND (ev.created_at, ev.seq) <= (b.target_created_at, b.target_seq) AND ${wanted}
          ORDER BY ev.created_at, ev.seq LIMIT c.share)
        ORDER BY created_at, seq LIMIT c.share
      ) ev ON true
      WHERE b.rank <= ${STORES_PER_POLL}
      ORDER BY ev.created_at, ev.seq, b.store_id
    `.execute(trx);
    if (rows.length === 0) return { polled: true, events: 0, deliveries: 0, more: scanFull, handedOver: NOTHING, paused: 0 };
    const share = rows[0]!.share;
    const served = [...new Map(rows.map((r) => [r.store_id, r])).values()].sort((x, y) => x.rank - y.rank);
    const read = rows.filter((r): r is typeof r & { id: string; created_at: string; seq: number } => r.id !== null);

    // 4. Where each store's position moves: past its share when it was filled, else to its target.
    const readOf = new Map<string, { count: number; last: { created_at: string; seq: number } }>();
    for (const r of read) {
      const seen = readOf.get(r.store_id);
      if (seen) {
        seen.count++;
        seen.last = r;
      } else readOf.set(r.store_id, { count: 1, last: r });
    }
    const moves = served.map((s) => {
      const got = readOf.get(s.store_id);
      const full = got !== undefined && got.count === share;
      return { store_id: s.store_id, full, to: full ? got.last : { created_at: s.target_created_at, seq: s.target_seq } };
    });
    // The stores with little to fan out (their share not filled) go first, in a poll of their own:
    // when some served store filled its share, its deliveries wait for the next poll (called at
    // once: `more`), so another store's few are not committed after a share of a busy store's
    // inserts (decision 0065). What was read of the busy stores is read again then. Only while the
    // least recently served store is one of the few: a busy store, not moved, stays the least
    // recently served, so it waits at most until every store served before it has been once.
    const light = moves.filter((m) => !m.full);
    const moved = !moves[0]!.full && light.length < moves.length ? light : moves;
    // The positions move in the fan-out's own statement (one round trip fewer), or alone when
    // nothing is fanned out.
    const movePositions = sql`
      UPDATE webhook_store_positions sp
      SET position_created_at = m.created_at, position_seq = m.seq, served_at = ${nowIso}::timestamptz
      FROM unnest(${moved.map((m) => m.store_id)}::uuid[], ${moved.map((m) => m.to.created_at)}::timestamptz[], ${moved.map((m) => m.to.seq)}::bigint[])
        AS m(store_id, created_at, seq)
      WHERE sp.store_id = m.store_id`;
    const more = scanFull || rows[0]!.behind > served.length || moves.some((m) => m.full);
    const movedStores = new Set(moved.map((m) => m.store_id));
    const events = moved === moves ? read : read.filter((r) => movedStores.has(r.store_id));
    if (events.length === 0) {
      await movePositions.execute(trx);
      return { polled: true, events: 0, deliveries: 0, more, handedOver: NOTHING, paused: 0 };
    }

    const batch = { storeIds: events.map((e) => e.store_id), eventIds: events.map((e) => e.id) };
    const handover = handoverOf();
    if (!handover || handover.limit <= 0) {
      const inserted = await sql`
        WITH moved AS (${movePositions})
        INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at)
        SELECT gen_random_uuid(), ev.store_id, ev.id, ev.type, e.id, 'pending', ${nowIso}::timestamptz, ${nowIso}::timestamptz, ${nowIso}::timestamptz
        ${fanOut(batch)}
        ORDER BY ev.created_at, ev.seq, e.id
      `.execute(trx);
      return { polled: true, events: events.length, deliveries: Number(inserted.numAffectedRows ?? 0), more, handedOver: NOTHING, paused: 0 };
    }

    const slots = JSON.stringify(Object.fromEntries(handover.freeSlots));
    const held = JSON.stringify(Object.fromEntries(handover.held ?? []));
    const heldByStore = JSON.stringify(Object.fromEntries(handover.heldByStore ?? []));
    const { rows: fanned } = await sql<ClaimedRow & { total: number; paused: number; handed: boolean }>`
      WITH moved AS (${movePositions}), fresh AS (
        SELECT ev.id AS event_id, ev.store_id, ev.type AS event_type, e.id AS endpoint_id, ev.created_at, ev.seq,
          -- As a claim ranks: the endpoint's k-th row after those it has in flight here.
          coalesce((${held}::jsonb ->> e.id::text)::int, 0) + row_number() OVER (PARTITION BY e.id ORDER BY ev.created_at, ev.seq) AS rank,
          e.paused_until > ${nowIso}::timestamptz AS paused,
          row_number() OVER (PARTITION BY e.id ORDER BY ev.created_at, ev.seq) <= coalesce((${slots}::jsonb ->> e.id::text)::int, ${handover.endpointCapacity})
            AND e.consecutive_failures < ${handover.breaker.threshold}
            -- A FIFO endpoint's deliveries wait for its line's claim (decision 0059).
            AND e.delivery_order = 'unordered'
            AND (e.paused_until IS NULL OR e.paused_until <= ${nowIso}::timestamptz)
            AND ${STORE_ACTIVE}
            AND NOT EXISTS (
              SELECT 1 FROM webhook_deliveries d
              WHERE d.store_id = e.store_id AND d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= ${nowIso}::timestamptz
                AND (d.locked_until IS NULL OR d.locked_until <= ${nowIso}::timestamptz)) AS eligible
        ${fanOut(batch)}
      ), handed AS (
        -- As a claim takes them: in rounds across stores (the store's k-th after those it has in
        -- flight here), then across endpoints, oldest first.
        SELECT h.event_id, h.endpoint_id FROM (
          SELECT f.event_id, f.endpoint_id, f.rank, f.created_at, f.seq,
            coalesce((${heldByStore}::jsonb ->> f.store_id::text)::int, 0)
              + row_number() OVER (PARTITION BY f.store_id ORDER BY f.rank, f.created_at, f.seq, f.endpoint_id) AS store_rank
          FROM fresh f WHERE f.eligible
        ) h
        ORDER BY h.store_rank, h.rank, h.created_at, h.seq, h.endpoint_id
        LIMIT ${handover.limit}
      ), inserted AS (
        INSERT INTO webhook_deliveries (id, store_id, event_id, event_type, endpoint_id, status, next_attempt_at, created_at, updated_at, locked_by, locked_at, locked_until)
        SELECT gen_random_uuid(), f.store_id, f.event_id, f.event_type, f.endpoint_id, 'pending', ${nowIso}::timestamptz, ${nowIso}::timestamptz, ${nowIso}::timestamptz,
          CASE WHEN h.event_id IS NOT NULL THEN ${handover.workerId} END,
          CASE WHEN h.event_id IS NOT NULL THEN ${nowIso}::timestamptz END,
          CASE WHEN h.event_id IS NOT NULL THEN ${isoFromMillis(now + handover.leaseMs)}::timestamptz END
        FROM fresh f LEFT JOIN handed h ON h.event_id = f.event_id AND h.endpoint_id = f.endpoint_id
        ORDER BY f.created_at, f.seq, f.endpoint_id
        RETURNING id, store_id, event_id, endpoint_id, attempt_count, locked_by, test
      ), total AS (
        SELECT count(*)::int AS total, (SELECT count(*)::int FROM fresh f WHERE f.paused) AS paused FROM inserted
      )
      SELECT t.total, t.paused, h.* FROM total t LEFT JOIN (
        SELECT ${claimedColumns(nowIso)}, ev.created_at AS sort_created_at, ev.seq AS sort_seq
        FROM inserted c
        JOIN webhook_endpoints e ON e.store_id = c.store_id AND e.id = c.endpoint_id
        ${eventOfDelivery('c')}
        WHERE c.locked_by IS NOT NULL
      ) h ON true
      ORDER BY h.sort_created_at, h.sort_seq, h.endpoint_id
    `.execute(trx);
    const handedOver = fanned.filter((r) => r.id !== null).map(claimedDelivery);
    return { polled: true, events: events.length, deliveries: fanned[0]?.total ?? 0, more, handedOver, paused: fanned[0]?.paused ?? 0 };
  });
}

/**
 * The FROM and WHERE of a fan-out: one row per event of the batch (`ev`: each event's store and id,
 * `storeIds[i]` and `eventIds[i]`) × endpoint of its store subscribed to it (`e`), none for a store
 * being deleted.
 */
function fanOut(batch: { readonly storeIds: readonly string[]; readonly eventIds: readonly string[] }) {
  // Each event by its primary key (eventOfDelivery says why not by a join or `store_id = ANY`).
  return sql`
    FROM unnest(${[...batch.storeIds]}::uuid[], ${[...batch.eventIds]}::uuid[]) AS b(store_id, event_id)
    ${eventOfDelivery('b')}
    -- A store's events go to that store's endpoints only.
    JOIN webhook_endpoints e ON e.store_id = ev.store_id AND e.enabled AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types))
      -- An endpoint receives the changes made after it was registered; older ones by replay.
      AND ev.created_at >= e.created_at
    WHERE ev.type <> 'ping' AND NOT ev.test
      AND EXISTS (SELECT 1 FROM stores st WHERE st.id = ev.store_id AND st.status <> 'deleting')`;
}

interface StorePosition {
  store_id: string;
  position_created_at: string;
  position_seq: number;
  target_created_at: string;
  target_seq: number;
}

/** Events one scan statement reads, and statements per poll (more continue in the next poll). */
const SCAN_ROWS = 20_000;
const SCAN_ROUNDS = 2;
/** Stores served per poll: the batch is shared among them. */
const STORES_PER_POLL = 64;

/**
 * The upsert's conflict arm of a raised target: never lowered (the look-ahead may have raised it
 * past what the scan reaches), and with a store's position moved along when the new row says so
 * (its position equal to its target: a store with no enabled endpoint) and it is not already past.
 */
const RAISE_TARGET = sql`ON CONFLICT (store_id) DO UPDATE SET
        target_created_at = CASE WHEN (EXCLUDED.target_created_at, EXCLUDED.target_seq) > (sp.target_created_at, sp.target_seq)
          THEN EXCLUDED.target_created_at ELSE sp.target_created_at END,
        target_seq = CASE WHEN (EXCLUDED.target_created_at, EXCLUDED.target_seq) > (sp.target_created_at, sp.target_seq)
          THEN EXCLUDED.target_seq ELSE sp.target_seq END,
        position_created_at = CASE WHEN (EXCLUDED.position_created_at, EXCLUDED.position_seq) = (EXCLUDED.target_created_at, EXCLUDED.target_seq)
            AND (EXCLUDED.position_created_at, EXCLUDED.position_seq) > (sp.position_created_at, sp.position_seq)
          THEN EXCLUDED.position_created_at ELSE sp.position_created_at END,
        position_seq = CASE WHEN (EXCLUDED.position_created_at, EXCLUDED.position_seq) = (EXCLUDED.target_created_at, EXCLUDED.target_seq)
            AND (EXCLUDED.position_created_at, EXCLUDED.position_seq) > (sp.position_created_at, sp.position_seq)
          THEN EXCLUDED.position_seq ELSE sp.position_seq END`;

/**
 * The newest events the look-ahead reads each poll: the stores that wrote last, found past a long
 * write of another store that holds the scan back.
 */
const LOOK_AHEAD_ROWS = 5_000;

/** `sp`'s store has events to fan out (the partial index webhook_store_positions_behind_idx). */
const BEHIND = sql<boolean>`(sp.position_created_at, sp.position_seq) < (sp.target_created_at, sp.target_seq)`;
/** A store being deleted gets no new deliveries (its row goes with it). */
const STORE_NOT_DELETING = sql<boolean>`EXISTS (SELECT 1 FROM stores st WHERE st.id = sp.store_id AND st.status <> 'deleting')`;

/**
 * One scan step, in one statement:
 * - the scan: up to SCAN_ROWS events after `from` and below `horizon`, in (created_at, seq) order,
 *   raise each one's store's target to its last event;
 * - the look-ahead: while another store's long write (an import) holds the deployment's horizon,
 *   and so the scan, back, the stores that wrote since are found among the newest events after
 *   where the scan ends (read backwards, LOOK_AHEAD_ROWS at most) and their targets raised to their
 *   last event below their OWN horizon (db/write-clock.ts: no write of that store, nor of no store,
 *   can still commit below it). The fan-out reads a store's events from its position in a later
 *   statement, so a write that committed while this one ran is read there. The scan passes these
 *   events later and raises nothing past them;
 * - the scan's position moves to where it ended.
 * A store seen for the first time starts at `from` (migration 0034; nothing of it lies between
 * `from` and where it was seen, or the scan would have seen it); a store with no enabled endpoint
 * moves with its target (nothing of it is wanted: an endpoint registered later wants only what is
 * written after it).
 */
async function scan(
  trx: Kysely<Database>,
  from: { created_at: string; seq: number },
  horizon: string,
  nowIso: string,
): Promise<{ last: { created_at: string; seq: number }; full: boolean }> {
  const { rows } = await sql<{ scanned: number; created_at: string; seq: number }>`
    WITH scanned AS (
      (SELECT ev.store_id, ev.created_at, ev.seq FROM events ev
        WHERE ev.created_at = ${from.created_at}::timestamptz AND ev.seq > ${from.seq}::bigint AND ev.created_at < ${horizon}::timestamptz
        ORDER BY ev.seq LIMIT ${SCAN_ROWS})
      UNION ALL
      (SELECT ev.store_id, ev.created_at, ev.seq FROM events ev
        WHERE ev.created_at > ${from.created_at}::timestamptz AND ev.created_at < ${horizon}::timestamptz
        ORDER BY ev.created_at, ev.seq LIMIT ${SCAN_ROWS})
      ORDER BY created_at, seq LIMIT ${SCAN_ROWS}
    ), scan_end AS (
      SELECT l.created_at, l.seq FROM (
        (SELECT created_at, seq FROM scanned ORDER BY created_at DESC, seq DESC LIMIT 1)
        UNION ALL SELECT ${from.created_at}::timestamptz, ${from.seq}::bigint
      ) l ORDER BY l.created_at DESC, l.seq DESC LIMIT 1
    ), recent AS (
      -- Bounded by a value, not a join, so the events are read backwards along their index.
      SELECT ev.store_id, ev.created_at, ev.seq FROM events ev
      WHERE ev.created_at > (SELECT created_at FROM scan_end)
      ORDER BY ev.created_at DESC, ev.seq DESC LIMIT ${LOOK_AHEAD_ROWS}
    ), horizons AS (
      SELECT s.store_id, ${horizonExpression(sql`s.store_id`)} AS horizon FROM (SELECT DISTINCT store_id FROM recent) s
    ), seen AS (
      SELECT s.store_id, s.created_at, s.seq FROM scanned s
      UNION ALL
      SELECT r.store_id, r.created_at, r.seq FROM recent r JOIN horizons h ON h.store_id = r.store_id WHERE r.created_at < h.horizon
    ), per_store AS (
      SELECT DISTINCT ON (s.store_id) s.store_id, s.created_at, s.seq,
        NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.store_id = s.store_id AND e.enabled) AS unwanted
      FROM seen s ORDER BY s.store_id, s.created_at DESC, s.seq DESC
    ), raised AS (
      INSERT INTO webhook_store_positions AS sp (store_id, position_created_at, position_seq, target_created_at, target_seq, served_at)
      SELECT ps.store_id,
        CASE WHEN ps.unwanted THEN ps.created_at ELSE ${from.created_at}::timestamptz END,
        CASE WHEN ps.unwanted THEN ps.seq ELSE ${from.seq}::bigint END,
        ps.created_at, ps.seq, '-infinity'::timestamptz
      FROM per_store ps
      ${RAISE_TARGET}
    ), moved AS (
      UPDATE webhook_poller_state p
      SET position_created_at = se.created_at, position_seq = se.seq, updated_at = ${nowIso}::timestamptz
      FROM scan_end se
      WHERE p.id = 1 AND (se.created_at, se.seq) <> (${from.created_at}::timestamptz, ${from.seq}::bigint)
    )
    SELECT (SELECT count(*) FROM scanned)::int AS scanned, se.created_at, se.seq FROM scan_end se
  `.execute(trx);
  const row = rows[0]!;
  return { last: { created_at: row.created_at, seq: Number(row.seq) }, full: row.scanned === SCAN_ROWS };
}

/**
 * Whether a poll may have anything to do: an event after the scan's position, or a store behind
 * (a partial index holds only those). Index probes only; a join on (created_at, seq) > position was
 * planned as a scan of every event already crossed, on every poll. The event is looked for from the
 * log's end backwards, the newest committed event compared with the position, not forwards from the
 * position: the events of a write still in flight (an import's step of 30,000) lie in the index
 * after the position and are invisible, and a forward probe visited each of them (a heap fetch
 * apiece, about 100 ms a poll under the fairness bench's import) before it reached the event
 * another store committed after them. The same answer (the newest committed event is after the
 * position exactly when some committed event is); from the end, another store's event committed
 * after the import's step began is the first entry read.
 */
export async function pollPending(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await pendingQuery().execute(db);
  return rows[0]!.pending;
}

/** pollPending's statement (tests read its plan). */
export function pendingQuery() {
  return sql<{ pending: boolean }>`
    SELECT EXISTS (
        SELECT 1 FROM (SELECT ev.created_at, ev.seq FROM events ev ORDER BY ev.created_at DESC, ev.seq DESC LIMIT 1) last
        WHERE (last.created_at, last.seq) > (p.position_created_at, p.position_seq))
      OR EXISTS (SELECT 1 FROM webhook_store_positions sp WHERE ${BEHIND} AND ${STORE_NOT_DELETING}) AS pending
    FROM webhook_poller_state p WHERE p.id = 1
  `;
}

/**
 * Whether every event written so far has been fanned out: the scan is past the last event and no
 * store is behind its target (benchmarks wait for this).
 */
export async function pollerCaughtUp(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ done: boolean }>`
    SELECT NOT EXISTS (
        SELECT 1 FROM events ev, webhook_poller_state p
        WHERE p.id = 1 AND (ev.created_at > p.position_created_at OR (ev.created_at = p.position_created_at AND ev.seq > p.position_seq)))
      AND NOT EXISTS (SELECT 1 FROM webhook_store_positions sp WHERE ${BEHIND} AND ${STORE_NOT_DELETING}) AS done
  `.execute(db);
  return rows[0]?.done ?? true;
}
