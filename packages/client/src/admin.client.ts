/**
 * The admin API (/admin/api/v1) for a token with the `admin` scope: every operation an API key may
 * call, as named methods grouped as the API is (API tokens, webhook endpoints and deliveries, the
 * catalog, orders, customers, stock, the dashboard's reads), and `request(operationId, …)` for any of
 * them by its operationId. The method and path of every call come from the OpenAPI document
 * (generated/admin-operations.ts), its parameters, body and answer from its generated types.
 *
 * Every POST carries an Idempotency-Key (a fresh UUID per call, or yours through
 * `{ idempotencyKey }`), so the client retries it safely after a timeout or a lost connection: the
 * service answers the first response again instead of writing twice. Every answer carries the
 * answer's metadata as `lastResponse` (response-metadata.ts).
 */
import { randomUUID } from 'node:crypto';
import type { components, operations } from './generated/api-types.ts';
import { ADMIN_OPERATIONS } from './generated/admin-operations.ts';
import type { ApiConnection, Query as QueryParams } from './api-connection.ts';
import { trackResponses, withResponse, type ResponseMetadata, type WithResponse } from './response-metadata.ts';

// Every type below comes from the OpenAPI document (generated/api-types.ts): the server's own
// TypeBox schemas, so a field added there reaches this client at the next `npm run generate`.

/** The operationId of every admin operation an API key may call. */
export type AdminOperationId = keyof typeof ADMIN_OPERATIONS;

type BodyOf<O extends keyof operations> = operations[O] extends { requestBody: { content: infer C } }
  ? C[keyof C]
  : operations[O] extends { requestBody?: { content: infer C } }
    ? C[keyof C] | undefined
    : undefined;
type Json<R> = R extends { content: { 'application/json': infer B } } ? B : never;
/** The success body of an operation (its 200, 201 or 202 answer). */
export type AdminAnswer<O extends keyof operations> = Json<operations[O]['responses'][Extract<keyof operations[O]['responses'], 200 | 201 | 202>]>;
/** The `data` of an operation's success body. */
type Data<O extends keyof operations> = AdminAnswer<O> extends { data: infer D } ? D : never;
type Query<O extends keyof operations> = operations[O] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** Keys whose type is only `undefined` are dropped, those that may be undefined become optional. */
type Present<T> = { [K in keyof T as [T[K]] extends [undefined] ? never : undefined extends T[K] ? never : K]: T[K] } & {
  [K in keyof T as [T[K]] extends [undefined] ? never : undefined extends T[K] ? K : never]?: T[K];
};
/** The path parameters, query and body of an operation, each present as the operation takes it. */
export type AdminParams<O extends AdminOperationId> = Present<{
  path: operations[O]['parameters']['path'];
  query: operations[O]['parameters']['query'];
  body: BodyOf<O>;
}>;

/** Options of an admin call. */
export interface AdminCallOptions {
  /** Idempotency-Key to send with a POST (default: a new UUID per call, reused by the client's own retries). */
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
/** One entry of the audit log. */
export type AuditLogEntry = Data<'listAuditLog'>[number];

const PREFIX = 'admin/api/v1/';

/** Sends one admin operation; its answer's whole JSON body, with `lastResponse`. */
type Call = <O extends AdminOperationId>(operationId: O, params: AdminParams<O>, options?: AdminCallOptions) => Promise<WithResponse<AdminAnswer<O>>>;

/** The `data` of an answer, carrying the answer's `lastResponse`. */
async function dataOf<A extends { data: unknown }>(answer: Promise<WithResponse<A>>): Promise<WithResponse<A['data']>> {
  const body = await answer;
  return withResponse(body.data, body.lastResponse);
}

/** Every page of a cursor-paged admin list from `query.cursor` on, with the latest page's `lastResponse`. */
function pages<T, Q extends { cursor?: string }>(
  list: (query: Q) => Promise<WithResponse<{ data: T[]; pagination: { has_more: boolean; next_cursor: string | null } }>>,
  query: Q,
): AsyncGenerator<T> & { readonly lastResponse: ResponseMetadata | null } {
  return trackResponses(async function* (track) {
    let cursor = query.cursor;
    for (;;) {
      const page = await list({ ...query, cursor });
      track(page.lastResponse);
      yield* page.data;
      if (!page.pagination.has_more || page.pagination.next_cursor === null || page.data.length === 0) return;
      cursor = page.pagination.next_cursor;
    }
  });
}

/** client.admin: the admin API's calls, grouped as the API is. */
export class AdminClient {
  readonly tokens: AdminTokens;
  readonly webhookEndpoints: AdminWebhookEndpoints;
  readonly deliveries: AdminDeliveries;
  /** Catalog writes: products, their variants and images. */
  readonly products: AdminProducts;
  /** Order writes: place, change status and payment status. */
  readonly orders: AdminOrders;
  /** Customer writes. */
  readonly customers: AdminCustomers;
  /** Stock writes: adjustments and CSV imports. */
  readonly inventory: AdminInventory;
  /** Who did what in the admin API. */
  readonly auditLog: AdminAuditLog;
  readonly #call: Call;

