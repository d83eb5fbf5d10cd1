/**
 * Writes of flat resources (a declaration with `adminWrites`): one row per record, its columns named
 * as the record's writable fields. Each write stamps created_at/last_modified with the transaction's
 * stamp and appends the resource's event in the same transaction (db/write-clock.ts), so a resource
 * declared this way cannot forget either.
 */
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { runWrite } from '../db/write-clock.ts';
import { ownStore, ownStoreIs } from '../db/store-scope.ts';
import { recordsChanged } from './record-events.ts';
import { notFound } from '../shared/problem.ts';
import { recordById } from './record-reads.ts';
import type { RecordOf, ResourceDeclaration } from './resource.ts';

type Fields = Readonly<Record<string, unknown>>;
/** A declaration whose events are `created` and `updated`. */
type WritableResource = ResourceDeclaration<string, string, string, 'created' | 'updated'>;

/** Inserts one record with `fields`; returns it as the read API shows it. */
export async function createRecord<R extends WritableResource>(db: Kysely<Database>, resource: R, fields: Fields): Promise<RecordOf<R>> {
  return runWrite(db, async (ctx) => {
    const id = randomUUID();
    const values: Fields = { ...fields, id, store_id: ownStore(), created_at: ctx.stamp, last_modified: ctx.stamp };
    const columns = Object.keys(values);
    await sql`INSERT INTO ${sql.table(resource.table)} (${sql.join(columns.map((c) => sql.ref(c)))})
      VALUES (${sql.join(columns.map((c) => values[c]))})`.execute(ctx.trx);
    await recordsChanged(ctx, resource, 'created', [id]);
    return recordById(ctx.trx, resource, id);
  });
}

/** Updates the fields given of one record (404 when there is none); returns it as the read API shows it. */
export async function updateRecord<R extends WritableResource>(db: Kysely<Database>, resource: R, id: string, fields: Fields): Promise<RecordOf<R>> {
  return runWrite(db, async (ctx) => {
    const values: Fields = { ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)), last_modified: ctx.stamp };
    const result = await sql`UPDATE ${sql.table(resource.table)}
      SET ${sql.join(Object.entries(values).map(([c, v]) => sql`${sql.ref(c)} = ${v}`))}
      WHERE ${ownStoreIs('store_id')} AND id = ${id}::uuid`.execute(ctx.trx);
    if (Number(result.numAffectedRows ?? 0) === 0) throw notFound(resource.noun, id);
    await recordsChanged(ctx, resource, 'updated', [id]);
    return recordById(ctx.trx, resource, id);
  });
}
