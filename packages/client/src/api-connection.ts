/**
 * The connection to one service: base URL, token, timeouts and retry policy, and the requests every
 * resource and the admin API make through it (GET with retries, JSON calls, NDJSON answers). The
 * transport below it (http-transport.ts) knows no base URL; the resources above it (resource.client.ts)
 * know no headers.
 */
import { StoreApiError } from './store-api.error.ts';
import { networkError, requestWithRetries, type Answer, type RetryInfo, type RetryPolicy } from './http-transport.ts';
import { withResponse, type ResponseMetadata, type WithResponse } from './response-metadata.ts';

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

/** The package's version (kept equal to package.json's by a test). */
export const VERSION = '0.3.0';

type QueryValue = string | number | boolean | undefined | null;
/** Query parameters of a call: undefined and null values are left out, arrays repeat the parameter. */
export type Query = Record<string, QueryValue | readonly QueryValue[]>;

/** Base URL, credentials, timeouts and retries of a client, and the calls made with them. */
export class ApiConnection {
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
  notStoreApi(path: string, query: Query, what: string, lastResponse?: ResponseMetadata): StoreApiError {
    const url = this.urlOf(path, query);
    const request = `GET ${url.pathname}${url.search}`;
    return new StoreApiError(`${url.origin} did not answer like the Store Integration API (${what} on ${request}); check the base URL`, {
      status: lastResponse?.status ?? 200,
      code: 'not_store_api',
      request,
      lastResponse,
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

  /** GET /api/v1/{path} as parsed JSON, with its `lastResponse` (retries per the policy). */
  async getJson<B>(path: string, query: Query = {}, signal?: AbortSignal): Promise<WithResponse<B>> {
    return this.requestJson<B>('GET', path, { query, signal });
  }

  /**
   * Any call answered with JSON: `prefix` + `path` (default the read API, /api/v1/). The parsed body
   * carries the answer's metadata as a non-enumerable `lastResponse`. A body is sent as JSON, or, with
   * a `contentType` other than JSON, as the string it is (a CSV upload). A POST is retried only with
   * an Idempotency-Key (`idempotencyKey`), as every admin POST of this client has.
   */
  async requestJson<B>(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    options: {
      query?: Query;
      body?: unknown;
      contentType?: string;
      idempotencyKey?: string;
      signal?: AbortSignal;
      prefix?: string;
    } = {},
  ): Promise<WithResponse<B>> {
    const { query = {}, body, contentType = 'application/json', idempotencyKey, signal, prefix } = options;
    const url = this.urlOf(path, query, prefix);
    const headers: Record<string, string> = { ...this.#headers, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = contentType;
    if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
    const asJson = /^application\/json/i.test(contentType);
    const { response, timer, lastResponse } = await requestWithRetries(
      this.#fetch,
      {
        method,
        url,
        headers,
        body: body === undefined ? undefined : asJson ? JSON.stringify(body) : String(body),
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
        { status: response.status, code: 'not_store_api', request, lastResponse },
      );
    }
    let parsed: B;
    try {
      parsed = JSON.parse(text) as B;
    } catch (cause) {
      throw new StoreApiError(`${url.origin} answered invalid JSON on ${request}`, {
        status: response.status,
        code: 'not_store_api',
        request,
        cause,
        lastResponse,
      });
    }
    return withResponse(parsed, lastResponse);
  }
}
