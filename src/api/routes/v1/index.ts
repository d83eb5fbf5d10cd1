/**
 * The read API, /api/v1: every resource declared in resources/registry.ts with a list, an NDJSON
 * export, checksums by id range (verifying a mirror) and (where it declares one) a single GET; and the events feed (events the token's scopes
 * cover); the attributes of the variants. Read-only; every route needs a bearer token with the resource's read scope.
 */
import type { FastifyInstance } from 'fastify';
import { RESOURCES } from '../../../resources/registry.ts';
import { recordJsonText } from '../../../records/record-reads.ts';
import type { ResourceDeclaration } from '../../../records/resource.ts';
import { bearerAuthPlugin } from '../../plugins/bearer-auth.ts';
import { StoreFailedError } from '../../../db/storage-health.ts';
import { registerResource, type ResourceDefinition } from './resource-routes.ts';
import { registerChecksums } from './checksum.routes.ts';
import { registerEventFeed } from './event-feed.routes.ts';
import { registerAttributes } from './attributes.routes.ts';

/** The routes of a declared resource. */
function routesOf(resource: ResourceDeclaration): ResourceDefinition {
  const { source } = resource;
  return {
    path: resource.path,
    noun: resource.noun,
    scope: resource.scope as ResourceDefinition['scope'],
    tag: resource.label,
    source,
    record: resource.record,
    filters: resource.filters,
    conditions: (query) => resource.conditions(query),
    byId: resource.single ? (db, id) => recordJsonText(db, resource, id) : undefined,
    description: resource.description,
  };
}

export async function readApiRoutes(app: FastifyInstance): Promise<void> {
  // A store that can no longer write its log answers 503 before anything else: the token and page
  // caches would otherwise answer from memory (a 403, a stale page) as if nothing had happened.
  const { storage } = app.ctx.database;
  app.addHook('onRequest', async () => {
    if (storage.fatal !== undefined) throw new StoreFailedError(storage.fatal);
  });
  await app.register(bearerAuthPlugin, { db: app.ctx.database.db });
  for (const resource of RESOURCES) {
    const routes = routesOf(resource);
    registerResource(app, routes);
    registerChecksums(app, routes);
  }
  registerEventFeed(app);
  registerAttributes(app);
}
