/**
 * The admin API (/admin/api/v1) for a token with the `admin` scope: API tokens, webhook endpoints,
 * deliveries, retries and replays. Every POST carries an Idempotency-Key (a fresh UUID per call, or
 * yours through `{ idempotencyKey }`), so the client retries it safely after a timeout or a lost
 * connection: the service answers the first response again instead of writing twice.
 */
import { randomUUID } from 'node:crypto';
import type { components, operations } from './generated/api-types.ts';
import type { ApiConnection } from './api-connection.ts';

// Every type below comes from the OpenAPI document (generated/api-types.ts): the server's own
// TypeBox schemas, so a field added there reaches this client at the next `npm run generate`.

type Body<O extends keyof operations> = operations[O] extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : operations[O] extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B
    : never;
type Json<R> = R extends { content: { 'application/json': infer B } } ? B : never;
/** The success body of an operation (its 200, 201 or 202 answer). */
type Answer<O extends keyof operations> = Json<operations[O]['responses'][Extract<keyof operations[O]['responses'], 200 | 201 | 202>]>;
/** The `data` of an operation's success body. */
type Data<O extends keyof operations> = Answer<O> extends { data: infer D } ? D : never;
type Query<O extends keyof operations> = operations[O] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** Options of an admin write. */
export interface AdminCallOptions {
  /** Idempotency-Key to send (default: a new UUID per call, reused by the client's own retries). */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** An API token as the admin API shows it (never its secret). */
export type ApiToken = components['schemas']['ApiKey'];
/** A token with its secret `sia_…`: the answer of a create or a roll, once. */
export type ApiTokenWithSecret = components['schemas']['ApiKeyWithSecret'];
/** A webhook endpoint (docs/webhooks.md, Admin API). */
export type WebhookEndpoint = components['schemas']['WebhookEndpoint'];
/** A webhook delivery (docs/webhooks.md, Admin API). */
export type WebhookDelivery = components['schemas']['WebhookDelivery'];

const PREFIX = 'admin/api/v1/';

/** client.admin: the admin API's calls, grouped as the API is. */
export class AdminClient {
  readonly tokens: AdminTokens;
  readonly webhookEndpoints: AdminWebhookEndpoints;
  readonly deliveries: AdminDeliveries;

