/**
 * The read API, /api/v1: products, orders, customers, inventory and stock movements, each with a
 * list, an NDJSON export and (where the spec has one) a single GET; and the events feed (events the
 * token's scopes cover). Read-only; every route needs a bearer token with the resource's read scope.
 */
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { productSource } from '../../../catalog/product.json-sql.ts';
import { customerSource } from '../../../customers/customer.json-sql.ts';
import { inventorySource, movementSource, stockTrackedCondition } from '../../../inventory/inventory.json-sql.ts';
import { orderSource } from '../../../orders/order.json-sql.ts';
import { parseIsoTimestamp } from '../../../shared/time.ts';
import { bearerAuthPlugin } from '../../plugins/bearer-auth.ts';
import { invalidParameter } from '../../../shared/problem.ts';
import {
  Customer, InventoryRecord, Order, Product, StockMovement,
  customerFilters, inventoryFilters, movementFilters, orderFilters, productFilters,
} from '../../schemas.ts';
import { registerResource, requireUuid } from './resource-routes.ts';
import { registerEventFeed } from './event-feed.routes.ts';

function sinceOf(value: unknown): string {
  const since = parseIsoTimestamp(String(value));
  if (!since) throw invalidParameter('since', 'must be an ISO 8601 date or timestamp (e.g. 2026-01-31 or 2026-01-31T12:00:00Z, years 0001–9999)');
  return since;
}

export async function readApiRoutes(app: FastifyInstance): Promise<void> {
  await app.register(bearerAuthPlugin, { db: app.ctx.database.db });

  registerResource(app, {
    path: 'products',
    noun: 'product',
    scope: 'products:read',
    tag: 'Products',
    source: productSource,
    record: Product,
    filters: productFilters,
    conditions: (q) => (q.include_inactive === true ? [] : [sql`p.is_active`]),
    byId: (id) => sql`p.id = ${id}::uuid`,
    description: {
      list: 'List active products with variants and images (include_inactive=true for all)',
      get: 'One product with all its variants and images',
      export: 'Export products as NDJSON, up to 500 per request',
    },
  });

  registerResource(app, {
    path: 'orders',
    noun: 'order',
    scope: 'orders:read',
    tag: 'Orders',
    source: orderSource,
    record: Order,
    filters: orderFilters,
    conditions: (q) => {
      const c = [];
      if (q.status !== undefined) c.push(sql`o.status = ${q.status}`);
      if (q.source !== undefined) c.push(sql`o.source = ${q.source}`);
      if (q.since !== undefined) {
        const since = sinceOf(q.since);
        // created_at <= last_modified always, so the second condition only helps the index.
        c.push(sql`o.created_at > ${since}::timestamptz AND o.last_modified > ${since}::timestamptz`);
      }
      return c;
    },
    byId: (id) => sql`o.id = ${id}::uuid`,
    description: { list: 'List orders with their items', get: 'One order with its items', export: 'Export orders as NDJSON' },
  });

  registerResource(app, {
    path: 'customers',
    noun: 'customer',
    scope: 'customers:read',
    tag: 'Customers',
    source: customerSource,
    record: Customer,
    filters: customerFilters,
    conditions: () => [],
    byId: (id) => sql`c.id = ${id}::uuid`,
    description: { list: 'List registered customers', get: 'One customer', export: 'Export customers as NDJSON' },
  });

  registerResource(app, {
    path: 'inventory',
    noun: 'inventory record',
    scope: 'inventory:read',
    tag: 'Inventory',
    source: inventorySource,
    record: InventoryRecord,
    filters: inventoryFilters,
    conditions: (q) => (q.include_inactive === false ? [stockTrackedCondition, sql`p.is_active`] : [stockTrackedCondition]),
    description: { list: 'Current stock of every stock-tracked product and its variants', export: 'Export inventory records as NDJSON' },
  });

  registerResource(app, {
    path: 'inventory/movements',
    noun: 'stock movement',
    scope: 'inventory:read',
    tag: 'Inventory',
    source: movementSource,
    record: StockMovement,
    filters: movementFilters,
    conditions: (q) => {
      const c = [];
      if (q.product_id !== undefined) c.push(sql`m.product_id = ${requireUuid(String(q.product_id), 'product_id')}::uuid`);
      if (q.since !== undefined) {
        const since = sinceOf(q.since);
        c.push(sql`m.created_at > ${since}::timestamptz AND m.last_modified > ${since}::timestamptz`);
      }
      return c;
    },
    description: { list: 'Stock change audit log', export: 'Export stock movements as NDJSON' },
  });

  registerEventFeed(app);
}
