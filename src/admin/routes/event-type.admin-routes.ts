/**
 * GET /admin/api/v1/event-types: the event catalog — every webhook event type with its description,
 * payload JSON schema and an example, from the same source as the OpenAPI document's `webhooks`
 * section (webhookEventCatalog), so the catalog, the document and the deliveries never disagree.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { fifoBatchCatalogEntry, webhookEventCatalog } from '../../api/openapi-webhooks.ts';

const JsonObject = Type.Record(Type.String(), Type.Unknown());
const EventTypeEntry = Type.Object({
  type: Type.String({ description: 'The event type, as in the `type` field and the endpoint subscriptions' }),
  description: Type.String(),
  schema: Type.Record(Type.String(), Type.Unknown(), { description: 'JSON Schema (2020-12 compatible) of the POSTed body, self-contained' }),
  example: JsonObject,
});
const EventTypesResponse = Type.Object({
  data: Type.Array(EventTypeEntry),
  fifo_batch: Type.Object(
    {
      description: Type.String(),
      schema: Type.Record(Type.String(), Type.Unknown(), { description: 'JSON Schema of the POSTed body: an array of the events above' }),
      example: Type.Array(JsonObject),
    },
    { description: 'What an endpoint with delivery_order fifo receives: a batch of these events in one request, in write order (decision 0059)' },
  ),
});

export async function eventTypeAdminRoutes(app: FastifyInstance): Promise<void> {
  const catalog = webhookEventCatalog();
  const fifoBatch = fifoBatchCatalogEntry();
  app.get(
    '/event-types',
    {
      config: { permission: 'read' },
      schema: {
        tags: ['Admin: webhooks'],
        operationId: 'listEventTypes',
        summary: 'The event catalog: every webhook event type with its description, payload schema and an example',
        response: { 200: EventTypesResponse },
      },
    },
    async () => ({ data: catalog, fifo_batch: fifoBatch }),
  );
}
