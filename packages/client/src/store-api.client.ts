/**
 * StoreApiClient: one method per read endpoint of the Store Integration API, async iterators over
 * every page of a list and every line of an export, each exposing the cursor to persist.
 */
import { StoreApiError } from './store-api.error.ts';
import { TruncatedBodyError, lines } from './ndjson-lines.ts';
import { networkError, requestWithRetries, type Answer, type RetryInfo, type RetryPolicy } from './http-transport.ts';
import { AdminClient } from './admin.client.ts';
import type {
  Attribute,
  AttributeListQuery,
  Customer,
  CustomerExportQuery,
  CustomerListQuery,
  InventoryExportQuery,
  InventoryListQuery,
  InventoryRecord,
  Order,
  OrderExportQuery,
  OrderListQuery,
  Page,
  Product,
  ProductExportQuery,
  ProductListQuery,
  StockMovement,
  StockMovementExportQuery,
  StockMovementListQuery,
  StoreEvent,
  EventListQuery,
  EventExportQuery,
} from './resource-types.ts';

/** Options of `new StoreApiClient(...)`. */
export interface StoreApiClientOptions {
  /** Base URL of the service, e.g. `http://127.0.0.1:3000` (a path prefix is kept: `https://host/store`). */
  baseUrl: string;
  /** API token `sia_…` with the read scopes of the resources you call. */
  token: string;
  /**
   * Longest wait for an answer's headers (and a JSON body), per attempt, in ms (default 30 000; 0 = none).
   * A call to a hung service fails with code `timeout` after this long.
   */
  timeoutMs?: number;
  /** Longest silence inside an export stream before it is abandoned, in ms (default 60 000; 0 = none). */
  idleTimeoutMs?: number;
  /** Retries after a timeout (default 0: a timeout fails the call; an export resumes from its cursor). */
  maxTimeoutRetries?: number;
  /** Retries of one request after a 429, a 5xx or a network error (default 5; 0 disables). Only safe requests are retried. */
  maxRetries?: number;
  /** First backoff step in ms (default 500); doubles per retry, with jitter. */
  retryBaseDelayMs?: number;
  /** Longest backoff step in ms (default 30 000). */
  retryMaxDelayMs?: number;
  /** A 429 whose Retry-After asks for longer than this (ms, default 120 000) fails instead of waiting. */
  maxRetryAfterMs?: number;
  /** Called before each retry (for logs and metrics). */
  onRetry?: (info: RetryInfo) => void;
  /** fetch implementation (default: the global fetch). */
  fetch?: typeof fetch;
  /** User-Agent header (default `store-api-client/<version>`). */
  userAgent?: string;
}

/** Options of an iterator. */
export interface IterateOptions {
  /**
   * Called when every record of a page has been consumed, with the cursor to resume after it; await
   * it to persist the cursor before the next page is fetched.
   */
  onPage?: (page: PageProgress) => void | Promise<void>;
  /** Aborts the iteration (and the request in flight). */
  signal?: AbortSignal;
}

/** What `onPage` receives. */
export interface PageProgress {
  /** Cursor after this page: pass it as `cursor` to resume. */
  cursor: string | null;
  /** Records in this page. */
  count: number;
  /** Whether more pages follow. */
  hasMore: boolean;
}

/**
 * An async iterable over records that keeps `cursor`: after the consumer has taken a record and asked
 * for the next one, `cursor` resumes right after it, so persisting `cursor` at any point never skips a
 * record that was not processed (at most the one in hand is seen again).
 */
export class RecordIterator<T> implements AsyncIterable<T> {
  /** Cursor to resume after the last record consumed (the starting cursor until then; null if none). */
  cursor: string | null;
  /** Records consumed so far. */
  count = 0;
  /** Pages (list pages or export requests) fetched so far. */
  pages = 0;
  /**
   * At most how many records the whole walk holds, when the server says so before sending them (a
   * snapshot's X-Total-Count, counted at its start: a record changed meanwhile comes after the
   * cursor instead, so the walk may see fewer); null until the first request answers, and for lists
   * and exports, which do not announce their size.
   */
  total: number | null = null;
  readonly #source: (self: RecordIterator<T>) => AsyncGenerator<T>;
  #started = false;

