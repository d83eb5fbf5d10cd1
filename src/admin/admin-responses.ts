/**
 * Response schemas of the admin API (TypeBox): what the routes declare as their success bodies, so
 * the OpenAPI document, every client generated from it and the project's own client
 * (packages/client, generated api-types.ts) type each answer, and the contract test
 * (test/helpers/contract-check.ts) checks every answer the suite gets against them.
 *
 * Schemas with a `title` become components of the document (`#/components/schemas/<title>`).
 * They describe what the services return (tokens/token.service.ts, webhooks/*.repository.ts, …):
 * a field added there and not here is dropped by the response serializer, and a test that reads
 * it fails.
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { SCOPES } from '../tokens/token.service.ts';
import { DELIVERY_STATUSES } from '../webhooks/webhook-delivery.repository.ts';
import { OAUTH_CLIENT_AUTH } from '../webhooks/endpoint-credentials.ts';
import { Nullable, StringEnum } from '../shared/typebox.ts';
import { BATCH_SIZE_MAX, BATCH_SIZE_MIN, DELIVERY_ORDERS } from '../webhooks/fifo-line.ts';
import { Product } from '../catalog/product.resource.ts';
import { ADMIN_ROLES } from './sessions/admin-roles.ts';

const Uuid = Type.String({ format: 'uuid' });
const Instant = Type.String({ format: 'date-time' });
const Count = Type.Integer({ minimum: 0 });

/** `{ "data": schema }`, the envelope of every admin answer. */
export const dataOf = <T extends TSchema>(schema: T) => Type.Object({ data: schema }, { additionalProperties: false });

/** The page object of the admin lists (deliveries, audit log). */
const AdminPagination = Type.Object(
  {
    next_cursor: Nullable(Type.String({ description: 'Pass back as `cursor`' })),
    has_more: Type.Boolean(),
    limit: Type.Integer(),
  },
  { additionalProperties: false },
);

const tokenFields = {
  id: Uuid,
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the secret, to recognise it' }),
  scopes: Type.Array(StringEnum(SCOPES)),
  rate_limit_standard: Nullable(Type.Integer({ description: 'Per-token limit of standard requests per window; null: the deployment default' })),
  rate_limit_export: Nullable(Type.Integer({ description: 'Per-token limit of export requests per window; null: the deployment default' })),
  created_at: Instant,
  expires_at: Nullable(Instant),
  revoked_at: Nullable(Instant),
  last_used_at: Nullable(Instant),
  previous_secret_expires_at: Nullable(Type.String({ format: 'date-time', description: 'After a roll: until when the replaced secret still works' })),
  status: StringEnum(['active', 'revoked', 'expired'] as const),
  made_by: Type.Object(
    {
      kind: StringEnum(['administrator', 'operator'] as const),
      id: Nullable(Type.String({ description: "The administrator's id (null for the operator)" })),
      email: Nullable(Type.String({ description: "The administrator's email when the key was made or transferred to her (null for the operator)" })),
      role: Nullable(StringEnum(ADMIN_ROLES)),
      removed: Type.Boolean(),
    },
    { additionalProperties: false, description: 'Who made the key: it acts with at most its maker’s role' },
  ),
};

/** An API token as listed to administrators (never its secret). */
export const ApiKey = Type.Object(tokenFields, { title: 'ApiKey', additionalProperties: false });
/** A token with its secret: the answer of a create or a roll, the only time the secret is shown. */
export const ApiKeyWithSecret = Type.Object(
  { ...tokenFields, token: Type.String({ description: 'The secret `sia_…`: shown once, store it now' }) },
  { title: 'ApiKeyWithSecret', additionalProperties: false },
);

