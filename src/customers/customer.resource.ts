/** Customers as a resource of the read API, the events and the mirror (resources/resource.ts). */
import { type Static, type TOptional, type TSchema, Type } from '@sinclair/typebox';
import { defineResource } from '../records/resource.ts';
import { Nullable, Timestamp, Uuid, Version } from '../shared/typebox.ts';
import { customerJson, customerSource } from './customer.json-sql.ts';

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
    version: Version,
  },
  { title: 'Customer', additionalProperties: false },
);
/** A customer as the read API serves it. */
export type Customer = Static<typeof Customer>;

const Text = (max: number) => Type.String({ minLength: 1, maxLength: max });
const customerFields = {
  name: Text(200),
  phone: Nullable(Text(40)),
  email: Nullable(Type.String({ format: 'email', maxLength: 254 })),
  city: Nullable(Text(100)),
  is_active: Type.Boolean(),
};
const optional = <T extends Record<string, TSchema>>(fields: T) =>
  Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, Type.Optional(v)])) as { [K in keyof T]: TOptional<T[K]> };

/** POST /admin/api/v1/customers: a name, the rest optional (is_active defaults to true). */
const { name, ...optionalFields } = customerFields;
export const CustomerCreate = Type.Object({ name, ...optional(optionalFields) }, { additionalProperties: false });
/** PATCH /admin/api/v1/customers/{id}: the fields given (at least one) are set. */
export const CustomerPatch = Type.Object(optional(customerFields), { additionalProperties: false, minProperties: 1 });

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
  events: { prefix: 'customer', kinds: ['created', 'updated'], when: 'a customer is created / changed', examplePrevious: { city: 'Paris' } },
  document: { name: 'customer', alias: 'c', column: 'doc', build: customerJson },
  labelDescription: 'Customer records.',
  example: {
    id: '0193a5c2-8a10-7c22-8e31-4d5e6f708192',
    name: 'Amira Haddad',
    phone: '+33 6 12 34 56 78',
    email: 'amira@example.com',
    city: 'Lyon',
    is_active: true,
    created_at: '2026-11-19T17:40:02.000511Z',
    last_modified: '2026-11-21T14:05:30.770123Z',
    version: 3,
  },
  adminWrites: {
    create: CustomerCreate,
    update: CustomerPatch,
    summary: { update: 'Update a customer (is_active=false deactivates)' },
  },
});
