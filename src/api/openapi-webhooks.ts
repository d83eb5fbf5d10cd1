/**
 * The webhooks of the OpenAPI document (`webhooks`: one entry per event type with its payload,
 * signature headers and example) and the admin API's event catalog, from one source, so the
 * catalog, the document and the deliveries never disagree.
 */
import { EVENT_PAYLOADS } from './schemas.ts';
import { eventTypeDescription, type FeedEventType } from '../resources/registry.ts';
import { exampleEvent } from './openapi-examples.ts';
import { pascal, plain, refNamedSchemas, type Json } from './openapi-json.ts';

/** Webhook event types (docs/contract/decisions.md, Webhooks): the store events of the feed, and `ping`. */
export const WEBHOOK_EVENT_TYPES: readonly string[] = [...Object.keys(EVENT_PAYLOADS), 'ping'];

const PING_DESCRIPTION = 'Test event sent on demand (dashboard or admin API) to one endpoint; carries no store record.';

/** The payload JSON schema a webhook of this type POSTs (plain JSON, named records inline or as `$ref`s per `names`). */
function webhookBodySchema(type: string, names: Set<string>): Json {
  // The store events' bodies are the very schemas the events feed lists (EVENT_PAYLOADS).
  if (type !== 'ping') return refNamedSchemas(plain(EVENT_PAYLOADS[type as FeedEventType]), names) as Json;
  return {
    type: 'object',
    required: ['id', 'type', 'created_at', 'data'],
    additionalProperties: false,
    properties: {
      id: { type: 'string', format: 'uuid', description: 'Event id, stable across retries' },
      type: { type: 'string', const: type },
      created_at: { type: 'string', format: 'date-time' },
      data: {
        type: 'object',
        description: PING_DESCRIPTION,
        required: ['endpoint_id', 'message'],
        properties: { endpoint_id: { type: 'string', format: 'uuid' }, message: { type: 'string' } },
      },
    },
  };
}

/**
 * Every webhook event type with its description, payload schema (self-contained) and example: the
 * source of both the OpenAPI document's `webhooks` section and the admin API's event catalog.
 */
export function webhookEventCatalog(): { type: string; description: string; schema: Json; example: Json }[] {
  return WEBHOOK_EVENT_TYPES.map((type) => ({
    type,
    description: type === 'ping' ? PING_DESCRIPTION : eventTypeDescription(type as FeedEventType),
    schema: webhookBodySchema(type, new Set()),
    example: exampleEvent(type as FeedEventType | 'ping'),
  }));
}

export function webhookSection(names: Set<string>): Json {
  const webhooks: Json = {};
  const signatureHeaders = [
    {
      name: 'webhook-id',
      in: 'header',
      required: true,
      description: 'The event id; the same on every retry (use it to deduplicate).',
      schema: { type: 'string' },
    },
    {
      name: 'webhook-timestamp',
      in: 'header',
      required: true,
      description: 'Unix epoch seconds when this attempt was signed.',
      schema: { type: 'string', pattern: '^\\d+$' },
    },
    {
      name: 'webhook-signature',
      in: 'header',
      required: true,
      description:
        'Standard Webhooks signature(s), space-separated `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`, keyed with the endpoint secret `whsec_…` (two during a secret rotation). Verify with the `standardwebhooks` library.',
      schema: { type: 'string' },
    },
  ];
  for (const type of WEBHOOK_EVENT_TYPES) {
    const bodySchema = webhookBodySchema(type, names);
    webhooks[type] = {
      post: {
        operationId: `${pascal(type).replace(/^./, (c) => c.toLowerCase())}Webhook`,
        // The receiver authenticates the POST by its signature, not by a token of this API.
        security: [],
        tags: ['Webhooks'],
        summary: `${type} event`,
        description:
          `${type === 'ping' ? PING_DESCRIPTION : eventTypeDescription(type as FeedEventType)} ` +
          'POSTed to each enabled endpoint subscribed to this type, signed per Standard Webhooks. Any 2xx within the timeout acknowledges; anything else is retried after 1 min, 5 min, 30 min, 2 h and 12 h, then dead-lettered. Delivery is at least once.',
        parameters: signatureHeaders,
        requestBody: {
          required: true,
          content: { 'application/json': { schema: bodySchema, example: exampleEvent(type as FeedEventType | 'ping') } },
        },
        responses: {
          '2XX': { description: 'Acknowledged; the delivery is done.' },
          default: { description: 'Not acknowledged (as is a timeout or a connection error); retried on the schedule.' },
        },
      },
    };
  }
  return webhooks;
}