const SetSecret = Type.Literal('set', { description: 'Stored sealed; never shown' });
/** What an endpoint's credentials show (decision 0058): every secret reads "set". */
const EndpointCredentials = Type.Object(
  {
    headers: Type.Record(Type.String(), SetSecret, { description: 'Extra request headers by name; their values are never shown' }),
    oauth: Nullable(
      Type.Object(
        {
          token_url: Type.String(),
          client_id: Type.String(),
          scope: Nullable(Type.String()),
          client_auth: StringEnum(OAUTH_CLIENT_AUTH, { description: 'How the client authenticates to the token server: HTTP Basic or in the form body' }),
          client_secret: SetSecret,
        },
        { additionalProperties: false },
      ),
    ),
    client_certificate: Nullable(
      Type.Object(
        {
          subject: Type.String(),
          issuer: Type.String(),
          not_after: Instant,
          fingerprint_sha256: Type.String(),
          private_key: SetSecret,
        },
        { additionalProperties: false },
      ),
    ),
  },
  {
    title: 'WebhookEndpointCredentials',
    additionalProperties: false,
    description: 'Extra headers, OAuth 2.0 client credentials and a client certificate for mutual TLS (decision 0058); null: none',
  },
);
const endpointFields = {
  id: Uuid,
  url: Type.String({ description: 'The receiver; a broker URL is shown with its password as ****' }),
  destination: StringEnum(['https', 'amqp', 'mqtt', 'nats'] as const, { description: 'Where deliveries go: an HTTPS receiver or a broker (decision 0031)' }),
  description: Nullable(Type.String()),
  event_types: Type.Array(Type.String(), { description: 'Subscribed event types; [] = all' }),
  enabled: Type.Boolean(),
  delivery_order: StringEnum(DELIVERY_ORDERS, {
    description: 'fifo: in the order the events were written, a batch at a time (decision 0059); unordered: as fast as slots allow',
  }),
  batch_size: Type.Integer({
    minimum: BATCH_SIZE_MIN,
    maximum: BATCH_SIZE_MAX,
    description: 'Most events in one request or run of messages of a FIFO endpoint',
  }),
  state: StringEnum(['active', 'paused', 'disabled'] as const, { description: 'disabled when not enabled; paused while the circuit breaker holds it' }),
  paused_until: Nullable(Instant),
  consecutive_failures: Count,
  disabled_reason: Nullable(Type.String()),
  credentials: Nullable(EndpointCredentials),
  created_at: Instant,
  updated_at: Instant,
};
/** A webhook endpoint (without its secret). */
export const WebhookEndpoint = Type.Object(endpointFields, { title: 'WebhookEndpoint', additionalProperties: false });
/** A new endpoint with its signing secret. */
export const WebhookEndpointWithSecret = Type.Object(
  { ...endpointFields, secret: Type.String({ description: 'The signing secret `whsec_…`' }) },
  { title: 'WebhookEndpointWithSecret', additionalProperties: false },
);
/** An endpoint's signing secret, and until when the replaced one still signs. */
export const EndpointSecret = Type.Object(
  {
    secret: Type.String({ description: 'The signing secret `whsec_…`' }),
    previous_secret_expires_at: Nullable(
      Type.String({ format: 'date-time', description: 'After a rotation: until when deliveries also carry a signature with the old secret' }),
    ),
  },
  { title: 'EndpointSecret', additionalProperties: false },
);
/** A delivery queued by a ping or a test event. */
export const QueuedDelivery = Type.Object({ event_id: Uuid, delivery_id: Uuid }, { title: 'QueuedDelivery', additionalProperties: false });
export const QueuedTestEvent = Type.Object(
  { event_id: Uuid, delivery_id: Uuid, type: Type.String() },
  { title: 'QueuedTestEvent', additionalProperties: false },
);
export const DeletedEndpoint = Type.Object(
  {
    id: Uuid,
    url: Type.String(),
    deliveries_deleted: Type.Record(Type.String(), Count, { description: 'How many deliveries of each status went with it' }),
  },
  { title: 'DeletedEndpoint', additionalProperties: false },
);

const deliveryFields = {
  id: Uuid,
  event_id: Uuid,
  event_type: Type.String(),
  endpoint_id: Uuid,
  endpoint_url: Type.String(),
  status: StringEnum(DELIVERY_STATUSES, { description: 'pending: not tried yet (or retried by hand); failed: retry scheduled; dead: dead letter' }),
  attempt_count: Count,
  next_attempt_at: Nullable(Instant),
  last_status_code: Nullable(Type.Integer()),
  last_error: Nullable(Type.String()),
  created_at: Instant,
  updated_at: Instant,
  test: Type.Boolean({ description: 'A test delivery of an example event sent by an administrator (decision 0020)' }),
};
/** A webhook delivery: one event to one endpoint. */
export const WebhookDelivery = Type.Object(deliveryFields, { title: 'WebhookDelivery', additionalProperties: false });
const WebhookAttempt = Type.Object(
  {
    id: Uuid,
    attempt_number: Type.Integer({ minimum: 1 }),
    started_at: Instant,
    duration_ms: Count,
    status_code: Nullable(Type.Integer()),
    response_body_excerpt: Nullable(Type.String()),
    error: Nullable(Type.String()),
    outcome: Type.String(),
    request_headers: Nullable(
      Type.Record(Type.String(), Type.String(), {
        description:
          "The headers the attempt sent (for a broker, the message headers); the values of an endpoint's extra headers and of its OAuth bearer token are shown as [redacted]; null: nothing was sent (refused address, unusable credentials, an abandoned attempt) or an attempt made before they were kept",
      }),
    ),
    response_headers: Nullable(
      Type.Record(Type.String(), Type.String(), {
        description: 'The headers the receiver answered with: at most 40, each value cut at 300 characters, cookies redacted; null: no HTTP answer',
      }),
    ),
  },
  { title: 'WebhookAttempt', additionalProperties: false },
);
/** A delivery with its attempts and its event. */
export const WebhookDeliveryDetail = Type.Object(
  {
    ...deliveryFields,
    attempts: Type.Array(WebhookAttempt),
    event: Type.Object(
      {
        id: Uuid,
        type: Type.String(),
        created_at: Instant,
        data: Type.Unknown({ description: 'The event payload: the record, or the ping message' }),
        previous: Type.Optional(
          Type.Unknown({ description: 'On an update: the fields it changed with their values before it, as the delivered body carries them (decision 0057)' }),
        ),
      },
      { additionalProperties: false },
    ),
  },
  { title: 'WebhookDeliveryDetail', additionalProperties: false },
);
export const DeliveryPage = Type.Object({ data: Type.Array(WebhookDelivery), pagination: AdminPagination }, { additionalProperties: false });
export const RetriedCount = Type.Object({ retried: Count }, { additionalProperties: false });
const Totals = { succeeded: Count, failed: Count, dead: Count };
/** Hourly delivery activity, current totals and retention (the dashboard's webhook page). */
export const DeliveryStats = Type.Object(
  {
    buckets: Type.Array(Type.Object({ hour: Instant, ...Totals }, { additionalProperties: false })),
    totals: Type.Object({ ...Totals, pending: Count }, { additionalProperties: false }),
    retention: Type.Object(
      {
        delivery_retention_ms: Count,
        dead_letter_retention_ms: Count,
        event_retention_ms: Count,
        deliveries_complete_since: Nullable(Instant),
        events_complete_since: Nullable(Instant),
        oldest_delivery_at: Nullable(Instant),
      },
      { additionalProperties: false },
    ),
  },
  { title: 'DeliveryStats', additionalProperties: false },
);

