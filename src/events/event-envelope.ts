/**
 * The event envelope `{ id, type, created_at, data }`: the one definition of what the events feed
 * lists and what a webhook delivery POSTs, built in SQL from the event row so `data` goes out as the
 * database's own JSON (never parsed into objects and serialised again).
 */
import { sql, type RawBuilder } from 'kysely';

/**
 * JSON of the envelope of the `events` row aliased `alias`; an `*.updated` event's ends with
 * `previous`, the fields the change changed with their values before it (decision 0057).
 */
export function eventEnvelope(alias: string): RawBuilder<unknown> {
  const column = (name: string) => sql.ref(`${alias}.${name}`);
  const fields = sql`'id', ${column('id')}, 'type', ${column('type')}, 'created_at', iso_utc(${column('created_at')}), 'data', ${column('data')}`;
  return sql`CASE WHEN ${column('previous')} IS NULL THEN json_build_object(${fields}) ELSE json_build_object(${fields}, 'previous', ${column('previous')}) END`;
}

/** The envelope of a test delivery (decision 0020): the same fields, then `"test": true`. */
export function testEventEnvelope(alias: string): RawBuilder<unknown> {
  const column = (name: string) => sql.ref(`${alias}.${name}`);
  const fields = sql`'id', ${column('id')}, 'type', ${column('type')}, 'created_at', iso_utc(${column('created_at')}), 'data', ${column('data')}`;
  return sql`CASE WHEN ${column('previous')} IS NULL THEN json_build_object(${fields}, 'test', true)
    ELSE json_build_object(${fields}, 'previous', ${column('previous')}, 'test', true) END`;
}
