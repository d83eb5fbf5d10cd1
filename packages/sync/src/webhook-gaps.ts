/**
 * Webhooks silently missing: `verify` compares end states only, and the reconcile repairs the mirror,
 * so a service that drops 1 webhook in 50 still verifies. This compares the events the receiver got
 * (store_mirror.received_events) with the service's events feed over the window the receiver has
 * been receiving (from the oldest received event to the newest), and names every feed event that
 * never arrived as a webhook: the reconcile alone brought its change.
 */
import { sql } from 'kysely';
import type { MirrorDatabase } from './mirror/mirror-database.ts';

/** A feed event the receiver never got. */
export interface MissedEvent {
  id: string;
  type: string;
  created_at: string;
  /** Id of the record it carries (product, order, customer; product_id for inventory). */
  resource_id: string | null;
}

export interface WebhookGaps {
  /** The window compared (ISO), or null when no webhook was ever received. */
  from: string | null;
  to: string | null;
  /** Feed events in the window. */
  feedEvents: number;
  /** Of those, received as webhooks. */
  received: number;
  missed: MissedEvent[];
}

/** What this needs of a StoreApiClient: the events feed. */
export interface EventFeedReader {
  events: { iterate(query: { since: string; limit: number }): AsyncIterable<{ id: string; type: string; created_at: string; data: unknown }> };
}

/** Compares the received webhooks with the events feed read through `client`. */
export async function webhookGaps(mirror: MirrorDatabase, client: EventFeedReader): Promise<WebhookGaps> {
  const { rows } = await sql<{ from: string | null; to: string | null }>`
    SELECT min(created_at) AS "from", max(created_at) AS "to" FROM store_mirror.received_events WHERE type <> 'ping'`.execute(mirror.db);
  const { from, to } = rows[0] ?? { from: null, to: null };
  if (!from || !to) return { from: null, to: null, feedEvents: 0, received: 0, missed: [] };
  const { rows: ids } = await sql<{ event_id: string }>`SELECT event_id FROM store_mirror.received_events`.execute(mirror.db);
  const received = new Set(ids.map((r) => r.event_id));
  const gaps: WebhookGaps = { from, to, feedEvents: 0, received: 0, missed: [] };
  // The feed's `since` is exclusive: start a microsecond before the oldest received event.
  const since = new Date(Date.parse(from) - 1).toISOString();
  for await (const event of client.events.iterate({ since, limit: 200 })) {
    if (event.created_at > to) break;
    gaps.feedEvents++;
    if (received.has(event.id)) {
      gaps.received++;
      continue;
    }
    const data = event.data as { id?: string; product_id?: string };
    gaps.missed.push({ id: event.id, type: event.type, created_at: event.created_at, resource_id: data.id ?? data.product_id ?? null });
  }
  return gaps;
}
