/**
 * What the admin API does with webhooks, in domain terms: endpoints (validated URL, event-type
 * filter, secret and its rotation), pings, replays, manual retries, delivery lists and statistics.
 * Errors are ApiErrors (problem+json); SQL is in the repositories.
 */
import type { AppContext } from '../app-context.ts';
import { ApiError, conflict, invalidParameter, notFound } from '../shared/problem.ts';
import { formatCursor, parseCursor } from '../shared/cursor.ts';
import { appendEvent, appendTestEvent } from '../events/event-log.ts';
import { EVENT_TYPES, type EventType } from '../resources/event-types.ts';
import { runWrite } from '../db/write-clock.ts';
import { ownStoreIs } from '../db/store-scope.ts';
import { epochMicros, isoFromMillis, parseIsoTimestamp } from '../shared/time.ts';
import { oldestAvailable, oldestDeliveryAt } from '../retention/retention.repository.ts';
import {
  deleteEndpointCascade,
  findEndpoint,
  findEndpointSealedCredentials,
  findEndpointSecrets,
  findEndpointUrl,
  newEndpointId,
  insertEndpoint,
  listEndpointRows,
  rotateEndpointSecret,
  updateEndpoint,
  type EndpointView,
  type StoredCredentials,
  type WebhookEndpoint,
} from './webhook-endpoint.repository.ts';
import {
  applyCredentialsInput,
  credentialKeys,
  hasCredentials,
  NO_CREDENTIALS,
  openCredentials,
  sealCredentials,
  summarizeCredentials,
  type CredentialKeys,
  type CredentialsInput,
  type EndpointCredentials,
} from './endpoint-credentials.ts';
import {
  countReplayEvents,
  deliveryStats,
  endpointAttemptStats,
  type EndpointWindowStats,
  findDelivery,
  findEvent,
  insertDelivery,
  insertReplayDeliveries,
  listAttempts,
  listDeliveryRows,
  retryDeliveries,
  type DeliveryStats,
  type DeliveryStatus,
  type DeliveryEvent,
  type WebhookAttempt,
  type WebhookDelivery,
} from './webhook-delivery.repository.ts';
import { generateSecret } from './webhook-signing.ts';
import { DEFAULT_BATCH_SIZE } from './fifo-line.ts';
import type { DeliveryOrder } from './webhook.tables.ts';
import { validateWebhookUrl, WebhookUrlError } from './webhook-url-policy.ts';
import { announceDueDeliveries, announceEndpointChanged, announceEndpointReady } from './webhook-wakeup.ts';
import { redactDestinationUrl } from './webhook-destination.ts';

/** Event types an endpoint may subscribe to (ping is sent on demand, never by subscription). */
export const SUBSCRIBABLE_EVENT_TYPES = EVENT_TYPES.filter((t) => t !== 'ping');
/** How far back webhook history goes: the retention settings and what pruning has left. */
export interface RetentionView {
  delivery_retention_ms: number;
  dead_letter_retention_ms: number;
  event_retention_ms: number;
  /** Every delivery created since this instant is still there (null: nothing was pruned yet). */
  deliveries_complete_since: string | null;
  /** Every event created since this instant is still there: the oldest instant a replay or the events feed reaches. */
  events_complete_since: string | null;
  /** The oldest delivery kept (null: none). */
  oldest_delivery_at: string | null;
}

/** Most events one replay may queue (100 000); narrow the time range beyond that. */
export const MAX_REPLAY_EVENTS = 100_000;

export interface EndpointInput {
  url: string;
  event_types?: string[];
  description?: string | null;
  enabled?: boolean;
  credentials?: CredentialsInput;
  /** Default `unordered`; `fifo`: in the events' order, a batch at a time (decision 0059). */
  delivery_order?: DeliveryOrder;
  /** Most events in one FIFO batch, 1–500 (default 50). */
  batch_size?: number;
}

export type EndpointPatchInput = Partial<Omit<EndpointInput, 'credentials'>> & {
  /** Changes to the credentials (see CredentialsInput); null removes them all. */
  credentials?: CredentialsInput | null;
};

export interface SecretView {
  secret: string;
  previous_secret_expires_at: string | null;
}

/** The webhook admin operations bound to one process's context; `clock` gives epoch ms. */
export class WebhookService {
  private readonly keys: CredentialKeys | undefined;

