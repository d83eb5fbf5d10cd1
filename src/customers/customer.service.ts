/** Customer writes: create and update (is_active=false deactivates). Each appends its event. */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { runWrite } from '../db/write-clock.ts';
import { notFound } from '../shared/problem.ts';
import { customerChanged } from '../resources/record-events.ts';
import { recordById } from '../resources/record-reads.ts';
import { type Customer, customerResource } from './customer.resource.ts';

export interface CustomerInput {
  name: string;
  phone?: string | null;
  email?: string | null;
  city?: string | null;
  is_active?: boolean;
}

export type CustomerPatch = Partial<CustomerInput>;

export async function customerById(db: Kysely<Database>, id: string): Promise<Customer> {
  return recordById(db, customerResource, id);
}

export async function createCustomer(db: Kysely<Database>, input: CustomerInput): Promise<Customer> {
  return runWrite(db, async (ctx) => {
    const id = randomUUID();
    await ctx.trx
      .insertInto('customers')
      .values({
        id,
        name: input.name,
        phone: input.phone ?? null,
        email: input.email ?? null,
        city: input.city ?? null,
        is_active: input.is_active ?? true,
        created_at: ctx.stamp,
        last_modified: ctx.stamp,
      })
      .execute();
    await customerChanged(ctx, id, true);
    return customerById(ctx.trx, id);
  });
}

export async function updateCustomer(db: Kysely<Database>, id: string, patch: CustomerPatch): Promise<Customer> {
  return runWrite(db, async (ctx) => {
    const set = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
    const updated = await ctx.trx
      .updateTable('customers')
      .set({ ...set, last_modified: ctx.stamp })
      .where('id', '=', id)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) throw notFound('customer', id);
    await customerChanged(ctx, id);
    return customerById(ctx.trx, id);
  });
}
