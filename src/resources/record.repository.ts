/** One record of any declared resource as JSON, exactly as the read API serves it. */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { notFound } from '../shared/problem.ts';
import type { ResourceDeclaration } from './resource.ts';

/** The record's JSON text, or undefined when `id` names none (or one outside the source's base condition). */
export async function recordJsonText(db: Kysely<Database>, resource: ResourceDeclaration, id: string): Promise<string | undefined> {
  const { source } = resource;
  const where = source.where ? sql` AND ${source.where}` : sql``;
  const { rows } = await sql<{ json: string }>`
    SELECT ${source.json}::text AS json FROM ${source.from} WHERE ${source.id} = ${id}::uuid${where}
  `.execute(db);
  return rows[0]?.json;
}

/** The record as a value; 404 naming the resource when there is none. */
export async function recordById(db: Kysely<Database>, resource: ResourceDeclaration, id: string): Promise<unknown> {
  const text = await recordJsonText(db, resource, id);
  if (text === undefined) throw notFound(resource.noun, id);
  return JSON.parse(text);
}
