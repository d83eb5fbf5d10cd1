/** Customers as a resource of the read API, the events and the mirror (resources/resource.ts). */
import { Type } from '@sinclair/typebox';
import { defineResource } from '../resources/resource.ts';
import { Nullable, Timestamp, Uuid } from '../shared/typebox.ts';
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
  },
  { title: 'Customer', additionalProperties: false },
);

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
  },
});
