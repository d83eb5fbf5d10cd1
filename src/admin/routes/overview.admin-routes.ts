/**
 * GET /admin/api/v1/overview: the counts on the dashboard's first page. Webhook delivery numbers
 * come from GET /webhooks/stats (the webhooks feature owns them).
 */
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { ownStoreIs } from '../../db/store-scope.ts';
import { Overview as OverviewSchema, dataOf } from '../admin-responses.ts';

export interface Overview {
  products: { total: number; active: number };
  orders: { total: number; last_24h: number };
  customers: { total: number; active: number };
  api_tokens: { active: number };
}

export async function overviewAdminRoutes(app: FastifyInstance): Promise<void> {
  const db = app.ctx.database.db;

  app.get(
    '/overview',
    {
      config: { permission: 'read' },
      schema: {
        tags: ['Admin: dashboard'],
        operationId: 'getOverview',
        summary: 'Counts of products, orders, customers and active API tokens',
        response: { 200: dataOf(OverviewSchema) },
      },
    },
    async () => {
      const [products, orders, customers, tokens] = await Promise.all([
        db
          .selectFrom('products')
          .where(ownStoreIs('store_id'))
          .select([sql<number>`count(*)`.as('total'), sql<number>`count(*) FILTER (WHERE is_active)`.as('active')])
          .executeTakeFirstOrThrow(),
        db
          .selectFrom('orders')
          .where(ownStoreIs('store_id'))
          .select([sql<number>`count(*)`.as('total'), sql<number>`count(*) FILTER (WHERE created_at > now() - interval '24 hours')`.as('last_24h')])
          .executeTakeFirstOrThrow(),
        db
          .selectFrom('customers')
          .where(ownStoreIs('store_id'))
          .select([sql<number>`count(*)`.as('total'), sql<number>`count(*) FILTER (WHERE is_active)`.as('active')])
          .executeTakeFirstOrThrow(),
        db
          .selectFrom('api_tokens')
          .where(ownStoreIs('store_id'))
          .select(sql<number>`count(*) FILTER (WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))`.as('active'))
          .executeTakeFirstOrThrow(),
      ]);
      const data: Overview = {
        products: { total: Number(products.total), active: Number(products.active) },
        orders: { total: Number(orders.total), last_24h: Number(orders.last_24h) },
        customers: { total: Number(customers.total), active: Number(customers.active) },
        api_tokens: { active: Number(tokens.active) },
      };
      return { data };
    },
  );
}