  constructor(start: string | undefined, source: (self: RecordIterator<T>) => AsyncGenerator<T>) {
    this.cursor = start ?? null;
    this.#source = source;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.#started) throw new Error('This iterator has already been iterated; call iterate()/export() again for a new walk');
    this.#started = true;
    return this.#source(this);
  }

  /**
   * Collects every record into an array (for small resources and tests; prefer for await). Fails with
   * code `too_many_records` past `max` records (default 10 000), before holding more in memory.
   */
  async toArray({ max = DEFAULT_TO_ARRAY_MAX }: { max?: number } = {}): Promise<T[]> {
    if (!Number.isInteger(max) || max < 0) throw new TypeError(`max must be a non-negative integer, got ${max}`);
    const all: T[] = [];
    for await (const record of this) {
      if (all.length === max) {
        throw new StoreApiError(`toArray() stopped at its cap of ${max} records; iterate with for await, or pass a larger { max }`, {
          code: 'too_many_records',
          request: 'toArray',
        });
      }
      all.push(record);
    }
    return all;
  }
}

/** Default cap of RecordIterator.toArray(). */
export const DEFAULT_TO_ARRAY_MAX = 10_000;

/** What a cursor is built from: the list's sort key (last_modified, or created_at for events) and id. */
export interface Cursored {
  last_modified?: string;
  created_at?: string;
  id?: string;
  product_id?: string;
}

/**
 * The cursor that resumes right after `record`, built as the API builds next_cursor: the record's
 * sort timestamp (last_modified; created_at for events), `_`, its id (product_id for inventory).
 */
export function cursorAfter(record: Cursored): string {
  return `${record.last_modified ?? record.created_at}_${record.id ?? record.product_id}`;
}

type QueryValue = string | number | boolean | undefined | null;
type Query = Record<string, QueryValue | readonly QueryValue[]>;

/** The list, iterate and export calls of one resource. */
export class ResourceClient<T extends Cursored, LQ extends Query, EQ extends Query> {
  constructor(
    protected readonly client: StoreApiClient,
    protected readonly path: string,
  ) {}

  /** One page: GET /api/v1/{resource}. */
  async list(query: LQ = {} as LQ, options: { signal?: AbortSignal } = {}): Promise<Page<T>> {
    const page = await this.client.getJson<Page<T>>(this.path, query, options.signal);
    if (!Array.isArray(page?.data) || typeof page.pagination?.has_more !== 'boolean') {
      throw this.client.notStoreApi(this.path, query, 'a list without data and pagination');
    }
    return page;
  }

  /** Every record of every page from `query.cursor` on (or the start), fetching pages as consumed. */
  iterate(query: LQ = {} as LQ, options: IterateOptions = {}): RecordIterator<T> {
    return new RecordIterator<T>(query.cursor as string | undefined, (self) => this.#walkPages(self, query, options));
  }

  async *#walkPages(self: RecordIterator<T>, query: LQ, options: IterateOptions): AsyncGenerator<T> {
    let cursor = query.cursor as string | undefined;
    while (true) {
      const page = await this.list({ ...query, cursor } as LQ, { signal: options.signal });
      self.pages++;
      for (const record of page.data) {
        yield record;
        self.count++;
        self.cursor = cursorAfter(record);
      }
      self.cursor = page.pagination.next_cursor ?? self.cursor;
      await options.onPage?.({ cursor: self.cursor, count: page.data.length, hasMore: page.pagination.has_more });
      // An empty page with has_more would never advance; the API never sends one, but never loop on it.
      if (!page.pagination.has_more || page.data.length === 0) return;
      cursor = self.cursor ?? undefined;
    }
  }

