/** The Customer resource as one SQL JSON expression (lists, single GET, export, events). */
import { sql, type RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';

/** JSON of the customer row aliased `c` (compact, column order). */
export const customerJson: RawBuilder<unknown> = sql`(SELECT row_to_json(r) FROM (SELECT
  c.id, c.name, c.phone, c.email, c.city, c.is_active,
  iso_utc(c.created_at) AS created_at, iso_utc(c.last_modified) AS last_modified) r)`;

export const customerSource: ListSource = {
  from: sql`customers c`,
  store: 'c.store_id',
  lastModified: sql`c.last_modified`,
  id: sql`c.id`,
  json: sql`c.doc`,
};
