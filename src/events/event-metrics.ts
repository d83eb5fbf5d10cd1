/**
 * Events written to the event log, on /metrics: read from the database at scrape time, so the
 * figure is the fleet's (every process that writes — API, imports, the CLI — whichever is scraped)
 * and costs the writes nothing. It is the event log's sequence (`events.seq`, one number per event
 * appended): a counter that only grows, pruning does not lower it, and a write rolled back after
 * appending its events has used its numbers too (rare: a failed import step). Every process
 * scraped reports the same value: aggregate with `max`, not `sum`.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { counter } from '../shared/prometheus.ts';

let source: Kysely<Database> | undefined;

/** Sets the database the events counter reads at scrape time (undefined: stop). */
export function setEventMetricsSource(db: Kysely<Database> | undefined): void {
  source = db;
}

/** The event log's sequence: how many event numbers have been handed out (0 before the first). */
export async function eventsWritten(db: Kysely<Database>): Promise<number> {
  // `events.seq` is a bigserial (migration 0001): its sequence is events_seq_seq.
  const { rows } = await sql<{ n: string }>`SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS n FROM events_seq_seq`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

counter({
  name: 'store_api_events_written_total',
  help: 'Events appended to the event log by every process of the deployment, all stores (the event sequence, read from the database at scrape time)',
  async collect() {
    if (!source) return;
    try {
      const written = await eventsWritten(source);
      this.reset();
      this.inc(written);
    } catch {
      // A scrape during shutdown or a database outage keeps the last value.
    }
  },
});