  constructor(client: ApiConnection) {
    this.#call = async (operationId, params, options = {}) => {
      const { method, path, body: mediaType } = ADMIN_OPERATIONS[operationId];
      const given = params as { path?: Record<string, string | number>; query?: QueryParams; body?: unknown };
      const resolved = path.replace(/\{(\w+)\}/g, (_, name: string) => {
        const value = given.path?.[name];
        if (value === undefined || value === '') throw new TypeError(`${operationId} needs the path parameter ${name}`);
        return encodeURIComponent(String(value));
      });
      return client.requestJson(method, resolved, {
        prefix: PREFIX,
        query: given.query,
        body: given.body,
        contentType: mediaType ?? undefined,
        signal: options.signal,
        idempotencyKey: method === 'POST' ? (options.idempotencyKey ?? randomUUID()) : undefined,
      });
    };
    this.tokens = new AdminTokens(this.#call);
    this.webhookEndpoints = new AdminWebhookEndpoints(this.#call);
    this.deliveries = new AdminDeliveries(this.#call);
    this.products = new AdminProducts(this.#call);
    this.orders = new AdminOrders(this.#call);
    this.customers = new AdminCustomers(this.#call);
    this.inventory = new AdminInventory(this.#call);
    this.auditLog = new AdminAuditLog(this.#call);
  }

  /**
   * Any admin operation an API key may call, by its operationId in the OpenAPI document, e.g.
   * `request('updateApiKey', { path: { id }, body: { name } })`: parameters and answer typed from the
   * document. Answers the whole JSON body (`{ data, … }`) with `lastResponse`.
   */
  request<O extends AdminOperationId>(
    operationId: O,
    ...[params, options]: object extends AdminParams<O>
      ? [params?: AdminParams<O>, options?: AdminCallOptions]
      : [params: AdminParams<O>, options?: AdminCallOptions]
  ): Promise<WithResponse<AdminAnswer<O>>> {
    return this.#call(operationId, (params ?? {}) as AdminParams<O>, options);
  }

  /** The dashboard's overview: counts, webhook health, recent activity. */
  overview(options: AdminCallOptions = {}): Promise<WithResponse<Data<'getOverview'>>> {
    return dataOf(this.#call('getOverview', {}, options));
  }
  /** The scopes a key may hold and the event groups an endpoint may subscribe to. */
  scopesAndEventGroups(options: AdminCallOptions = {}): Promise<WithResponse<Data<'listScopesAndEventGroups'>>> {
    return dataOf(this.#call('listScopesAndEventGroups', {}, options));
  }
  /** Every event type with its description, payload schema and example. */
  eventTypes(options: AdminCallOptions = {}): Promise<WithResponse<Data<'listEventTypes'>>> {
    return dataOf(this.#call('listEventTypes', {}, options));
  }
  /** What needs attention: failing endpoints, dead letters, keys whose maker lacks a second factor. */
  alerts(options: AdminCallOptions = {}): Promise<WithResponse<Data<'getAlerts'>>> {
    return dataOf(this.#call('getAlerts', {}, options));
  }
  /** The store's administrators with their roles. */
  administrators(options: AdminCallOptions = {}): Promise<WithResponse<Data<'listAdmins'>>> {
    return dataOf(this.#call('listAdmins', {}, options));
  }
  /** The store's security settings (whether a second factor is required). */
  securitySettings(options: AdminCallOptions = {}): Promise<WithResponse<Data<'getSecuritySettings'>>> {
    return dataOf(this.#call('getSecuritySettings', {}, options));
  }
  /**
   * The store's single sign-on (OpenID Connect) settings in `data`, null when it has none (the client
   * secret is never shown). The whole answer, so `lastResponse` is there either way.
   */
  ssoSettings(options: AdminCallOptions = {}) {
    return this.#call('getSsoSettings', {}, options);
  }
}

const byId = (id: string) => ({ path: { id } });

/** API tokens. */
export class AdminTokens {
  constructor(private readonly call: Call) {}
  list(options: AdminCallOptions = {}): Promise<WithResponse<Data<'listApiKeys'>>> {
    return dataOf(this.call('listApiKeys', {}, options));
  }
  get(tokenId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'getApiKey'>>> {
    return dataOf(this.call('getApiKey', byId(tokenId), options));
  }
  /** Creates a token; `token` (the secret `sia_…`) is in this answer only. */
  create(body: BodyOf<'createApiKey'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'createApiKey'>>> {
    return dataOf(this.call('createApiKey', { body }, options));
  }
  /** Renames a token or changes its own rate limits. */
  update(tokenId: string, body: BodyOf<'updateApiKey'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'updateApiKey'>>> {
    return dataOf(this.call('updateApiKey', { ...byId(tokenId), body }, options));
  }
  /** A new secret for the token; the old one keeps working `overlap_seconds` (default 24 h). The new `token` is in this answer only. */
  roll(tokenId: string, body: BodyOf<'rollApiKey'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'rollApiKey'>>> {
    return dataOf(this.call('rollApiKey', { ...byId(tokenId), body }, options));
  }
  revoke(tokenId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'revokeApiKey'>>> {
    return dataOf(this.call('revokeApiKey', byId(tokenId), options));
  }
}

/** Webhook endpoints. */
export class AdminWebhookEndpoints {
  constructor(private readonly call: Call) {}
  list(options: AdminCallOptions = {}): Promise<WithResponse<Data<'listWebhookEndpoints'>>> {
    return dataOf(this.call('listWebhookEndpoints', {}, options));
  }
  get(endpointId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'getWebhookEndpoint'>>> {
    return dataOf(this.call('getWebhookEndpoint', byId(endpointId), options));
  }
  /** Registers an endpoint; its signing secret `whsec_…` is in the answer. */
  create(body: BodyOf<'createWebhookEndpoint'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'createWebhookEndpoint'>>> {
    return dataOf(this.call('createWebhookEndpoint', { body }, options));
  }
  update(endpointId: string, body: BodyOf<'updateWebhookEndpoint'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'updateWebhookEndpoint'>>> {
    return dataOf(this.call('updateWebhookEndpoint', { ...byId(endpointId), body }, options));
  }
  /** Deletes the endpoint; its pending deliveries are cancelled. */
  delete(endpointId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'deleteWebhookEndpoint'>>> {
    return dataOf(this.call('deleteWebhookEndpoint', byId(endpointId), options));
  }
  secret(endpointId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'getEndpointSecret'>>> {
    return dataOf(this.call('getEndpointSecret', byId(endpointId), options));
  }
  rotateSecret(endpointId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'rotateEndpointSecret'>>> {
    return dataOf(this.call('rotateEndpointSecret', byId(endpointId), options));
  }
  ping(endpointId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'pingEndpoint'>>> {
    return dataOf(this.call('pingEndpoint', byId(endpointId), options));
  }
  /** Queues a test event of `type` (with the type's example payload) to this endpoint. */
  sendTestEvent(endpointId: string, body: BodyOf<'sendTestEvent'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'sendTestEvent'>>> {
    return dataOf(this.call('sendTestEvent', { ...byId(endpointId), body }, options));
  }
  /** Queues again every subscribed event of [from, to) for this endpoint. */
  replay(endpointId: string, body: BodyOf<'replayEndpointEvents'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'replayEndpointEvents'>>> {
    return dataOf(this.call('replayEndpointEvents', { ...byId(endpointId), body }, options));
  }
  /** How many deliveries `replay` with the same window would queue, without queuing any. */
  previewReplay(
    endpointId: string,
    query: Query<'previewEndpointReplay'>,
    options: AdminCallOptions = {},
  ): Promise<WithResponse<Data<'previewEndpointReplay'>>> {
    return dataOf(this.call('previewEndpointReplay', { ...byId(endpointId), query }, options));
  }
  /** The endpoint's delivery counts and latencies over the last 24 hours and 7 days. */
  stats(endpointId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'getEndpointStats'>>> {
    return dataOf(this.call('getEndpointStats', byId(endpointId), options));
  }
}

/** Webhook deliveries: list (newest first), one with its attempts, retries, statistics. */
export class AdminDeliveries {
  constructor(private readonly call: Call) {}
  /** One page, newest first. */
  list(query: Query<'listDeliveries'> = {}, options: AdminCallOptions = {}): Promise<WithResponse<AdminAnswer<'listDeliveries'>>> {
    return this.call('listDeliveries', { query }, options);
  }
  /** Every delivery matching `query`, page after page (for await); `lastResponse` is the latest page's. */
  iterate(
    query: Query<'listDeliveries'> = {},
    options: AdminCallOptions = {},
  ): AsyncGenerator<WebhookDelivery> & { readonly lastResponse: ResponseMetadata | null } {
    return pages((q) => this.list(q, options), query);
  }
  get(deliveryId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'getDelivery'>>> {
    return dataOf(this.call('getDelivery', byId(deliveryId), options));
  }
  /** Retries a dead or failed delivery now. */
  retry(deliveryId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'retryDelivery'>>> {
    return dataOf(this.call('retryDelivery', byId(deliveryId), options));
  }
  /** Retries a selection, or every dead letter of an endpoint. */
  retryMany(body: BodyOf<'retryDeliveries'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'retryDeliveries'>>> {
    return dataOf(this.call('retryDeliveries', { body }, options));
  }
  /** Delivery counts per outcome over the last `hours`. */
  stats(query: Query<'getDeliveryStats'> = {}, options: AdminCallOptions = {}): Promise<WithResponse<Data<'getDeliveryStats'>>> {
    return dataOf(this.call('getDeliveryStats', { query }, options));
  }
}

/** Catalog writes (the read API's `client.products` reads them back). */
export class AdminProducts {
  constructor(private readonly call: Call) {}
  /** One product as the admin API shows it. */
  get(productId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'getAdminProduct'>>> {
    return dataOf(this.call('getAdminProduct', byId(productId), options));
  }
  create(body: BodyOf<'createProduct'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'createProduct'>>> {
    return dataOf(this.call('createProduct', { body }, options));
  }
  update(productId: string, body: BodyOf<'updateProduct'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'updateProduct'>>> {
    return dataOf(this.call('updateProduct', { ...byId(productId), body }, options));
  }
  addVariant(productId: string, body: BodyOf<'addVariant'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'addVariant'>>> {
    return dataOf(this.call('addVariant', { ...byId(productId), body }, options));
  }
  updateVariant(
    productId: string,
    variantId: string,
    body: BodyOf<'updateVariant'>,
    options: AdminCallOptions = {},
  ): Promise<WithResponse<Data<'updateVariant'>>> {
    return dataOf(this.call('updateVariant', { path: { id: productId, variantId }, body }, options));
  }
  addImage(productId: string, body: BodyOf<'addImage'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'addImage'>>> {
    return dataOf(this.call('addImage', { ...byId(productId), body }, options));
  }
  updateImage(productId: string, imageId: string, body: BodyOf<'updateImage'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'updateImage'>>> {
    return dataOf(this.call('updateImage', { path: { id: productId, imageId }, body }, options));
  }
}

/** Order writes. */
export class AdminOrders {
  constructor(private readonly call: Call) {}
  /** Places an order (stock is taken from the items' products and variants). */
  place(body: BodyOf<'placeOrder'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'placeOrder'>>> {
    return dataOf(this.call('placeOrder', { body }, options));
  }
  /** Moves the order to `status` (the order state machine refuses a transition it does not allow). */
  changeStatus(orderId: string, body: BodyOf<'changeOrderStatus'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'changeOrderStatus'>>> {
    return dataOf(this.call('changeOrderStatus', { ...byId(orderId), body }, options));
  }
  changePaymentStatus(
    orderId: string,
    body: BodyOf<'changePaymentStatus'>,
    options: AdminCallOptions = {},
  ): Promise<WithResponse<Data<'changePaymentStatus'>>> {
    return dataOf(this.call('changePaymentStatus', { ...byId(orderId), body }, options));
  }
}

/** Customer writes. */
export class AdminCustomers {
  constructor(private readonly call: Call) {}
  create(body: BodyOf<'createCustomer'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'createCustomer'>>> {
    return dataOf(this.call('createCustomer', { body }, options));
  }
  update(customerId: string, body: BodyOf<'updateCustomer'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'updateCustomer'>>> {
    return dataOf(this.call('updateCustomer', { ...byId(customerId), body }, options));
  }
}

/** Stock writes. */
export class AdminInventory {
  constructor(private readonly call: Call) {}
  /** Adds `quantity_change` (negative: removes) to a product's or a variant's stock, as one stock movement. */
  adjust(body: BodyOf<'adjustStock'>, options: AdminCallOptions = {}): Promise<WithResponse<Data<'adjustStock'>>> {
    return dataOf(this.call('adjustStock', { body }, options));
  }
  /**
   * Imports stock from CSV text: header `sku,stock` (set) or `sku,quantity_change` (add), optional `note`.
   * Answers what was imported (201), or for an import over the server's `IMPORT_JOB_ROWS` rows its
   * job (202, `status` `queued`): poll it with `importJob(id)` until `succeeded` or `failed`.
   */
  importCsv(csv: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'importStockCsv'>>> {
    return dataOf(this.call('importStockCsv', { body: csv }, options));
  }
  /** The store's import jobs, newest first (`status: 'waiting'`: the queued and running ones). */
  importJobs(query: Query<'listImportJobs'> = {}, options: AdminCallOptions = {}): Promise<WithResponse<Data<'listImportJobs'>>> {
    return dataOf(this.call('listImportJobs', { query }, options));
  }
  /** One import job: its status, `rows_done` of `rows_total`, its result or its errors. */
  importJob(jobId: string, options: AdminCallOptions = {}): Promise<WithResponse<Data<'getImportJob'>>> {
    return dataOf(this.call('getImportJob', byId(jobId), options));
  }
}

/** The audit log, newest first. */
export class AdminAuditLog {
  constructor(private readonly call: Call) {}
  /** One page. */
  list(query: Query<'listAuditLog'> = {}, options: AdminCallOptions = {}): Promise<WithResponse<AdminAnswer<'listAuditLog'>>> {
    return this.call('listAuditLog', { query }, options);
  }
  /** Every entry matching `query`, page after page (for await); `lastResponse` is the latest page's. */
  iterate(
    query: Query<'listAuditLog'> = {},
    options: AdminCallOptions = {},
  ): AsyncGenerator<AuditLogEntry> & { readonly lastResponse: ResponseMetadata | null } {
    return pages((q) => this.list(q, options), query);
  }
}