  constructor(
    private readonly ctx: AppContext,
    private readonly clock: () => number = Date.now,
  ) {
    this.keys = credentialKeys(ctx.config.WEBHOOK_CREDENTIALS_KEY);
  }

  private get db() {
    return this.ctx.database.db;
  }

  private view(): EndpointView {
    return { now: this.clock(), breakerThreshold: this.ctx.config.WEBHOOK_BREAKER_THRESHOLD };
  }

  async listEndpoints(): Promise<WebhookEndpoint[]> {
    return listEndpointRows(this.db, this.view());
  }

  async getEndpoint(id: string): Promise<WebhookEndpoint> {
    const endpoint = await findEndpoint(this.db, id, this.view());
    if (!endpoint) throw notFound('webhook endpoint', id);
    return endpoint;
  }

  async createEndpoint(input: EndpointInput): Promise<WebhookEndpoint & { secret: string }> {
    const url = await this.checkUrl(input.url);
    // The store's endpoints only (its own filter and row-level security, decision 0051).
    const max = this.ctx.config.STORE_MAX_WEBHOOK_ENDPOINTS;
    const { count } = await this.db
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where(ownStoreIs('store_id'))
      .executeTakeFirstOrThrow();
    if (Number(count) >= max) {
      throw new ApiError(
        'store_limit_reached',
        `This store has ${count} webhook endpoints, its limit (STORE_MAX_WEBHOOK_ENDPOINTS = ${max}): delete one it no longer needs before registering another.`,
      );
    }
    const secret = generateSecret();
    const eventTypes = checkEventTypes(input.event_types);
    const endpointId = newEndpointId();
    const credentials =
      input.credentials === undefined
        ? null
        : this.storedCredentials(endpointId, await applyCredentialsInput(url, NO_CREDENTIALS, input.credentials, this.ctx.config.WEBHOOK_ALLOW_PRIVATE_URLS));
    const id = await runWrite(this.db, (write) =>
      insertEndpoint(write, {
        id: endpointId,
        url,
        credentials,
        description: input.description ?? null,
        eventTypes,
        enabled: input.enabled ?? true,
        deliveryOrder: input.delivery_order ?? 'unordered',
        batchSize: input.batch_size ?? DEFAULT_BATCH_SIZE,
        secret,
      }),
    );
    const created = await this.getEndpoint(id);
    if (created.enabled) announceEndpointReady(created.url);
    return { ...created, secret };
  }

  async updateEndpoint(id: string, patch: EndpointPatchInput): Promise<WebhookEndpoint> {
    const url = patch.url === undefined || (await this.isShownUrl(id, patch.url)) ? undefined : await this.checkUrl(patch.url);
    const credentials = await this.changedCredentials(id, url, patch.credentials);
    const updated = await updateEndpoint(
      this.db,
      id,
      {
        url,
        description: patch.description,
        eventTypes: patch.event_types === undefined ? undefined : checkEventTypes(patch.event_types),
        enabled: patch.enabled,
        credentials,
        deliveryOrder: patch.delivery_order,
        batchSize: patch.batch_size,
      },
      isoFromMillis(this.clock()),
    );
    if (!updated) throw notFound('webhook endpoint', id);
    if (url !== undefined || credentials !== undefined || patch.enabled === false) announceEndpointChanged(id);
    if (patch.enabled === true) await announceDueDeliveries(this.db, this.ctx.database.backend);
    const endpoint = await this.getEndpoint(id);
    if (endpoint.enabled && (url !== undefined || patch.enabled === true)) announceEndpointReady(endpoint.url);
    return endpoint;
  }

  /**
   * The credentials endpoint `id` has after `input` (undefined: unchanged), checked against its URL
   * after the patch (`url`: the new one, if it changes): a URL moving to a broker cannot keep extra
   * headers, nor one leaving TLS a client certificate. Throws 404 for an unknown endpoint.
   */
  private async changedCredentials(
    id: string,
    url: string | undefined,
    input: CredentialsInput | null | undefined,
  ): Promise<StoredCredentials | null | undefined> {
    if (input === undefined && url === undefined) return undefined;
    const sealed = await findEndpointSealedCredentials(this.db, id);
    if (sealed === undefined) throw notFound('webhook endpoint', id);
    if (input === null) return null;
    if (input === undefined && sealed === null) return undefined;
    let current: EndpointCredentials = NO_CREDENTIALS;
    if (sealed !== null) {
      try {
        current = openCredentials(this.keys, id, sealed);
      } catch (error) {
        throw new ApiError(
          'conflict',
          `The endpoint's stored credentials cannot be opened (${(error as Error).message}); replace them with credentials: null first.`,
          [{ param: 'credentials', message: 'stored credentials cannot be opened' }],
        );
      }
    }
    const finalUrl = url ?? (await findEndpointUrl(this.db, id))!;
    const next = await applyCredentialsInput(finalUrl, current, input, this.ctx.config.WEBHOOK_ALLOW_PRIVATE_URLS);
    return input === undefined ? undefined : this.storedCredentials(id, next);
  }

