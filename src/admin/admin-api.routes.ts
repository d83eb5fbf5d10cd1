/**
 * The admin API, /admin/api/v1: the write side of the store (catalog, customers, orders, stock,
 * CSV import), API tokens, and (from the webhooks feature) endpoints and deliveries. Each feature
 * keeps its routes in its own file under admin/routes/ and is registered here.
 */
import type { FastifyInstance } from 'fastify';
import { authenticateAdmin } from './admin-auth.ts';
import { tokenAdminRoutes } from './routes/token.admin-routes.ts';
import { storeAdminRoutes } from './routes/store.admin-routes.ts';
import { webhookAdminRoutes } from './routes/webhook.admin-routes.ts';
import { overviewAdminRoutes } from './routes/overview.admin-routes.ts';
import { resourceAdminRoutes } from './routes/resource.admin-routes.ts';
import { recordAdminRoutes } from './routes/record.admin-routes.ts';

export async function adminApiRoutes(app: FastifyInstance): Promise<void> {
  app.decorateRequest('admin', undefined);
  app.addHook('onRequest', async (request) => {
    await authenticateAdmin(request);
  });
  await app.register(tokenAdminRoutes);
  await app.register(storeAdminRoutes);
  await app.register(webhookAdminRoutes);
  await app.register(overviewAdminRoutes);
  await app.register(resourceAdminRoutes);
  await app.register(recordAdminRoutes);
}
