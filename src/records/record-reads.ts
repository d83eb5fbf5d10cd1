/** Reads of one record of any declared resource: its JSON, exactly as the read API serves it (the writes are record-writes.ts). */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { sourceConditions } from '../db/keyset-page.ts';
import { notFound } from '../shared/problem.ts';
import type { RecordOf, ResourceDeclaration } from './resource.ts';

/** The record's JSON text, or undefined when `id` names none (or one outside the source's base condition). */
export async function recordJsonText(db: Kysely<Database>, resource: ResourceDeclaration, id: string): Promise<string | undefined> {
  const { source } = resource;
  const { rows } = await sql<{ json: string }>`
    SELECT ${source.json}::text AS json FROM ${source.from} WHERE ${sourceConditions(source, [sql`${source.id} = ${id}::uuid`])}
  `.execute(db);
  return rows[0]?.json;
}

/**
 * The record as a value, typed by the declaration's record schema (the stored document is built by
 * the resource's JSON SQL, which the schema-wide tests hold to that schema); 404 naming the resource
 * when there is none.
 */
export async function recordById<R extends ResourceDeclaration>(db: Kysely<Database>, resource: R, id: string): Promise<RecordOf<R>> {
  const text = await recordJsonText(db, resource, id);
  if (text === undefined) throw notFound(resource.noun, id);
  return JSON.parse(text) as RecordOf<R>;
}