  /** `credentials` as stored for endpoint `id`: sealed under WEBHOOK_CREDENTIALS_KEY (409 without it); null when empty. */
  private storedCredentials(id: string, credentials: EndpointCredentials): StoredCredentials | null {
    if (!hasCredentials(credentials)) return null;
    if (!this.keys) {
      throw new ApiError('conflict', 'Endpoint credentials are sealed at rest with WEBHOOK_CREDENTIALS_KEY, which this server does not have: set it first.', [
        { param: 'credentials', message: 'needs WEBHOOK_CREDENTIALS_KEY on the server' },
      ]);
    }
    return { summary: summarizeCredentials(credentials)!, sealed: sealCredentials(this.keys, id, credentials) };
  }

  /**
   * True when `url` is the endpoint's URL as the API shows it (a broker URL with its password as
   * `****`): an edit form sent back unchanged keeps the stored URL, password included.
   */
  private async isShownUrl(id: string, url: string): Promise<boolean> {
    const stored = await findEndpointUrl(this.db, id);
    return stored !== undefined && stored !== url && redactDestinationUrl(stored) === url;
  }

  async getSecret(id: string): Promise<SecretView> {
    const secrets = await findEndpointSecrets(this.db, id);
    if (!secrets) throw notFound('webhook endpoint', id);
    const overlapActive = secrets.previous_secret_expires_at !== null && Date.parse(secrets.previous_secret_expires_at) > this.clock();
    return { secret: secrets.secret, previous_secret_expires_at: overlapActive ? secrets.previous_secret_expires_at : null };
  }

  /** A new secret; the old one keeps signing (second signature) for WEBHOOK_SECRET_OVERLAP_MS. */
  async rotateSecret(id: string): Promise<SecretView> {
    const now = this.clock();
    const expires = isoFromMillis(now + this.ctx.config.WEBHOOK_SECRET_OVERLAP_MS);
    const rotated = await rotateEndpointSecret(this.db, id, generateSecret(), expires, isoFromMillis(now));
    if (!rotated) throw notFound('webhook endpoint', id);
    return this.getSecret(id);
  }

  /** Appends a `ping` event and queues its delivery to this endpoint only. */
  async ping(id: string): Promise<{ event_id: string; delivery_id: string }> {
    const endpoint = await this.getEndpoint(id);
    if (!endpoint.enabled) throw conflict('The endpoint is disabled; enable it before sending a ping.');
    const nowIso = isoFromMillis(this.clock());
    const result = await runWrite(this.db, async (write) => {
      const eventId = await appendEvent(write, 'ping', id, { endpoint_id: id, message: 'Test event sent on demand from the admin API' });
      const deliveryId = await insertDelivery(write.trx, eventId, 'ping', id, nowIso);
      return { event_id: eventId, delivery_id: deliveryId };
    });
    await announceDueDeliveries(this.db, this.ctx.database.backend);
    return result;
  }

  /**
   * Sends an example event of `type` to this endpoint only, as a test (decision 0020): appended to
   * the log marked `test` (never in the feed, fan-out or replays) and queued as a test delivery,
   * signed like any. `data` is the catalog's example payload (the caller, above this layer, has it),
   * `previous` its example of what changed, for an `*.updated` type (decision 0057).
   */
  async sendTestEvent(id: string, type: string, data: unknown, previous?: unknown): Promise<{ event_id: string; delivery_id: string; type: string }> {
    if (!(SUBSCRIBABLE_EVENT_TYPES as readonly string[]).includes(type)) {
      throw invalidParameter('type', `unknown event type '${type}'; must be one of ${SUBSCRIBABLE_EVENT_TYPES.join(', ')}`);
    }
    const endpoint = await this.getEndpoint(id);
    if (!endpoint.enabled) throw conflict('The endpoint is disabled; enable it before sending a test event.');
    const nowIso = isoFromMillis(this.clock());
    const resourceId = typeof (data as { id?: unknown })?.id === 'string' ? (data as { id: string }).id : id;
    const result = await runWrite(this.db, async (write) => {
      const eventId = await appendTestEvent(write, type as EventType, resourceId, data, previous);
      const deliveryId = await insertDelivery(write.trx, eventId, type, id, nowIso, true);
      return { event_id: eventId, delivery_id: deliveryId, type };
    });
    await announceDueDeliveries(this.db, this.ctx.database.backend);
    return result;
  }

