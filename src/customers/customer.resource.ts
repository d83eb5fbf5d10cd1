/** Customers as a resource of the read API, the events and the mirror (resources/resource.ts). */
import { type Static, Type } from '@sinclair/typebox';
import { defineResource } from '../resources/resource.ts';
import { Nullable, Timestamp, Uuid } from '../shared/typebox.ts';
import { customerSource } from './customer.json-sql.ts';

export const Customer = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    phone: Nullable(Type.String()),
    email: Nullable(Type.String()),
    city: Nullable(Type.String()),
    is_active: Type.Boolean(),
    created_at: Timestamp,
    last_modified: Timestamp,
  },
  { title: 'Customer', additionalProperties: false },
);
/** A customer as the read API serves it. */
export type Customer = Static<typeof Customer>;

export const customerResource = defineResource({
  name: 'customers',
  path: 'customers',
  noun: 'customer',
  summary: 'registered customers',
  label: 'Customers',
  scope: 'customers:read',
  table: 'customers',
  key: 'id',
  record: Customer,
  source: customerSource,
  filters: {},
  conditions: () => [],
  single: true,
  description: { list: 'List registered customers', get: 'One customer', export: 'Export customers as NDJSON' },
  events: { prefix: 'customer', kinds: ['created', 'updated'] },
});