  /**
   * Every record of GET /api/v1/{resource}/export, request after request (up to `limit`, default 500,
   * each), NDJSON parsed line by line as it arrives. A connection lost mid-stream resumes from the
   * last record consumed (counted as a retry).
   */
  export(query: EQ = {} as EQ, options: IterateOptions = {}): RecordIterator<T> {
    return new RecordIterator<T>(query.cursor as string | undefined, (self) => this.#walkExport(self, query, options));
  }

  async *#walkExport(self: RecordIterator<T>, query: EQ, options: IterateOptions): AsyncGenerator<T> {
    const exportPath = `${this.path}/export`;
    let failures = 0;
    while (true) {
      const cursor = self.cursor ?? undefined;
      const { response, timer } = await this.client.getAnswer(exportPath, { ...query, cursor }, 'application/x-ndjson', options.signal);
      const url = response.url ? new URL(response.url) : this.client.urlOf(exportPath, { ...query, cursor });
      const hasMore = response.headers.get('x-has-more');
      const nextCursor = response.headers.get('x-next-cursor');
      if (hasMore !== 'true' && hasMore !== 'false') {
        timer.clear();
        await response.body?.cancel().catch(() => {});
        throw new StoreApiError(
          `${url.origin} did not answer like the Store Integration API (no X-Has-More header on GET ${url.pathname}); check the base URL`,
          { status: response.status, code: 'not_store_api', request: `GET ${url.pathname}${url.search}` },
        );
      }
      self.pages++;
      let count = 0;
      const idle = this.client.timeouts.idleTimeoutMs;
      timer.arm(idle, 'idle');
      try {
        if (response.body) {
          for await (const line of lines(response.body, timer.signal)) {
            timer.arm(idle, 'idle');
            let record: T;
            try {
              record = JSON.parse(line) as T;
            } catch (cause) {
              throw new StoreApiError(`${url.origin} sent a line that is not JSON in the export of ${this.path}`, {
                status: response.status,
                code: 'not_store_api',
                request: `GET ${url.pathname}${url.search}`,
                cause,
              });
            }
            yield record;
            count++;
            self.count++;
            self.cursor = cursorAfter(record);
            failures = 0;
          }
        }
      } catch (error) {
        timer.clear();
        if (error instanceof StoreApiError) throw error;
        const failure =
          error instanceof TruncatedBodyError
            ? new StoreApiError(`The export of ${this.path} from ${url.origin} broke off in the middle of a line (connection lost)`, {
                status: response.status,
                code: 'network_error',
                request: `GET ${url.pathname}${url.search}`,
                cause: error,
              })
            : networkError(error, url, options.signal, 'GET', timer);
        const limit = failure.code === 'timeout' ? (this.client.retryPolicy.maxTimeoutRetries ?? 0) : this.client.retryPolicy.maxRetries;
        if (failure.code === 'aborted' || ++failures > limit) throw failure;
        // Resume from the last record consumed: nothing is skipped, nothing repeated.
        this.client.retryPolicy.onRetry?.({ attempt: failures, delayMs: 0, status: undefined, error: failure });
        continue;
      } finally {
        timer.clear();
      }
      if (nextCursor && nextCursor !== self.cursor) {
        // The body ended cleanly between two lines but before the page's last record (a proxy
        // closing early): going on from X-Next-Cursor would skip records, so resume from the last one.
        const failure = new StoreApiError(
          `The export of ${this.path} from ${url.origin} ended after ${count} records, before the page's last one (connection lost)`,
          { status: response.status, code: 'network_error', request: `GET ${url.pathname}${url.search}` },
        );
        if (++failures > this.client.retryPolicy.maxRetries) throw failure;
        this.client.retryPolicy.onRetry?.({ attempt: failures, delayMs: 0, status: undefined, error: failure });
        continue;
      }
      await options.onPage?.({ cursor: self.cursor, count, hasMore: hasMore === 'true' });
      if (hasMore !== 'true' || count === 0) return;
    }
  }