  /**
   * Deletes an endpoint, its queued deliveries (never sent) and its delivery history (decision
   * 0020). Returns what was deleted, for the audit log; an unknown (or already deleted) id is 404.
   */
  async deleteEndpoint(id: string): Promise<{ id: string; url: string; deliveries_deleted: Record<string, number> }> {
    const endpoint = await this.getEndpoint(id);
    const deleted = await deleteEndpointCascade(this.db, id);
    if (!deleted) throw notFound('webhook endpoint', id);
    announceEndpointChanged(id);
    return { id, url: endpoint.url, deliveries_deleted: deleted };
  }

  /**
   * Queues again every subscribed event of [from, to) to this endpoint (with `failedOnly`, only
   * those that never got through: decision 0021). `dryRun` counts what would be queued and changes
   * nothing.
   */
  async replay(
    id: string,
    from: string,
    to: string,
    { failedOnly = false, dryRun = false }: { failedOnly?: boolean; dryRun?: boolean } = {},
  ): Promise<{ queued: number }> {
    await this.getEndpoint(id);
    const fromIso = parseIsoTimestamp(from);
    const toIso = parseIsoTimestamp(to);
    if (!fromIso) throw invalidParameter('from', 'must be an ISO 8601 date or timestamp (years 0001–9999)');
    if (!toIso) throw invalidParameter('to', 'must be an ISO 8601 date or timestamp (years 0001–9999)');
    if (Date.parse(toIso) <= Date.parse(fromIso)) throw invalidParameter('to', 'must be after from');
    const oldest = await oldestAvailable(this.db, 'events');
    if (oldest && epochMicros(fromIso)! < epochMicros(oldest)!) {
      throw invalidParameter(
        'from',
        `reaches behind the retention of the event log (EVENT_RETENTION_MS): events before ${oldest} have been pruned; the oldest available instant is ${oldest}`,
      );
    }
    const count = await countReplayEvents(this.db, id, fromIso, toIso, MAX_REPLAY_EVENTS, failedOnly);
    if (count > MAX_REPLAY_EVENTS) {
      throw invalidParameter('to', `the range holds more than ${MAX_REPLAY_EVENTS} events; replay it in smaller ranges`);
    }
    if (dryRun) return { queued: count };
    const queued = count === 0 ? 0 : await insertReplayDeliveries(this.db, id, fromIso, toIso, isoFromMillis(this.clock()), failedOnly);
    if (queued > 0) await announceDueDeliveries(this.db, this.ctx.database.backend);
    return { queued };
  }

  async listDeliveries(query: {
    endpoint_id?: string;
    status?: DeliveryStatus;
    id?: string;
    event_type?: string;
    from?: string;
    to?: string;
    limit: number;
    cursor?: string;
  }): Promise<{
    data: WebhookDelivery[];
    pagination: { next_cursor: string | null; has_more: boolean; limit: number };
  }> {
    const fromIso = query.from === undefined ? undefined : parseIsoTimestamp(query.from);
    const toIso = query.to === undefined ? undefined : parseIsoTimestamp(query.to);
    if (query.from !== undefined && !fromIso) throw invalidParameter('from', 'must be an ISO 8601 date or timestamp (years 0001–9999)');
    if (query.to !== undefined && !toIso) throw invalidParameter('to', 'must be an ISO 8601 date or timestamp (years 0001–9999)');
    if (fromIso && toIso && epochMicros(toIso)! <= epochMicros(fromIso)!) throw invalidParameter('to', 'must be after from');
    const before = query.cursor ? parseCursor(query.cursor) : undefined;
    const rows = await listDeliveryRows(this.db, {
      endpointId: query.endpoint_id,
      status: query.status,
      id: query.id,
      eventType: query.event_type,
      fromIso,
      toIso,
      limit: query.limit,
      before,
    });
    const hasMore = rows.length > query.limit;
    const data = rows.slice(0, query.limit);
    const last = data[data.length - 1];
    return {
      data,
      pagination: { next_cursor: last ? formatCursor(last.created_at, last.id) : (query.cursor ?? null), has_more: hasMore, limit: query.limit },
    };
  }

