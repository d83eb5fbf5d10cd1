/**
 * The events feed (GET /api/v1/events): the event log read like any other list, with the payloads
 * the webhooks POST. Which events a token may see is resources/event-types.ts (derived from the
 * resource declarations).
 */
import { eventEnvelope } from './event-envelope.ts';
import { sql } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';

/** JSON of the event row aliased `e`: the envelope a webhook delivery POSTs too (event-envelope.ts). */
export const eventJson = eventEnvelope('e');

/** The event log as a keyset list: (created_at, id), served by events_created_at_id_idx. */
export const eventSource: ListSource = {
  from: sql`events e`,
  store: 'e.store_id',
  lastModified: sql`e.created_at`,
  id: sql`e.id`,
  json: eventJson,
};
