/**
 * StoreReader on the typed client (@store-api/client): list pages and export iterators per resource.
 * The client waits on 429, retries 5xx and network errors with backoff, resumes a broken export from
 * the last record consumed, and fails with one-line StoreApiErrors (see sync-errors.ts).
 *
 * Against a service on this machine (a loopback address) it asks for uncompressed answers: the bytes
 * cost nothing there, while compressing a snapshot costs the service more CPU than reading it.
 */
import { StoreApiClient, isChecksumsUnsupported, isSnapshotUnsupported, type ResourceClient, type RetryInfo } from '@store-api/client';
import { snapshotLineWalk } from './snapshot-lines.ts';
import { SyncError } from './sync-errors.ts';
import type { Page, SnapshotWalk, StoreReader } from './store-reader.ts';
import type { MirrorRecord, ResourceName, SyncResource } from './sync-resources.ts';

export interface ClientStoreReaderOptions {
  baseUrl: string;
  token: string;
  /** Records per export request (1–500, default 500). */
  exportLimit?: number;
  /** Retries of one request (the client's default when unset). */
  maxRetries?: number;
  /** Backoff of the client's retries (its defaults when unset). */
  retryBaseDelayMs?: number;
  retryMaxDelayMs?: number;
  /** Called before each retry of the client (a 429's wait, a 5xx, a network error). */
  onRetry?: (info: RetryInfo) => void;
  /** fetch implementation (default: the global fetch). */
  fetch?: typeof fetch;
}

/** Record checksums per request of verify's drill-down (the server's maximum). */
const RECORD_CHECKSUMS_PER_REQUEST = 20_000;

type Query = Record<string, string | number | boolean | null | undefined>;
type AnyResource = ResourceClient<MirrorRecord, Query, Query>;

/** A StoreReader for the service at `baseUrl`. */
export function clientStoreReader({
  baseUrl,
  token,
  exportLimit = 500,
  maxRetries,
  retryBaseDelayMs,
  retryMaxDelayMs,
  onRetry,
  fetch,
}: ClientStoreReaderOptions): StoreReader {
  let client: StoreApiClient;
  try {
    const local = URL.canParse(baseUrl) && isLoopback(new URL(baseUrl).hostname);
    client = new StoreApiClient({
      baseUrl,
      token,
      maxRetries,
      retryBaseDelayMs,
      retryMaxDelayMs,
      onRetry,
      fetch: local ? uncompressed(fetch ?? globalThis.fetch) : fetch,
    });
  } catch (error) {
    throw new SyncError(`${(error as Error).message} (--url / --token)`);
  }
  // The client's generated member of each resource (its generated/resource-clients.ts): the mirror
  // keeps records as the API's JSON, so they are walked untyped here.
  const resourceClient = (name: ResourceName): AnyResource => client.resource(name) as unknown as AnyResource;
  const exportRecords = (resource: SyncResource, cursor: string | null): AsyncIterable<MirrorRecord> =>
    resourceClient(resource.name).export({ ...resource.query, limit: exportLimit, ...(cursor ? { cursor } : {}) });
  return {
    async listPage(resource: SyncResource, cursor: string | null, limit: number): Promise<Page> {
      const page = await resourceClient(resource.name).list({ ...resource.query, limit, ...(cursor ? { cursor } : {}) });
      return { data: page.data, nextCursor: page.pagination.next_cursor ?? null, hasMore: page.pagination.has_more };
    },
    exportRecords,
    snapshotRecords(resource: SyncResource, cursor: string | null): SnapshotWalk {
      const snapshot = resourceClient(resource.name).snapshot({ ...resource.query, ...(cursor ? { cursor } : {}) });
      let fellBack = false;
      return {
        async *[Symbol.asyncIterator]() {
          try {
            yield* snapshot;
          } catch (error) {
            // A server from before snapshots: the paged exports, from the same cursor.
            if (snapshot.count > 0 || !isSnapshotUnsupported(error)) throw error;
            fellBack = true;
            yield* exportRecords(resource, cursor);
          }
        },
        endCursor: () => (fellBack ? null : snapshot.cursor),
        total: () => (fellBack ? null : snapshot.total),
      };
    },
    snapshotLines: (resource, cursor) => snapshotLineWalk(client, resource, cursor, exportRecords),
    async rangeChecksums(resource, prefix, digits) {
      try {
        return await resourceClient(resource.name).checksums({ ...resource.query, prefix, digits });
      } catch (error) {
        // A server from before checksums: verify compares the records themselves.
        if (isChecksumsUnsupported(error)) return null;
        throw error;
      }
    },
    recordChecksums: (resource, prefix) => resourceClient(resource.name).recordChecksums({ ...resource.query, prefix, limit: RECORD_CHECKSUMS_PER_REQUEST }),
  };
}

/** Whether `hostname` (as URL.hostname gives it) is this machine's loopback. */
export function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/** `fetch` asking for an uncompressed answer (Accept-Encoding: identity) unless the call says otherwise. */
function uncompressed(fetch: typeof globalThis.fetch): typeof globalThis.fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    if (!headers.has('accept-encoding')) headers.set('accept-encoding', 'identity');
    return fetch(input, { ...init, headers });
  };
}