  /**
   * Count and checksum of the records per id range, `digits` (1–3, default 2) hex digits past
   * `prefix` (default every record): GET /api/v1/{resource}/checksums. Filters as in the list.
   */
  async checksums(query: { prefix?: string; digits?: number } & Query = {}, options: { signal?: AbortSignal } = {}): Promise<RangeChecksum[]> {
    const path = `${this.path}/checksums`;
    const body = await this.client.getJson<{ data: RangeChecksum[] }>(path, query, options.signal);
    if (!Array.isArray(body?.data)) throw this.client.notStoreApi(path, query, 'an answer without data');
    return body.data;
  }

  /** Every record's checksum in the range `prefix`, by id, request after request (GET /api/v1/{resource}/checksums/records). */
  async *recordChecksums(query: { prefix?: string; limit?: number } & Query = {}, options: { signal?: AbortSignal } = {}): AsyncGenerator<RecordChecksum> {
    const path = `${this.path}/checksums/records`;
    let after: string | undefined;
    for (;;) {
      const page = await this.client.getJson<{ data: RecordChecksum[]; pagination: { next_cursor: string | null; has_more: boolean } }>(
        path,
        { ...query, after },
        options.signal,
      );
      if (!Array.isArray(page?.data) || typeof page.pagination?.has_more !== 'boolean') throw this.client.notStoreApi(path, query, 'a page without data and pagination');
      yield* page.data;
      if (!page.pagination.has_more || page.data.length === 0 || page.pagination.next_cursor === null) return;
      after = page.pagination.next_cursor;
    }
  }

  /**
   * Every record of GET /api/v1/{resource}/snapshot: the whole resource in one NDJSON stream (no page
   * limit, one request against the export rate limit), parsed line by line as it arrives. When the
   * stream ends, `cursor` is the server's X-Snapshot-Cursor: continue from it with lists, exports or
   * webhooks and nothing changed meanwhile is missed. A connection lost mid-stream resumes from the
   * last record consumed (counted as a retry). A server without snapshots answers 404 (or, where the
   * path looks like a single GET, 400 naming `id`): see `isSnapshotUnsupported`.
   */
  snapshot(query: Omit<EQ, 'limit' | 'order'> = {} as Omit<EQ, 'limit' | 'order'>, options: IterateOptions = {}): RecordIterator<T> {
    return new RecordIterator<T>(query.cursor as string | undefined, (self) => this.#walkSnapshot(self, query as Query, options));
  }

  async *#walkSnapshot(self: RecordIterator<T>, query: Query, options: IterateOptions): AsyncGenerator<T> {
    const snapshotPath = `${this.path}/snapshot`;
    let failures = 0;
    while (true) {
      const cursor = self.cursor ?? undefined;
      const response = await this.client.getResponse(snapshotPath, { ...query, cursor }, 'application/x-ndjson', options.signal);
      const url = response.url ? new URL(response.url) : this.client.urlOf(snapshotPath, { ...query, cursor });
      const endCursor = response.headers.get('x-snapshot-cursor');
      if (!endCursor) {
        await response.body?.cancel().catch(() => {});
        throw new StoreApiError(
          `${url.origin} did not answer like the Store Integration API (no X-Snapshot-Cursor header on GET ${url.pathname}); check the base URL`,
          { status: response.status, code: 'not_store_api', request: `GET ${url.pathname}${url.search}` },
        );
      }
      self.pages++;
      const announced = Number.parseInt(response.headers.get('x-total-count') ?? '', 10);
      // A resumed stream counts what is left after its cursor: add what was consumed before it.
      if (Number.isSafeInteger(announced) && announced >= 0) self.total = self.count + announced;
      let count = 0;
      try {
        if (response.body) {
          for await (const line of lines(response.body, options.signal)) {
            let record: T;
            try {
              record = JSON.parse(line) as T;
            } catch (cause) {
              throw new StoreApiError(`${url.origin} sent a line that is not JSON in the snapshot of ${this.path}`, {
                status: response.status,
                code: 'not_store_api',
                request: `GET ${url.pathname}${url.search}`,
                cause,
              });
            }
            yield record;
            count++;
            self.count++;
            self.cursor = cursorAfter(record);
            failures = 0;
          }
        }
      } catch (error) {
        if (error instanceof StoreApiError) throw error;
        const failure =
          error instanceof TruncatedBodyError
            ? new StoreApiError(`The snapshot of ${this.path} from ${url.origin} broke off in the middle of a line (connection lost)`, {
                status: response.status,
                code: 'network_error',
                request: `GET ${url.pathname}${url.search}`,
                cause: error,
              })
            : networkError(error, url, options.signal);
        if (failure.code === 'aborted' || ++failures > this.client.retryPolicy.maxRetries) throw failure;
        this.client.retryPolicy.onRetry?.({ attempt: failures, delayMs: 0, status: undefined, error: failure });
        continue;
      }
      self.cursor = endCursor;
      await options.onPage?.({ cursor: self.cursor, count, hasMore: false });
      return;
    }
  }
}

