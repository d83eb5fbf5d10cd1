/** The Customer resource as one SQL JSON expression (lists, single GET, export, events). */
import { sql, type RawBuilder } from 'kysely';
import type { ListSource } from '../db/keyset-page.ts';

/** JSON of the customer row aliased `c`. */
export const customerJson: RawBuilder<unknown> = sql`json_build_object(
  'id', c.id, 'name', c.name, 'phone', c.phone, 'email', c.email, 'city', c.city, 'is_active', c.is_active,
  'created_at', iso_utc(c.created_at), 'last_modified', iso_utc(c.last_modified))`;

export const customerSource: ListSource = {
  from: sql`customers c`,
  lastModified: sql`c.last_modified`,
  id: sql`c.id`,
  json: customerJson,
};