/** The answer of a manual stock adjustment. */
export const StockAdjustment = Type.Object({ movement_id: Uuid, product: Product }, { title: 'StockAdjustment', additionalProperties: false });
/** The answer of a CSV stock import. */
export const StockImport = Type.Object(
  { rows: Count, movements: Count, products: Count },
  { title: 'StockImport', description: 'Rows read, stock movements written, products changed', additionalProperties: false },
);

/** An import job (decision 0060): a large stock import run in the background, polled for its progress. */
export const ImportJob = Type.Object(
  {
    id: Uuid,
    kind: StringEnum(['stock_csv'] as const),
    status: StringEnum(['queued', 'running', 'succeeded', 'failed'] as const, {
      description: "queued (waiting for its store's running job or a runner), running, succeeded or failed (final)",
    }),
    rows_total: Type.Integer({ minimum: 0, description: 'Data rows of the CSV (counted by its lines until the job has read it)' }),
    rows_done: Type.Integer({ minimum: 0, description: 'Rows applied, in committed steps of whole products' }),
    queue_position: Nullable(Type.Integer({ minimum: 0, description: "While queued: the store's jobs ahead of it, the running one included" })),
    result: Nullable(StockImport),
    error: Nullable(
      Type.Object(
        {
          code: Type.String(),
          detail: Type.String(),
          errors: Type.Array(Type.Object({ param: Type.String(), message: Type.String() }, { additionalProperties: false }), {
            description: 'The rows or fields refused (at most 100; the detail counts them all)',
          }),
        },
        { additionalProperties: false },
      ),
    ),
    notes: Type.Array(Type.String(), { description: 'What happened to the job besides its run: paused at a shutdown, taken back from a stopped process' }),
    attempts: Type.Integer({ minimum: 0, description: 'Runs begun (a process stopping mid-run makes another, resumed after its last committed step)' }),
    created_by: Nullable(Type.Object({ kind: Type.String(), id: Nullable(Type.String()), name: Type.String() }, { additionalProperties: false })),
    created_at: Instant,
    started_at: Nullable(Instant),
    finished_at: Nullable(Instant),
    updated_at: Instant,
  },
  { title: 'ImportJob', additionalProperties: false },
);

/** The dashboard's first page. */
export const Overview = Type.Object(
  {
    products: Type.Object({ total: Count, active: Count }, { additionalProperties: false }),
    orders: Type.Object({ total: Count, last_24h: Count }, { additionalProperties: false }),
    customers: Type.Object({ total: Count, active: Count }, { additionalProperties: false }),
    api_tokens: Type.Object({ active: Count }, { additionalProperties: false }),
  },
  { title: 'Overview', additionalProperties: false },
);

/**
 * A dashboard session as its sign-in routes answer it (sign-in, first-administrator setup, one-time
 * links, GET /admin/session): never its cookie, which is HttpOnly and set on the answer.
 */
export const DashboardSession = Type.Object(
  {
    email: Type.String(),
    role: StringEnum(ADMIN_ROLES, { description: "The role in the session's store" }),
    csrf_token: Type.String({ description: "The session's CSRF token: send it in X-CSRF-Token on every request that changes something" }),
    expires_at: Instant,
    second_factor: Type.Object(
      {
        enabled: Type.Boolean({ description: 'Whether the administrator has a second factor' }),
        required: Type.Boolean({ description: 'Whether the store requires one: until it is set up, the session may do nothing else (decision 0028)' }),
      },
      { additionalProperties: false },
    ),
    store: Type.Object(
      { id: Uuid, name: Type.String(), status: StringEnum(['active', 'suspended', 'deleting'] as const) },
      { additionalProperties: false, description: 'The store the session acts in (POST /admin/api/v1/session/store switches it)' },
    ),
  },
  { title: 'DashboardSession', additionalProperties: false },
);
