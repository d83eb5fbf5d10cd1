/**
 * GET /admin/api/v1/resources: the scopes a token can be given and the event types an endpoint can
 * subscribe to, derived from the resource declarations (resources/registry.ts), so the dashboard's
 * forms never keep their own copies.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { eventTypeGroups, readScopeCatalog } from '../../resources/registry.ts';

const ScopeOption = Type.Object({ value: Type.String(), label: Type.String(), hint: Type.String() });
const EventGroup = Type.Object({ label: Type.String(), types: Type.Array(Type.String()) });
const ResourcesResponse = Type.Object({
  data: Type.Object({ scopes: Type.Array(ScopeOption), event_groups: Type.Array(EventGroup) }),
});

const ADMIN_SCOPE = { value: 'admin', label: 'Admin', hint: 'full access to the admin API — only for automation you trust' };

export async function resourceAdminRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/resources',
    {
      config: { permission: 'read' },
      schema: { tags: ['Admin: resources'], summary: "Token scopes and webhook event types, for the dashboard's forms", response: { 200: ResourcesResponse } },
    },
    async () => ({
      data: {
        scopes: [...readScopeCatalog().map(({ scope, label, hint }) => ({ value: scope, label, hint })), ADMIN_SCOPE],
        event_groups: eventTypeGroups(),
      },
    }),
  );
}
