/**
 * Customer writes: create and update (is_active=false deactivates), through the generic writes of a
 * flat resource (resources/record-writes.ts: stamps, `customer.created` / `customer.updated` in the
 * same transaction). The admin API's routes are derived from the declaration's `adminWrites`
 * (admin/routes/record.admin-routes.ts); these typed entry points serve the demo, tools and tests.
 */
import type { Static } from '@sinclair/typebox';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { recordById } from '../records/record-reads.ts';
import { createRecord, updateRecord } from '../records/record-writes.ts';
import { type Customer, type CustomerCreate, type CustomerPatch as CustomerPatchBody, customerResource } from './customer.resource.ts';

export type CustomerInput = Static<typeof CustomerCreate>;
export type CustomerPatch = Static<typeof CustomerPatchBody>;

export async function customerById(db: Kysely<Database>, id: string): Promise<Customer> {
  return recordById(db, customerResource, id);
}

export async function createCustomer(db: Kysely<Database>, input: CustomerInput): Promise<Customer> {
  return createRecord(db, customerResource, input);
}

export async function updateCustomer(db: Kysely<Database>, id: string, patch: CustomerPatch): Promise<Customer> {
  return updateRecord(db, customerResource, id, patch);
}