/** A range's record count and checksum (GET /api/v1/{resource}/checksums). */
export interface RangeChecksum {
  range: string;
  count: number;
  checksum: string;
}

/** One record's checksum (GET /api/v1/{resource}/checksums/records). */
export interface RecordChecksum {
  id: string;
  last_modified: string;
  checksum: string;
}

/** Whether `error` (from `snapshot()`'s first request) says the server has no snapshot endpoint: use `export()` instead. */
export function isSnapshotUnsupported(error: unknown): boolean {
  return isEndpointUnsupported(error);
}

/** Whether `error` (from `checksums()`) says the server has no checksum endpoints: compare the records themselves. */
export function isChecksumsUnsupported(error: unknown): boolean {
  return isEndpointUnsupported(error);
}

function isEndpointUnsupported(error: unknown): boolean {
  if (!(error instanceof StoreApiError)) return false;
  if (error.status === 404 || error.status === 405) return true;
  // An older server routes /{resource}/snapshot (or /checksums) to the single GET /{resource}/{id}.
  return error.status === 400 && error.errors.some((e) => e.param === 'id');
}

/** A resource that also has GET /api/v1/{resource}/{id}. */
export class ResourceWithGet<T extends Cursored, LQ extends Query, EQ extends Query> extends ResourceClient<T, LQ, EQ> {
  /** One record by id; a StoreApiError with status 404 when there is none. */
  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<T> {
    const path = `${this.path}/${encodeURIComponent(id)}`;
    const body = await this.client.getJson<{ data: T }>(path, {}, options.signal);
    if (typeof body?.data !== 'object' || body.data === null) throw this.client.notStoreApi(path, {}, 'a body without data');
    return body.data;
  }
}

/** The package's version (kept equal to package.json's by a test). */
export const VERSION = '0.2.0';

/** Typed client of the Store Integration API's read endpoints (see the package README). */
export class StoreApiClient {
  /** Products: list, get, iterate, export. */
  readonly products: ResourceWithGet<Product, ProductListQuery, ProductExportQuery>;
  /** Orders: list, get, iterate, export. */
  readonly orders: ResourceWithGet<Order, OrderListQuery, OrderExportQuery>;
  /** Customers: list, get, iterate, export. */
  readonly customers: ResourceWithGet<Customer, CustomerListQuery, CustomerExportQuery>;
  /** Inventory records (stock per product): list, iterate, export. */
  readonly inventory: ResourceClient<InventoryRecord, InventoryListQuery, InventoryExportQuery>;
  /** Stock movements: list, iterate, export. */
  readonly movements: ResourceClient<StockMovement, StockMovementListQuery, StockMovementExportQuery>;
  /** The events feed (the log of changes within its retention, as webhooks POST them): list, iterate, export. */
  readonly events: ResourceClient<StoreEvent, EventListQuery, EventExportQuery>;
  /** The admin API (admin-scoped token): tokens, webhook endpoints, deliveries, retries, replays. */
  readonly admin: AdminClient;
  /** The retry settings in effect. */
  readonly retryPolicy: Readonly<RetryPolicy>;
  /** The timeouts in effect (ms; 0 = none). */
  readonly timeouts: Readonly<{ timeoutMs: number; idleTimeoutMs: number }>;

