/**
 * The admin API (/admin/api/v1) for a token with the `admin` scope: API tokens, webhook endpoints,
 * deliveries, retries and replays. Every POST carries an Idempotency-Key (a fresh UUID per call, or
 * yours through `{ idempotencyKey }`), so the client retries it safely after a timeout or a lost
 * connection: the service answers the first response again instead of writing twice.
 */
import { randomUUID } from 'node:crypto';
import type { operations } from './generated/api-types.ts';
import type { StoreApiClient } from './store-api.client.ts';

type Body<O extends keyof operations> = operations[O] extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : operations[O] extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B
    : never;

/** Options of an admin write. */
export interface AdminCallOptions {
  /** Idempotency-Key to send (default: a new UUID per call, reused by the client's own retries). */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** An API token as the admin API shows it (never its secret, except once in `create`). */
export interface ApiToken {
  id: string;
  name: string;
  prefix: string;
  scopes: ('products:read' | 'orders:read' | 'customers:read' | 'inventory:read' | 'admin')[];
  rate_limit_standard: number | null;
  rate_limit_export: number | null;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
  status: 'active' | 'revoked' | 'expired';
}

/** A webhook endpoint (docs/webhooks.md, Admin API). */
export interface WebhookEndpoint {
  id: string;
  url: string;
  description: string | null;
  event_types: string[];
  enabled: boolean;
  state: 'active' | 'paused' | 'disabled';
  paused_until: string | null;
  consecutive_failures: number;
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
}

/** A webhook delivery (docs/webhooks.md, Admin API). */
export interface WebhookDelivery {
  id: string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  endpoint_url: string;
  status: 'pending' | 'failed' | 'succeeded' | 'dead';
  attempt_count: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

const PREFIX = 'admin/api/v1/';

/** client.admin: the admin API's calls, grouped as the API is. */
export class AdminClient {
  readonly tokens: AdminTokens;
  readonly webhookEndpoints: AdminWebhookEndpoints;
  readonly deliveries: AdminDeliveries;