  constructor(client: ApiConnection) {
    const call = <B>(
      method: 'GET' | 'POST' | 'PATCH',
      path: string,
      body?: unknown,
      options: AdminCallOptions & { query?: Record<string, string | number | undefined> } = {},
    ) =>
      client.requestJson<{ data: B }>(method, path, {
        prefix: PREFIX,
        body,
        query: options.query,
        signal: options.signal,
        idempotencyKey: method === 'POST' ? (options.idempotencyKey ?? randomUUID()) : undefined,
      });
    this.tokens = new AdminTokens(call);
    this.webhookEndpoints = new AdminWebhookEndpoints(call);
    this.deliveries = new AdminDeliveries(call, client);
  }
}

type Call = <B>(
  method: 'GET' | 'POST' | 'PATCH',
  path: string,
  body?: unknown,
  options?: AdminCallOptions & { query?: Record<string, string | number | undefined> },
) => Promise<{ data: B }>;
const id = (value: string) => encodeURIComponent(value);

/** API tokens. */
export class AdminTokens {
  constructor(readonly call: Call) {}
  async list(options: AdminCallOptions = {}): Promise<Data<'listApiKeys'>> {
    return (await this.call<Data<'listApiKeys'>>('GET', 'tokens', undefined, options)).data;
  }
  async get(tokenId: string, options: AdminCallOptions = {}): Promise<Data<'getApiKey'>> {
    return (await this.call<Data<'getApiKey'>>('GET', `tokens/${id(tokenId)}`, undefined, options)).data;
  }
  /** Creates a token; `token` (the secret `sia_…`) is in this answer only. */
  async create(body: Body<'createApiKey'>, options: AdminCallOptions = {}): Promise<Data<'createApiKey'>> {
    return (await this.call<Data<'createApiKey'>>('POST', 'tokens', body, options)).data;
  }
  async revoke(tokenId: string, options: AdminCallOptions = {}): Promise<Data<'revokeApiKey'>> {
    return (await this.call<Data<'revokeApiKey'>>('POST', `tokens/${id(tokenId)}/revoke`, undefined, options)).data;
  }
}

/** Webhook endpoints. */
export class AdminWebhookEndpoints {
  constructor(readonly call: Call) {}
  async list(options: AdminCallOptions = {}): Promise<Data<'listWebhookEndpoints'>> {
    return (await this.call<Data<'listWebhookEndpoints'>>('GET', 'webhooks/endpoints', undefined, options)).data;
  }
  async get(endpointId: string, options: AdminCallOptions = {}): Promise<Data<'getWebhookEndpoint'>> {
    return (await this.call<Data<'getWebhookEndpoint'>>('GET', `webhooks/endpoints/${id(endpointId)}`, undefined, options)).data;
  }
  /** Registers an endpoint; its signing secret `whsec_…` is in the answer. */
  async create(body: Body<'createWebhookEndpoint'>, options: AdminCallOptions = {}): Promise<Data<'createWebhookEndpoint'>> {
    return (await this.call<Data<'createWebhookEndpoint'>>('POST', 'webhooks/endpoints', body, options)).data;
  }
  async update(endpointId: string, body: Body<'updateWebhookEndpoint'>, options: AdminCallOptions = {}): Promise<Data<'updateWebhookEndpoint'>> {
    return (await this.call<Data<'updateWebhookEndpoint'>>('PATCH', `webhooks/endpoints/${id(endpointId)}`, body, options)).data;
  }
  async secret(endpointId: string, options: AdminCallOptions = {}): Promise<Data<'getEndpointSecret'>> {
    return (await this.call<Data<'getEndpointSecret'>>('GET', `webhooks/endpoints/${id(endpointId)}/secret`, undefined, options)).data;
  }
  async rotateSecret(endpointId: string, options: AdminCallOptions = {}): Promise<Data<'rotateEndpointSecret'>> {
    return (await this.call<Data<'rotateEndpointSecret'>>('POST', `webhooks/endpoints/${id(endpointId)}/rotate-secret`, undefined, options)).data;
  }
  async ping(endpointId: string, options: AdminCallOptions = {}): Promise<Data<'pingEndpoint'>> {
    return (await this.call<Data<'pingEndpoint'>>('POST', `webhooks/endpoints/${id(endpointId)}/ping`, undefined, options)).data;
  }
  /** Queues again every subscribed event of [from, to) for this endpoint. */
  async replay(endpointId: string, body: Body<'replayEndpointEvents'>, options: AdminCallOptions = {}): Promise<Data<'replayEndpointEvents'>> {
    return (await this.call<Data<'replayEndpointEvents'>>('POST', `webhooks/endpoints/${id(endpointId)}/replay`, body, options)).data;
  }
}

/** Webhook deliveries: list (newest first), one with its attempts, retries. */
export class AdminDeliveries {
  constructor(
    readonly call: Call,
    private readonly client: ApiConnection,
  ) {}
  /** One page, newest first. */
  async list(query: Query<'listDeliveries'> = {}, options: AdminCallOptions = {}): Promise<Answer<'listDeliveries'>> {
    return this.client.requestJson('GET', 'webhooks/deliveries', { prefix: PREFIX, query, signal: options.signal });
  }
  /** Every delivery matching `query`, page after page (for await). */
  async *iterate(query: Omit<Query<'listDeliveries'>, 'cursor'> = {}, options: AdminCallOptions = {}): AsyncGenerator<WebhookDelivery> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.list({ ...query, cursor }, options);
      yield* page.data;
      if (!page.pagination.has_more || page.pagination.next_cursor === null || page.data.length === 0) return;
      cursor = page.pagination.next_cursor;
    }
  }
  async get(deliveryId: string, options: AdminCallOptions = {}): Promise<Data<'getDelivery'>> {
    return (await this.call<Data<'getDelivery'>>('GET', `webhooks/deliveries/${id(deliveryId)}`, undefined, options)).data;
  }
  /** Retries a dead or failed delivery now. */
  async retry(deliveryId: string, options: AdminCallOptions = {}): Promise<Data<'retryDelivery'>> {
    return (await this.call<Data<'retryDelivery'>>('POST', `webhooks/deliveries/${id(deliveryId)}/retry`, undefined, options)).data;
  }
  /** Retries a selection, or every dead letter of an endpoint. */
  async retryMany(body: Body<'retryDeliveries'>, options: AdminCallOptions = {}): Promise<Data<'retryDeliveries'>> {
    return (await this.call<Data<'retryDeliveries'>>('POST', 'webhooks/deliveries/retry', body, options)).data;
  }
}