  readonly #base: URL;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;

  constructor(options: StoreApiClientOptions) {
    let base: URL;
    try {
      base = new URL(options.baseUrl);
    } catch {
      throw new TypeError(`baseUrl must be an absolute http(s) URL such as http://127.0.0.1:3000, got ${JSON.stringify(options.baseUrl)}`);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new TypeError(`baseUrl must use http or https, got ${JSON.stringify(options.baseUrl)}`);
    if (typeof options.token !== 'string' || options.token.trim() === '') throw new TypeError('token is required: an API token sia_… with read scopes');
    const count = (name: string, value: number | undefined, fallback: number) => {
      if (value === undefined) return fallback;
      if (!Number.isInteger(value) || value < 0) throw new TypeError(`${name} must be a non-negative integer, got ${value}`);
      return value;
    };
    base.pathname = base.pathname.endsWith('/') ? base.pathname : `${base.pathname}/`;
    base.search = '';
    base.hash = '';
    this.#base = base;
    this.retryPolicy = Object.freeze({
      maxRetries: count('maxRetries', options.maxRetries, 5),
      retryBaseDelayMs: count('retryBaseDelayMs', options.retryBaseDelayMs, 500),
      retryMaxDelayMs: count('retryMaxDelayMs', options.retryMaxDelayMs, 30_000),
      maxRetryAfterMs: count('maxRetryAfterMs', options.maxRetryAfterMs, 120_000),
      maxTimeoutRetries: count('maxTimeoutRetries', options.maxTimeoutRetries, 0),
      onRetry: options.onRetry,
    });
    this.timeouts = Object.freeze({
      timeoutMs: count('timeoutMs', options.timeoutMs, 30_000),
      idleTimeoutMs: count('idleTimeoutMs', options.idleTimeoutMs, 60_000),
    });
    this.#headers = {
      authorization: `Bearer ${options.token.trim()}`,
      'user-agent': options.userAgent ?? `store-api-client/${VERSION}`,
    };
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.products = new ResourceWithGet(this, 'products');
    this.orders = new ResourceWithGet(this, 'orders');
    this.customers = new ResourceWithGet(this, 'customers');
    this.inventory = new ResourceClient(this, 'inventory');
    this.movements = new ResourceClient(this, 'inventory/movements');
    this.events = new ResourceClient(this, 'events');
    this.admin = new AdminClient(this);
  }