  constructor(client: StoreApiClient) {
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
  async list(options: AdminCallOptions = {}): Promise<ApiToken[]> {
    return (await this.call<ApiToken[]>('GET', 'tokens', undefined, options)).data;
  }
  async get(tokenId: string, options: AdminCallOptions = {}): Promise<ApiToken> {
    return (await this.call<ApiToken>('GET', `tokens/${id(tokenId)}`, undefined, options)).data;
  }
  /** Creates a token; `token` (the secret `sia_…`) is in this answer only. */
  async create(body: Body<'post_admin_api_v1_tokens'>, options: AdminCallOptions = {}): Promise<ApiToken & { token: string }> {
    return (await this.call<ApiToken & { token: string }>('POST', 'tokens', body, options)).data;
  }
  async revoke(tokenId: string, options: AdminCallOptions = {}): Promise<ApiToken> {
    return (await this.call<ApiToken>('POST', `tokens/${id(tokenId)}/revoke`, undefined, options)).data;
  }
}

/** Webhook endpoints. */
export class AdminWebhookEndpoints {
  constructor(readonly call: Call) {}
  async list(options: AdminCallOptions = {}): Promise<WebhookEndpoint[]> {
    return (await this.call<WebhookEndpoint[]>('GET', 'webhooks/endpoints', undefined, options)).data;
  }
  async get(endpointId: string, options: AdminCallOptions = {}): Promise<WebhookEndpoint> {
    return (await this.call<WebhookEndpoint>('GET', `webhooks/endpoints/${id(endpointId)}`, undefined, options)).data;
  }
  /** Registers an endpoint; its signing secret `whsec_…` is in the answer. */
  async create(body: Body<'post_admin_api_v1_webhooks_endpoints'>, options: AdminCallOptions = {}): Promise<WebhookEndpoint & { secret: string }> {
    return (await this.call<WebhookEndpoint & { secret: string }>('POST', 'webhooks/endpoints', body, options)).data;
  }
  async update(endpointId: string, body: Body<'patch_admin_api_v1_webhooks_endpoints_id'>, options: AdminCallOptions = {}): Promise<WebhookEndpoint> {
    return (await this.call<WebhookEndpoint>('PATCH', `webhooks/endpoints/${id(endpointId)}`, body, options)).data;
  }
  async secret(endpointId: string, options: AdminCallOptions = {}): Promise<{ secret: string; previous_secret_expires_at: string | null }> {
    return (
      await this.call<{ secret: string; previous_secret_expires_at: string | null }>('GET', `webhooks/endpoints/${id(endpointId)}/secret`, undefined, options)
    ).data;
  }
  async rotateSecret(endpointId: string, options: AdminCallOptions = {}): Promise<{ secret: string; previous_secret_expires_at: string | null }> {
    return (
      await this.call<{ secret: string; previous_secret_expires_at: string | null }>(
        'POST',
        `webhooks/endpoints/${id(endpointId)}/rotate-secret`,
        undefined,
        options,
      )
    ).data;
  }
  async ping(endpointId: string, options: AdminCallOptions = {}): Promise<{ event_id: string; delivery_id: string }> {
    return (await this.call<{ event_id: string; delivery_id: string }>('POST', `webhooks/endpoints/${id(endpointId)}/ping`, undefined, options)).data;
  }
  /** Queues again every subscribed event of [from, to) for this endpoint. */
  async replay(endpointId: string, body: { from: string; to: string }, options: AdminCallOptions = {}): Promise<{ queued: number }> {
    return (await this.call<{ queued: number }>('POST', `webhooks/endpoints/${id(endpointId)}/replay`, body, options)).data;
  }
}

/** Webhook deliveries: list (newest first), one with its attempts, retries. */
export class AdminDeliveries {
  constructor(
    readonly call: Call,
    private readonly client: StoreApiClient,
  ) {}
  /** One page, newest first. */
  async list(
    query: { endpoint_id?: string; status?: WebhookDelivery['status']; limit?: number; cursor?: string } = {},
    options: AdminCallOptions = {},
  ): Promise<{ data: WebhookDelivery[]; pagination: { next_cursor: string | null; has_more: boolean; limit: number } }> {
    return this.client.requestJson('GET', 'webhooks/deliveries', { prefix: PREFIX, query, signal: options.signal });
  }
  /** Every delivery matching `query`, page after page (for await). */
  async *iterate(
    query: { endpoint_id?: string; status?: WebhookDelivery['status']; limit?: number } = {},
    options: AdminCallOptions = {},
  ): AsyncGenerator<WebhookDelivery> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.list({ ...query, cursor }, options);
      yield* page.data;
      if (!page.pagination.has_more || page.pagination.next_cursor === null || page.data.length === 0) return;
      cursor = page.pagination.next_cursor;
    }
  }
  async get(deliveryId: string, options: AdminCallOptions = {}): Promise<WebhookDelivery & { attempts: unknown[]; event: unknown }> {
    return (await this.call<WebhookDelivery & { attempts: unknown[]; event: unknown }>('GET', `webhooks/deliveries/${id(deliveryId)}`, undefined, options))
      .data;
  }
  /** Retries a dead or failed delivery now. */
  async retry(deliveryId: string, options: AdminCallOptions = {}): Promise<WebhookDelivery> {
    return (await this.call<WebhookDelivery>('POST', `webhooks/deliveries/${id(deliveryId)}/retry`, undefined, options)).data;
  }
  /** Retries a selection, or every dead letter of an endpoint. */
  async retryMany(body: { delivery_ids: string[] } | { endpoint_id: string; all_dead: true }, options: AdminCallOptions = {}): Promise<{ retried: number }> {
    return (await this.call<{ retried: number }>('POST', 'webhooks/deliveries/retry', body, options)).data;
  }
}
