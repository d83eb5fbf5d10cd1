/**
 * Admin API for webhooks (under /admin/api/v1): endpoints, their secrets, pings and replays;
 * deliveries (newest first), manual retries of dead letters, and hourly statistics for the
 * dashboard. Shapes: docs/webhooks.md.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { WebhookService, SUBSCRIBABLE_EVENT_TYPES } from '../../webhooks/webhook.service.ts';
import { EVENT_TYPES } from '../../resources/event-types.ts';
import { BATCH_SIZE_MAX, BATCH_SIZE_MIN, DEFAULT_BATCH_SIZE, DELIVERY_ORDERS } from '../../webhooks/fifo-line.ts';
import { NamedValues, StringEnum } from '../../shared/typebox.ts';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../../webhooks/webhook-delivery.repository.ts';
import { exampleEvent } from '../../api/openapi-examples.ts';
import type { FeedEventType } from '../../resources/registry.ts';
import {
  DeletedEndpoint,
  DeliveryPage,
  DeliveryStats,
  EndpointSecret,
  QueuedDelivery,
  QueuedTestEvent,
  RetriedCount,
  WebhookDelivery,
  WebhookDeliveryDetail,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  dataOf,
} from '../admin-responses.ts';
import { requireFreshProof } from '../admin-auth.ts';
import { OAUTH_CLIENT_AUTH } from '../../webhooks/endpoint-credentials.ts';

const strict = { additionalProperties: false } as const;
const Uuid = Type.String({ format: 'uuid' });
const IdParam = Type.Object({ id: Uuid }, strict);
const EventTypes = Type.Array(Type.Unsafe<string>({ type: 'string', enum: [...SUBSCRIBABLE_EVENT_TYPES] }), {
  maxItems: 50,
  uniqueItems: true,
  description: 'Event types to receive; omitted or [] = all',
});
const Url = Type.String({
  minLength: 1,
  maxLength: 2000,
  description:
    'https URL of the receiver, or a broker: amqp(s)://user:pass@host/<vhost>?exchange=<name>, mqtt(s)://user:pass@host/<topic prefix>, nats(+tls)://user:pass@host/<subject prefix> (decision 0031)',
});
// Null first: with coerceTypes, ajv would turn null into "" for a string branch tried first.
const Description = Type.Union([Type.Null(), Type.String({ maxLength: 500 })]);

const Pem = (description: string) => Type.String({ minLength: 1, maxLength: 65_536, description });
const OAuthBody = Type.Object(
  {
    token_url: Type.String({ minLength: 1, maxLength: 2000, description: 'The token endpoint: https (http only on loopback where private URLs are allowed)' }),
    client_id: Type.String({ minLength: 1, maxLength: 500 }),
    client_secret: Type.Optional(
      Type.String({ minLength: 1, maxLength: 2000, description: 'Stored sealed, never shown; on update, omit it to keep the stored one' }),
    ),
    // Null first: with coerceTypes, ajv would turn null into "" for a string branch tried first.
    scope: Type.Optional(Type.Union([Type.Null(), Type.String({ minLength: 1, maxLength: 1000 })], { description: 'Space-separated scopes asked for' })),
    client_auth: Type.Optional(
      Type.Unsafe<'basic' | 'body'>({
        type: 'string',
        enum: [...OAUTH_CLIENT_AUTH],
        description: 'How the client authenticates to the token server (RFC 6749 §2.3.1): basic (HTTP Basic, the default) or body',
      }),
    ),
  },
  strict,
);
const ClientCertificateBody = Type.Object(
  {
    certificate: Pem('PEM certificate, then any intermediates'),
    private_key: Pem('Its unencrypted PEM private key; stored sealed, never shown'),
  },
  strict,
);
const CredentialsBody = Type.Object(
  {
    headers: Type.Optional(
      NamedValues({ minLength: 1, maxLength: 100 }, Type.Union([Type.Null(), Type.String({ maxLength: 4096 })]), {
        description:
          'Extra request headers (HTTPS endpoints): values stored sealed, never shown; null removes one. Not webhook-*, content-type or other headers the delivery sets',
      }),
    ),
    oauth: Type.Optional(
      Type.Union([Type.Null(), OAuthBody], {
        description: 'OAuth 2.0 client credentials: each request carries a bearer token from token_url, cached until it expires; null removes them',
      }),
    ),
    client_certificate: Type.Optional(
      Type.Union([Type.Null(), ClientCertificateBody], {
        description: 'A client certificate for mutual TLS (https, amqps, mqtts, nats+tls endpoints); null removes it',
      }),
    ),
  },
  { ...strict, description: 'Credentials beyond the signature (decision 0058); sealed at rest under WEBHOOK_CREDENTIALS_KEY' },
);
const DeliveryOrder = StringEnum(DELIVERY_ORDERS, {
  description:
    'unordered (default): each event as soon as a slot allows; fifo: in the order the events were written, the next batch only after the previous one succeeded or went dead (decision 0059)',
});
const BatchSize = Type.Integer({
  minimum: BATCH_SIZE_MIN,
  maximum: BATCH_SIZE_MAX,
  description: `Most events in one batch of a FIFO endpoint: one HTTP request (a JSON array) or a run of broker messages; default ${DEFAULT_BATCH_SIZE}`,
});

const CreateBody = Type.Object(
  {
    url: Url,
    event_types: Type.Optional(EventTypes),
    description: Type.Optional(Description),
    enabled: Type.Optional(Type.Boolean()),
    credentials: Type.Optional(CredentialsBody),
    delivery_order: Type.Optional(DeliveryOrder),
    batch_size: Type.Optional(BatchSize),
  },
  strict,
);
const PatchBody = Type.Object(
  {
    url: Type.Optional(Url),
    event_types: Type.Optional(EventTypes),
    description: Type.Optional(Description),
    enabled: Type.Optional(Type.Boolean({ description: 'true also closes the circuit breaker and clears a 410 disable' })),
    credentials: Type.Optional(
      Type.Union([Type.Null(), CredentialsBody], { description: 'Changes to the credentials (headers merge by name); null removes them all' }),
    ),
    delivery_order: Type.Optional(DeliveryOrder),
    batch_size: Type.Optional(BatchSize),
  },
  { ...strict, minProperties: 1 },
);
const FailedOnly = Type.Boolean({
  default: false,
  description: 'Only events that never got through to this endpoint: a dead letter, and no delivery succeeded or still on its way (decision 0021)',
});
const ReplayBody = Type.Object(
  {
    from: Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601, inclusive' }),
    to: Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601, exclusive' }),
    failed_only: Type.Optional(FailedOnly),
  },
  strict,
);
const ReplayPreviewQuery = Type.Object(
  {
    from: Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601, inclusive' }),
    to: Type.String({ minLength: 1, maxLength: 40, description: 'ISO 8601, exclusive' }),
    failed_only: Type.Optional(FailedOnly),
  },
  strict,
);
const ReplayCount = Type.Object(
  { data: Type.Object({ queued: Type.Integer({ minimum: 0, description: 'Deliveries the replay would queue (or queued)' }) }, strict) },
  strict,
);
const WindowStats = Type.Object(
  {
    attempts: Type.Integer({
      minimum: 0,
      description: 'Attempts started in the window, every outcome but abandoned (a worker died before recording it; it may never have been sent)',
    }),
    succeeded: Type.Integer({ minimum: 0 }),
    success_rate: Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], { description: 'succeeded / attempts; null without attempts' }),
    responses: Type.Integer({
      minimum: 0,
      description: "Attempts that got an answer (an HTTP response, or a broker's acknowledgement or refusal): the ones latency is measured on",
    }),
    latency_p50_ms: Type.Union([Type.Integer(), Type.Null()], { description: 'Median duration of the attempts with an answer, ms (an observed value)' }),
    latency_p95_ms: Type.Union([Type.Integer(), Type.Null()], { description: '95th percentile of the same, ms' }),
  },
  strict,
);
const EndpointStats = Type.Object(
  { data: Type.Object({ as_of: Type.String({ format: 'date-time' }), last_24h: WindowStats, last_7d: WindowStats }, strict) },
  strict,
);
const DeliveryQuery = Type.Object(
  {
    endpoint_id: Type.Optional(Uuid),
    status: Type.Optional(Type.Unsafe<DeliveryStatus>({ type: 'string', enum: [...DELIVERY_STATUSES] })),
    id: Type.Optional(Type.String({ format: 'uuid', description: 'A delivery id or an event id: that delivery, or every delivery of that event' })),
    event_type: Type.Optional(Type.Unsafe<string>({ type: 'string', enum: [...EVENT_TYPES], description: 'Only deliveries of this event type' })),
    from: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'Created at or after (ISO 8601 date or timestamp)' })),
    to: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'Created before (ISO 8601, exclusive); after from' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'next_cursor of the previous page' })),
  },
  strict,
);
const RetryManyBody = Type.Union([
  Type.Object({ delivery_ids: Type.Array(Uuid, { minItems: 1, maxItems: 1000 }) }, strict),
  Type.Object({ endpoint_id: Uuid, all_dead: Type.Literal(true) }, strict),
]);
const TestEventBody = Type.Object(
  {
    type: Type.Unsafe<string>({
      type: 'string',
      enum: [...SUBSCRIBABLE_EVENT_TYPES],
      description: 'The event type to send an example of (GET /admin/api/v1/event-types lists them with their examples)',
    }),
  },
  strict,
);
const StatsQuery = Type.Object({ hours: Type.Optional(Type.Integer({ minimum: 1, maximum: 720, default: 24 })) }, strict);

export async function webhookAdminRoutes(app: FastifyInstance): Promise<void> {
  const webhooks = new WebhookService(app.ctx);
  const tags = ['Admin: webhooks'];
  const id = (params: unknown) => (params as { id: string }).id;

  app.get(
    '/webhooks/endpoints',
    {
      config: { permission: 'read' },
      schema: { tags, operationId: 'listWebhookEndpoints', summary: 'List webhook endpoints', response: { 200: dataOf(Type.Array(WebhookEndpoint)) } },
    },
    async () => ({ data: await webhooks.listEndpoints() }),
  );
  app.post(
    '/webhooks/endpoints',
    {
      config: { permission: 'write', audit: 'endpoint.created', auditTarget: 'endpoint', returnsSecret: true },
      schema: {
        tags,
        operationId: 'createWebhookEndpoint',
        summary: 'Register an endpoint (its signing secret is in the response)',
        body: CreateBody,
        response: { 201: dataOf(WebhookEndpointWithSecret) },
      },
    },
    async (req, reply) => {
      const body = req.body as typeof CreateBody.static;
      // Store data leaves through it, signed with the secret shown here (sudo mode).
      requireFreshProof(req, 'registering a webhook endpoint');
      const created = await webhooks.createEndpoint(body);
      // The audit log keeps the URL as shown: a broker URL's password never leaves the endpoint row (decision 0031).
      // Nor do the credentials' secrets: the audit log keeps what the API shows of them.
      req.audit = {
        action: 'endpoint.created',
        target: { type: 'endpoint', id: created.id },
        details: { ...body, url: created.url, credentials: created.credentials },
      };
      return reply.code(201).send({ data: created });
    },
  );
  app.get(
    '/webhooks/endpoints/:id',
    {
      config: { permission: 'read' },
      schema: {
        tags,
        operationId: 'getWebhookEndpoint',
        summary: 'A webhook endpoint with its health',
        params: IdParam,
        response: { 200: dataOf(WebhookEndpoint) },
      },
    },
    async (req) => ({
      data: await webhooks.getEndpoint(id(req.params)),
    }),
  );
  app.patch(
    '/webhooks/endpoints/:id',
    {
      config: { permission: 'write', audit: 'endpoint.updated', auditTarget: 'endpoint' },
      schema: {
        tags,
        operationId: 'updateWebhookEndpoint',
        summary: 'Update an endpoint; enabled=true resets its breaker',
        params: IdParam,
        body: PatchBody,
        response: { 200: dataOf(WebhookEndpoint) },
      },
    },
    async (req) => {
      const body = req.body as typeof PatchBody.static;
      // Re-pointing sends store data somewhere else, and credentials open a receiver's gateway (sudo mode).
      if (body.url !== undefined) requireFreshProof(req, "changing an endpoint's URL");
      if (body.credentials !== undefined) requireFreshProof(req, "changing an endpoint's credentials");
      const before = await webhooks.getEndpoint(id(req.params));
      const after = await webhooks.updateEndpoint(id(req.params), body);
      // What changed, field by field (the audit log's "what"); enabling or disabling alone is its own action.
      const changes: Record<string, { from: unknown; to: unknown }> = {};
      for (const key of Object.keys(body) as Array<keyof typeof body>) {
        const from = (before as unknown as Record<string, unknown>)[key];
        const to = (after as unknown as Record<string, unknown>)[key];
        if (JSON.stringify(from) !== JSON.stringify(to)) changes[key] = { from, to };
      }
      // A secret replaced by another shows the same ("set"): the change is recorded all the same.
      if (body.credentials !== undefined) changes.credentials = { from: before.credentials, to: after.credentials };
      const onlyEnabled = Object.keys(body).length === 1 && body.enabled !== undefined;
      req.audit = {
        action: onlyEnabled ? (body.enabled ? 'endpoint.enabled' : 'endpoint.disabled') : 'endpoint.updated',
        target: { type: 'endpoint', id: after.id },
        details: { url: after.url, changes },
      };
      return { data: after };
    },
  );
  // A viewer reads everything but secrets: the signing secret lets its holder forge deliveries.
  app.get(
    '/webhooks/endpoints/:id/secret',
    {
      config: { permission: 'write', returnsSecret: true },
      schema: {
        tags,
        operationId: 'getEndpointSecret',
        summary: 'The signing secret (owner or admin role)',
        params: IdParam,
        response: { 200: dataOf(EndpointSecret) },
      },
    },
    async (req) => {
      requireFreshProof(req, 'revealing a signing secret');
      return { data: await webhooks.getSecret(id(req.params)) };
    },
  );
  app.post(
    '/webhooks/endpoints/:id/rotate-secret',
    {
      config: { permission: 'write', audit: 'endpoint.secret_rotated', auditTarget: 'endpoint', returnsSecret: true },
      schema: {
        tags,
        operationId: 'rotateEndpointSecret',
        summary: 'New secret; the old one signs too until previous_secret_expires_at',
        params: IdParam,
        response: { 200: dataOf(EndpointSecret) },
      },
    },
    async (req) => {
      requireFreshProof(req, 'rotating a signing secret (the new one is shown)');
      return { data: await webhooks.rotateSecret(id(req.params)) };
    },
  );
  app.post(
    '/webhooks/endpoints/:id/ping',
    {
      config: { permission: 'write', audit: 'endpoint.pinged', auditTarget: 'endpoint' },
      schema: { tags, operationId: 'pingEndpoint', summary: 'Send a ping event to this endpoint', params: IdParam, response: { 202: dataOf(QueuedDelivery) } },
    },
    async (req, reply) => reply.code(202).send({ data: await webhooks.ping(id(req.params)) }),
  );
  app.post(
    '/webhooks/endpoints/:id/test-events',
    {
      config: { permission: 'write', audit: 'endpoint.test_event_sent', auditTarget: 'endpoint' },
      schema: {
        tags,
        operationId: 'sendTestEvent',
        summary: 'Send a test event: the catalog example of a type, to this endpoint only',
        description:
          'Queues a delivery of the event catalog\'s example of `type`, signed like any delivery. Its envelope carries `"test": true` and the ' +
          'request the header `webhook-test: true`; it never appears in the events feed or reaches other endpoints, and its failures do not ' +
          'pause the endpoint (decision 0020). Owner or admin role; a disabled endpoint is 409.',
        params: IdParam,
        body: TestEventBody,
        response: { 202: dataOf(QueuedTestEvent) },
      },
    },
    async (req, reply) => {
      const { type } = req.body as typeof TestEventBody.static;
      const example = SUBSCRIBABLE_EVENT_TYPES.includes(type as FeedEventType) ? exampleEvent(type as FeedEventType) : undefined;
      const sent = await webhooks.sendTestEvent(id(req.params), type, example?.data, example?.previous);
      req.audit = { action: 'endpoint.test_event_sent', target: { type: 'endpoint', id: id(req.params) }, details: { type, delivery_id: sent.delivery_id } };
      return reply.code(202).send({ data: sent });
    },
  );
  app.delete(
    '/webhooks/endpoints/:id',
    {
      config: { permission: 'write', audit: 'endpoint.deleted', auditTarget: 'endpoint' },
      schema: {
        tags,
        operationId: 'deleteWebhookEndpoint',
        summary: 'Delete an endpoint with its queued deliveries and delivery history',
        description:
          'Its pending and failed deliveries are never sent and its deliveries and attempts are deleted with it; the audit log keeps the URL ' +
          'and how many deliveries of each status went (decision 0020). Owner or admin role; an unknown or already deleted id is 404.',
        params: IdParam,
        response: { 200: dataOf(DeletedEndpoint) },
      },
    },
    async (req) => {
      const deleted = await webhooks.deleteEndpoint(id(req.params));
      req.audit = {
        action: 'endpoint.deleted',
        target: { type: 'endpoint', id: deleted.id },
        details: { url: deleted.url, deliveries_deleted: deleted.deliveries_deleted },
      };
      return { data: deleted };
    },
  );
  app.post(
    '/webhooks/endpoints/:id/replay',
    {
      config: { permission: 'write', audit: 'endpoint.replayed', auditTarget: 'endpoint' },
      schema: {
        tags,
        operationId: 'replayEndpointEvents',
        summary: 'Queue again every subscribed event of [from, to), or with failed_only those that never got through',
        params: IdParam,
        body: ReplayBody,
        response: { 202: ReplayCount },
      },
    },
    async (req, reply) => {
      const body = req.body as typeof ReplayBody.static;
      const failedOnly = body.failed_only === true;
      const data = await webhooks.replay(id(req.params), body.from, body.to, { failedOnly });
      // The audit log says how many deliveries the replay queued, and with which option.
      req.audit = {
        target: { type: 'endpoint', id: id(req.params) },
        details: { from: body.from, to: body.to, failed_only: failedOnly, queued: data.queued },
      };
      return reply.code(202).send({ data });
    },
  );
  app.get(
    '/webhooks/endpoints/:id/replay-preview',
    {
      config: { permission: 'read' },
      schema: {
        tags,
        operationId: 'previewEndpointReplay',
        summary: 'How many deliveries a replay with these parameters would queue (a dry run: nothing changes)',
        params: IdParam,
        querystring: ReplayPreviewQuery,
        response: { 200: ReplayCount },
      },
    },
    async (req) => {
      const q = req.query as typeof ReplayPreviewQuery.static;
      return { data: await webhooks.replay(id(req.params), q.from, q.to, { failedOnly: q.failed_only === true, dryRun: true }) };
    },
  );
  app.get(
    '/webhooks/endpoints/:id/stats',
    {
      config: { permission: 'read' },
      schema: {
        tags,
        operationId: 'getEndpointStats',
        summary: "Success rate and latency (p50, p95) of the endpoint's attempts over the last 24 hours and 7 days",
        params: IdParam,
        response: { 200: EndpointStats },
      },
    },
    async (req) => ({ data: await webhooks.endpointStats(id(req.params)) }),
  );

  app.get(
    '/webhooks/deliveries',
    {
      config: { permission: 'read' },
      schema: { tags, operationId: 'listDeliveries', summary: 'List deliveries, newest first', querystring: DeliveryQuery, response: { 200: DeliveryPage } },
    },
    // ajv has filled in limit's default.
    async (req) => webhooks.listDeliveries(req.query as typeof DeliveryQuery.static & { limit: number }),
  );
  app.get(
    '/webhooks/deliveries/:id',
    {
      config: { permission: 'read' },
      schema: {
        tags,
        operationId: 'getDelivery',
        summary: 'A delivery with its attempts and event',
        params: IdParam,
        response: { 200: dataOf(WebhookDeliveryDetail) },
      },
    },
    async (req) => ({
      data: await webhooks.getDelivery(id(req.params)),
    }),
  );
  app.post(
    '/webhooks/deliveries/retry',
    {
      config: { permission: 'write', audit: 'deliveries.retried', auditTarget: 'deliveries' },
      schema: {
        tags,
        operationId: 'retryDeliveries',
        summary: 'Retry a selection, or all dead letters of an endpoint',
        body: RetryManyBody,
        response: { 200: dataOf(RetriedCount) },
      },
    },
    async (req) => ({ data: await webhooks.retryMany(req.body as { delivery_ids: string[] } | { endpoint_id: string }) }),
  );
  app.post(
    '/webhooks/deliveries/:id/retry',
    {
      config: { permission: 'write', audit: 'deliveries.retried', auditTarget: 'delivery' },
      schema: {
        tags,
        operationId: 'retryDelivery',
        summary: 'Retry a dead or failed delivery now',
        params: IdParam,
        response: { 200: dataOf(WebhookDelivery) },
      },
    },
    async (req) => ({ data: await webhooks.retryDelivery(id(req.params)) }),
  );
  app.get(
    '/webhooks/stats',
    {
      config: { permission: 'read' },
      schema: {
        tags,
        operationId: 'getDeliveryStats',
        summary: 'Hourly delivery activity and current totals',
        querystring: StatsQuery,
        response: { 200: dataOf(DeliveryStats) },
      },
    },
    async (req) => ({
      data: await webhooks.stats((req.query as { hours: number }).hours),
    }),
  );
}