  async getDelivery(id: string): Promise<WebhookDelivery & { attempts: WebhookAttempt[]; event: DeliveryEvent }> {
    const delivery = await findDelivery(this.db, id);
    if (!delivery) throw notFound('webhook delivery', id);
    const [attempts, event] = await Promise.all([listAttempts(this.db, id), findEvent(this.db, delivery.event_id)]);
    return { ...delivery, attempts, event: event! };
  }

  /** Success rate and latency of one endpoint's attempts over the last 24 hours and 7 days (decision 0021). */
  async endpointStats(id: string): Promise<{ as_of: string; last_24h: EndpointWindowStats; last_7d: EndpointWindowStats }> {
    await this.getEndpoint(id);
    const now = this.clock();
    const nowIso = isoFromMillis(now);
    const windows = { last_24h: isoFromMillis(now - 86_400_000), last_7d: isoFromMillis(now - 7 * 86_400_000) };
    return { as_of: nowIso, ...(await endpointAttemptStats(this.db, id, windows, nowIso)) };
  }

  /** Makes one dead or failed delivery due now. */
  async retryDelivery(id: string): Promise<WebhookDelivery> {
    const delivery = await findDelivery(this.db, id);
    if (!delivery) throw notFound('webhook delivery', id);
    const retried = await retryDeliveries(this.db, { ids: [id] }, isoFromMillis(this.clock()));
    if (retried.length === 0) throw conflict(`Only dead or failed deliveries can be retried; this one is ${delivery.status}.`);
    // Read back before the workers are told: the answer is the delivery as made due (a worker
    // woken first could otherwise have sent and settled it already).
    const due = (await findDelivery(this.db, id))!;
    await announceDueDeliveries(this.db, this.ctx.database.backend);
    return due;
  }

  /** Retries a selection, or every dead letter of one endpoint; returns how many became due. */
  async retryMany(target: { delivery_ids: string[] } | { endpoint_id: string }): Promise<{ retried: number }> {
    if ('endpoint_id' in target) await this.getEndpoint(target.endpoint_id);
    const retried = await retryDeliveries(
      this.db,
      'delivery_ids' in target ? { ids: target.delivery_ids } : { deadOfEndpoint: target.endpoint_id },
      isoFromMillis(this.clock()),
    );
    if (retried.length > 0) await announceDueDeliveries(this.db, this.ctx.database.backend);
    return { retried: retried.length };
  }

  /** Delivery activity, current totals and how far back the history goes (retention). */
  async stats(hours: number): Promise<DeliveryStats & { retention: RetentionView }> {
    const [stats, deliveriesSince, eventsSince, oldestDelivery] = await Promise.all([
      deliveryStats(this.db, hours, isoFromMillis(this.clock())),
      oldestAvailable(this.db, 'webhook_deliveries'),
      oldestAvailable(this.db, 'events'),
      oldestDeliveryAt(this.db),
    ]);
    const { config } = this.ctx;
    return {
      ...stats,
      retention: {
        delivery_retention_ms: config.WEBHOOK_DELIVERY_RETENTION_MS,
        dead_letter_retention_ms: config.WEBHOOK_DEAD_LETTER_RETENTION_MS,
        event_retention_ms: config.EVENT_RETENTION_MS,
        deliveries_complete_since: deliveriesSince ?? null,
        events_complete_since: eventsSince ?? null,
        oldest_delivery_at: oldestDelivery ?? null,
      },
    };
  }

  private async checkUrl(url: string): Promise<string> {
    try {
      return await validateWebhookUrl(url, this.ctx.config.WEBHOOK_ALLOW_PRIVATE_URLS);
    } catch (error) {
      if (error instanceof WebhookUrlError) throw invalidParameter('url', error.message);
      throw error;
    }
  }
}

function checkEventTypes(types: string[] | undefined): string[] {
  const list = [...new Set(types ?? [])];
  const unknown = list.filter((t) => !(SUBSCRIBABLE_EVENT_TYPES as readonly string[]).includes(t));
  if (unknown.length > 0) {
    throw new ApiError('invalid_parameter', `Unknown event type(s): ${unknown.join(', ')}.`, [
      { param: 'event_types', message: `must be among ${SUBSCRIBABLE_EVENT_TYPES.join(', ')}` },
    ]);
  }
  return list;
}
