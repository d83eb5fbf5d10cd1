/**
 * The webhooks of the OpenAPI document (`webhooks`: one entry per event type with its payload,
 * signature headers and example) and the admin API's event catalog, from one source, so the
 * catalog, the document and the deliveries never disagree.
 */
import { EVENT_PAYLOADS } from './schemas.ts';
import { eventTypeDescription, type FeedEventType } from '../resources/registry.ts';
import { exampleEvent } from './openapi-examples.ts';
import { pascal, plain, refNamedSchemas, type Json } from './openapi-json.ts';
import { BATCH_SIZE_MAX } from '../webhooks/fifo-line.ts';

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

/** The `webhooks` entry of a FIFO endpoint's batch (decision 0059): not an event type, the body that carries them. */
export const FIFO_BATCH = 'fifo.batch';

const FIFO_BATCH_DESCRIPTION =
  'What an HTTPS endpoint registered with `delivery_order: "fifo"` receives: up to its `batch_size` events in one request, a JSON array in the order the events were written, signed as one body (`webhook-id` is the batch\'s id, `batch_<first event id>_<count>`, the same when the same batch is sent again). The next batch is sent only after this one was acknowledged or dead-lettered. Apply the events in order and skip those applied already (a batch may come again, or grown behind the same first event).';

/** The body of a FIFO batch: an array of the event bodies, each as webhookBodySchema gives it. */
function fifoBatchSchema(names: Set<string>): Json {
  return {
    type: 'array',
    minItems: 1,
    maxItems: BATCH_SIZE_MAX,
    description: "The events in the order they were written (created_at, then the log's sequence).",
    items: { anyOf: WEBHOOK_EVENT_TYPES.map((type) => webhookBodySchema(type, names)) },
  };
}

function fifoBatchExample(): Json {
  const [first, second] = Object.keys(EVENT_PAYLOADS) as FeedEventType[];
  return [exampleEvent(first!), exampleEvent(second!)] as Json;
}

/** The FIFO batch's description, schema (self-contained) and example, for the event catalog. */
export function fifoBatchCatalogEntry(): { description: string; schema: Json; example: Json } {
  return { description: FIFO_BATCH_DESCRIPTION, schema: fifoBatchSchema(new Set()), example: fifoBatchExample() };
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
  webhooks[FIFO_BATCH] = {
    post: {
      operationId: 'fifoBatchWebhook',
      security: [],
      tags: ['Webhooks'],
      summary: "A FIFO endpoint's batch of events",
      description: `${FIFO_BATCH_DESCRIPTION} Any 2xx within the timeout acknowledges the whole batch; anything else is retried on the schedule, and nothing behind it is sent meanwhile; when the first event's retries are used up the batch is dead-lettered and the line moves on.`,
      parameters: signatureHeaders.map((h) =>
        h.name === 'webhook-id' ? { ...h, description: "The batch's id, `batch_<first event id>_<count>`: the same when the same batch is sent again." } : h,
      ),
      requestBody: { required: true, content: { 'application/json': { schema: fifoBatchSchema(names), example: fifoBatchExample() } } },
      responses: {
        '2XX': { description: 'Acknowledged: every event of the batch is delivered.' },
        default: { description: 'Not acknowledged (as is a timeout or a connection error): the batch is retried, and the line waits.' },
      },
    },
  };
  return webhooks;
}