  /** Absolute URL of /api/v1/{path} (or, with prefix, /{prefix}{path}) with `query` (undefined and null values left out). */
  urlOf(path: string, query: Query = {}, prefix = 'api/v1/'): URL {
    const url = new URL(`${prefix}${path}`, this.#base);
    for (const [key, value] of Object.entries(query)) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (item !== undefined && item !== null) url.searchParams.append(key, String(item));
      }
    }
    return url;
  }

  /** The error for a 2xx answer of the wrong shape: something else answers at the base URL. */
  notStoreApi(path: string, query: Query, what: string): StoreApiError {
    const url = this.urlOf(path, query);
    const request = `GET ${url.pathname}${url.search}`;
    return new StoreApiError(`${url.origin} did not answer like the Store Integration API (${what} on ${request}); check the base URL`, {
      status: 200,
      code: 'not_store_api',
      request,
    });
  }

  /** GET /api/v1/{path} answered 2xx, body unread, its timer still on timeoutMs (retries per the policy). */
  async getAnswer(path: string, query: Query, accept: string, signal?: AbortSignal): Promise<Answer> {
    return requestWithRetries(
      this.#fetch,
      {
        method: 'GET',
        url: this.urlOf(path, query),
        headers: { ...this.#headers, accept },
        idempotent: true,
        timeoutMs: this.timeouts.timeoutMs,
      },
      this.retryPolicy,
      signal,
    );
  }

  /** GET /api/v1/{path} answered 2xx, body unread (retries per the policy; no timeout on the body). */
  async getResponse(path: string, query: Query, accept: string, signal?: AbortSignal): Promise<Response> {
    const { response, timer } = await this.getAnswer(path, query, accept, signal);
    timer.clear();
    return response;
  }

  /** GET /api/v1/{path} as parsed JSON (retries per the policy). */
  async getJson<B>(path: string, query: Query = {}, signal?: AbortSignal): Promise<B> {
    return this.requestJson<B>('GET', path, { query, signal });
  }

  /**
   * Any call answered with JSON: `prefix` + `path` (default the read API, /api/v1/). A POST is
   * retried only with an Idempotency-Key (`idempotencyKey`), as every admin POST of this client has.
   */
  async requestJson<B>(
    method: 'GET' | 'POST' | 'PATCH',
    path: string,
    options: {
      query?: Query;
      body?: unknown;
      idempotencyKey?: string;
      signal?: AbortSignal;
      prefix?: string;
    } = {},
  ): Promise<B> {
    const { query = {}, body, idempotencyKey, signal, prefix } = options;
    const url = this.urlOf(path, query, prefix);
    const headers: Record<string, string> = { ...this.#headers, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
    const { response, timer } = await requestWithRetries(
      this.#fetch,
      {
        method,
        url,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        idempotent: method === 'GET' || idempotencyKey !== undefined,
        timeoutMs: this.timeouts.timeoutMs,
      },
      this.retryPolicy,
      signal,
    );
    const request = `${method} ${url.pathname}${url.search}`;
    const type = response.headers.get('content-type') ?? '';
    let text: string;
    try {
      text = await response.text();
    } catch (cause) {
      throw networkError(cause, url, signal, method, timer);
    } finally {
      timer.clear();
    }
    if (!/^application\/json/i.test(type)) {
      throw new StoreApiError(
        `${url.origin} did not answer like the Store Integration API (HTTP ${response.status}, ${type.split(';')[0] || 'no content type'} on ${request}); check the base URL`,
        { status: response.status, code: 'not_store_api', request },
      );
    }
    try {
      return JSON.parse(text) as B;
    } catch (cause) {
      throw new StoreApiError(`${url.origin} answered invalid JSON on ${request}`, { status: response.status, code: 'not_store_api', request, cause });
    }
  }

  /** GET /api/v1/products: one page of products. */
  listProducts(query?: ProductListQuery): Promise<Page<Product>> {
    return this.products.list(query);
  }
  /** GET /api/v1/products/{id}. */
  getProduct(id: string): Promise<Product> {
    return this.products.get(id);
  }
  /** Every product, page after page. */
  iterateProducts(query?: ProductListQuery, options?: IterateOptions): RecordIterator<Product> {
    return this.products.iterate(query, options);
  }
  /** Every product through GET /api/v1/products/export (NDJSON, streamed). */
  exportProducts(query?: ProductExportQuery, options?: IterateOptions): RecordIterator<Product> {
    return this.products.export(query, options);
  }

  /** GET /api/v1/orders: one page of orders. */
  listOrders(query?: OrderListQuery): Promise<Page<Order>> {
    return this.orders.list(query);
  }
  /** GET /api/v1/orders/{id}. */
  getOrder(id: string): Promise<Order> {
    return this.orders.get(id);
  }
  /** Every order, page after page. */
  iterateOrders(query?: OrderListQuery, options?: IterateOptions): RecordIterator<Order> {
    return this.orders.iterate(query, options);
  }
  /** Every order through GET /api/v1/orders/export. */
  exportOrders(query?: OrderExportQuery, options?: IterateOptions): RecordIterator<Order> {
    return this.orders.export(query, options);
  }

  /** GET /api/v1/customers: one page of customers. */
  listCustomers(query?: CustomerListQuery): Promise<Page<Customer>> {
    return this.customers.list(query);
  }
  /** GET /api/v1/customers/{id}. */
  getCustomer(id: string): Promise<Customer> {
    return this.customers.get(id);
  }
  /** Every customer, page after page. */
  iterateCustomers(query?: CustomerListQuery, options?: IterateOptions): RecordIterator<Customer> {
    return this.customers.iterate(query, options);
  }
  /** Every customer through GET /api/v1/customers/export. */
  exportCustomers(query?: CustomerExportQuery, options?: IterateOptions): RecordIterator<Customer> {
    return this.customers.export(query, options);
  }

  /** GET /api/v1/inventory: one page of inventory records. */
  listInventory(query?: InventoryListQuery): Promise<Page<InventoryRecord>> {
    return this.inventory.list(query);
  }
  /** Every inventory record, page after page. */
  iterateInventory(query?: InventoryListQuery, options?: IterateOptions): RecordIterator<InventoryRecord> {
    return this.inventory.iterate(query, options);
  }
  /** Every inventory record through GET /api/v1/inventory/export. */
  exportInventory(query?: InventoryExportQuery, options?: IterateOptions): RecordIterator<InventoryRecord> {
    return this.inventory.export(query, options);
  }

  /** GET /api/v1/inventory/movements: one page of stock movements. */
  listStockMovements(query?: StockMovementListQuery): Promise<Page<StockMovement>> {
    return this.movements.list(query);
  }
  /** Every stock movement, page after page. */
  iterateStockMovements(query?: StockMovementListQuery, options?: IterateOptions): RecordIterator<StockMovement> {
    return this.movements.iterate(query, options);
  }
  /** Every stock movement through GET /api/v1/inventory/movements/export. */
  exportStockMovements(query?: StockMovementExportQuery, options?: IterateOptions): RecordIterator<StockMovement> {
    return this.movements.export(query, options);
  }

  /** GET /api/v1/events: one page of the events feed. */
  listEvents(query?: EventListQuery): Promise<Page<StoreEvent>> {
    return this.events.list(query);
  }
  /** Every event of the feed from `query.cursor` on, page after page. */
  iterateEvents(query?: EventListQuery, options?: IterateOptions): RecordIterator<StoreEvent> {
    return this.events.iterate(query, options);
  }
  /** Every event through GET /api/v1/events/export. */
  exportEvents(query?: EventExportQuery, options?: IterateOptions): RecordIterator<StoreEvent> {
    return this.events.export(query, options);
  }

  /** GET /api/v1/attributes: one page of the variants' distinct attribute keys with their values, by key. */
  async listAttributes(query: AttributeListQuery = {}, options: { signal?: AbortSignal } = {}): Promise<Page<Attribute>> {
    const page = await this.getJson<Page<Attribute>>('attributes', query, options.signal);
    if (!Array.isArray(page?.data) || typeof page.pagination?.has_more !== 'boolean') {
      throw this.notStoreApi('attributes', query, 'a list without data and pagination');
    }
    return page;
  }
  /** Every attribute, page after page; `cursor` is the key of the last attribute consumed. */
  iterateAttributes(query: AttributeListQuery = {}, options: IterateOptions = {}): RecordIterator<Attribute> {
    return new RecordIterator<Attribute>(query.cursor, (self) => this.#walkAttributes(self, query, options));
  }

  async *#walkAttributes(self: RecordIterator<Attribute>, query: AttributeListQuery, options: IterateOptions): AsyncGenerator<Attribute> {
    let cursor = query.cursor;
    while (true) {
      const page = await this.listAttributes({ ...query, cursor }, { signal: options.signal });
      self.pages++;
      for (const attribute of page.data) {
        yield attribute;
        self.count++;
        self.cursor = attribute.key;
      }
      self.cursor = page.pagination.next_cursor ?? self.cursor;
      await options.onPage?.({ cursor: self.cursor, count: page.data.length, hasMore: page.pagination.has_more });
      if (!page.pagination.has_more || page.data.length === 0) return;
      cursor = self.cursor ?? undefined;
    }
  }
}
