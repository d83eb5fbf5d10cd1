/**
 * The calls of one resource: a page, every page, the NDJSON export and the snapshot, and (for
 * resources with GET /{resource}/{id}) one record. The per-resource members of the client are
 * generated from the OpenAPI document's x-resources (generated/resource-clients.ts).
 */
import { StoreApiError } from './store-api.error.ts';
import { TruncatedBodyError, lines } from './ndjson-lines.ts';
import { networkError } from './http-transport.ts';
import type { ApiConnection, Query } from './api-connection.ts';
import { RecordIterator, cursorAfter, type Cursored, type IterateOptions } from './record-iterator.ts';
import type { Page, RangeChecksum, RecordChecksum } from './resource-types.ts';
import { trackResponses, withResponse, type ResponseMetadata, type WithResponse } from './response-metadata.ts';

/** The list, iterate and export calls of one resource. */
export class ResourceClient<T extends Cursored, LQ extends Query, EQ extends Query> {
  constructor(
    protected readonly client: ApiConnection,
    protected readonly path: string,
  ) {}

  /** One page: GET /api/v1/{resource}, with the answer's metadata as `lastResponse`. */
  async list(query: LQ = {} as LQ, options: { signal?: AbortSignal } = {}): Promise<WithResponse<Page<T>>> {
    const page = await this.client.getJson<Page<T>>(this.path, query, options.signal);
    if (!Array.isArray(page?.data) || typeof page.pagination?.has_more !== 'boolean') {
      throw this.client.notStoreApi(this.path, query, 'a list without data and pagination', page?.lastResponse);
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
      self.lastResponse = page.lastResponse;
      for (const record of page.data) {
        yield record;
        self.count++;
        self.cursor = cursorAfter(record);
      }
      self.cursor = page.pagination.next_cursor ?? self.cursor;
      await options.onPage?.({ cursor: self.cursor, count: page.data.length, hasMore: page.pagination.has_more, lastResponse: page.lastResponse });
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
      const { response, timer, lastResponse } = await this.client.getAnswer(exportPath, { ...query, cursor }, 'application/x-ndjson', options.signal);
      self.lastResponse = lastResponse;
      const url = response.url ? new URL(response.url) : this.client.urlOf(exportPath, { ...query, cursor });
      const hasMore = response.headers.get('x-has-more');
      const nextCursor = response.headers.get('x-next-cursor');
      if (hasMore !== 'true' && hasMore !== 'false') {
        timer.clear();
        await response.body?.cancel().catch(() => {});
        throw new StoreApiError(
          `${url.origin} did not answer like the Store Integration API (no X-Has-More header on GET ${url.pathname}); check the base URL`,
          { status: response.status, code: 'not_store_api', request: `GET ${url.pathname}${url.search}`, lastResponse },
        );
      }
      self.pages++;
      let count = 0;
      const idle = this.client.timeouts.idleTimeoutMs;
      timer.arm(idle, 'idle');
      try {
        for await (const record of this.#records(response, url, 'export', lastResponse, timer.signal, () => timer.arm(idle, 'idle'))) {
          yield record;
          count++;
          self.count++;
          self.cursor = cursorAfter(record);
          failures = 0;
        }
      } catch (error) {
        timer.clear();
        if (error instanceof StoreApiError) throw error;
        const failure = this.#brokenOff(error, lastResponse, url, 'export') ?? networkError(error, url, options.signal, 'GET', timer);
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
          { status: response.status, code: 'network_error', request: `GET ${url.pathname}${url.search}`, lastResponse },
        );
        if (++failures > this.client.retryPolicy.maxRetries) throw failure;
        this.client.retryPolicy.onRetry?.({ attempt: failures, delayMs: 0, status: undefined, error: failure });
        continue;
      }
      await options.onPage?.({ cursor: self.cursor, count, hasMore: hasMore === 'true', lastResponse });
      if (hasMore !== 'true' || count === 0) return;
    }
  }

  /**
   * Count and checksum of the records per id range, `digits` (1–3, default 2) hex digits past
   * `prefix` (default every record): GET /api/v1/{resource}/checksums. Filters as in the list.
   */
  async checksums(query: { prefix?: string; digits?: number } & Query = {}, options: { signal?: AbortSignal } = {}): Promise<WithResponse<RangeChecksum[]>> {
    const path = `${this.path}/checksums`;
    const body = await this.client.getJson<{ data: RangeChecksum[] }>(path, query, options.signal);
    if (!Array.isArray(body?.data)) throw this.client.notStoreApi(path, query, 'an answer without data', body?.lastResponse);
    return withResponse(body.data, body.lastResponse);
  }

  /**
   * Every record's checksum in the range `prefix`, by id, request after request (GET
   * /api/v1/{resource}/checksums/records); `lastResponse` is the latest request's metadata.
   */
  recordChecksums(
    query: { prefix?: string; limit?: number } & Query = {},
    options: { signal?: AbortSignal } = {},
  ): AsyncGenerator<RecordChecksum> & { readonly lastResponse: ResponseMetadata | null } {
    return trackResponses((track) => this.#walkRecordChecksums(query, options, track));
  }

  async *#walkRecordChecksums(
    query: { prefix?: string; limit?: number } & Query,
    options: { signal?: AbortSignal },
    track: (metadata: ResponseMetadata) => void,
  ): AsyncGenerator<RecordChecksum> {
    const path = `${this.path}/checksums/records`;
    let after: string | undefined;
    for (;;) {
      const page = await this.client.getJson<{ data: RecordChecksum[]; pagination: { next_cursor: string | null; has_more: boolean } }>(
        path,
        { ...query, after },
        options.signal,
      );
      if (!Array.isArray(page?.data) || typeof page.pagination?.has_more !== 'boolean')
        throw this.client.notStoreApi(path, query, 'a page without data and pagination', page?.lastResponse);
      track(page.lastResponse);
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
      const { response, timer, lastResponse } = await this.client.getAnswer(snapshotPath, { ...query, cursor }, 'application/x-ndjson', options.signal);
      // A snapshot's body may take as long as the resource is large: no limit past its headers.
      timer.clear();
      self.lastResponse = lastResponse;
      const url = response.url ? new URL(response.url) : this.client.urlOf(snapshotPath, { ...query, cursor });
      const endCursor = response.headers.get('x-snapshot-cursor');
      if (!endCursor) {
        await response.body?.cancel().catch(() => {});
        throw new StoreApiError(
          `${url.origin} did not answer like the Store Integration API (no X-Snapshot-Cursor header on GET ${url.pathname}); check the base URL`,
          { status: response.status, code: 'not_store_api', request: `GET ${url.pathname}${url.search}`, lastResponse },
        );
      }
      self.pages++;
      const announced = Number.parseInt(response.headers.get('x-total-count') ?? '', 10);
      // A resumed stream counts what is left after its cursor: add what was consumed before it.
      if (Number.isSafeInteger(announced) && announced >= 0) self.total = self.count + announced;
      let count = 0;
      try {
        for await (const record of this.#records(response, url, 'snapshot', lastResponse, options.signal)) {
          yield record;
          count++;
          self.count++;
          self.cursor = cursorAfter(record);
          failures = 0;
        }
      } catch (error) {
        if (error instanceof StoreApiError) throw error;
        const failure = this.#brokenOff(error, lastResponse, url, 'snapshot') ?? networkError(error, url, options.signal);
        if (failure.code === 'aborted' || ++failures > this.client.retryPolicy.maxRetries) throw failure;
        this.client.retryPolicy.onRetry?.({ attempt: failures, delayMs: 0, status: undefined, error: failure });
        continue;
      }
      self.cursor = endCursor;
      await options.onPage?.({ cursor: self.cursor, count, hasMore: false, lastResponse });
      return;
    }
  }

  /** The records of an NDJSON answer (an export page or a snapshot), parsed line by line as they arrive. */
  async *#records(
    response: Response,
    url: URL,
    what: 'export' | 'snapshot',
    lastResponse: ResponseMetadata,
    signal: AbortSignal | undefined,
    onLine?: () => void,
  ): AsyncGenerator<T> {
    if (!response.body) return;
    for await (const line of lines(response.body, signal)) {
      onLine?.();
      let record: T;
      try {
        record = JSON.parse(line) as T;
      } catch (cause) {
        throw new StoreApiError(`${url.origin} sent a line that is not JSON in the ${what} of ${this.path}`, {
          status: response.status,
          code: 'not_store_api',
          request: `GET ${url.pathname}${url.search}`,
          cause,
          lastResponse,
        });
      }
      yield record;
    }
  }

  /** The error of a stream cut in the middle of a line, or undefined for any other failure. */
  #brokenOff(error: unknown, lastResponse: ResponseMetadata, url: URL, what: 'export' | 'snapshot'): StoreApiError | undefined {
    if (!(error instanceof TruncatedBodyError)) return undefined;
    return new StoreApiError(`The ${what} of ${this.path} from ${url.origin} broke off in the middle of a line (connection lost)`, {
      status: lastResponse.status,
      code: 'network_error',
      request: `GET ${url.pathname}${url.search}`,
      cause: error,
      lastResponse,
    });
  }
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
  /** One record by id, with the answer's metadata as `lastResponse`; a StoreApiError with status 404 when there is none. */
  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<WithResponse<T>> {
    const path = `${this.path}/${encodeURIComponent(id)}`;
    const body = await this.client.getJson<{ data: T }>(path, {}, options.signal);
    if (typeof body?.data !== 'object' || body.data === null) throw this.client.notStoreApi(path, {}, 'a body without data', body?.lastResponse);
    return withResponse(body.data, body.lastResponse);
  }
}
