/**
 * A snapshot walked as NDJSON lines for the initial sync: GET /api/v1/{resource}/snapshot through the
 * typed client (its token, its retries and 429 waits before the answer), the body split into lines
 * that are never parsed here, so each record's text goes to the mirror as the service sent it.
 * Otherwise the walk is the client's snapshot(): a connection lost mid-stream resumes after the last
 * line consumed (its cursor taken from that one line) up to the client's retry count; a server
 * without snapshots falls back to the paged exports from the same cursor.
 */
import { isSnapshotUnsupported, ndjsonLines, StoreApiError, type StoreApiClient } from '@store-api/client';
import type { SnapshotLineWalk } from './store-reader.ts';
import { cursorAfter, type MirrorRecord, type SyncResource } from './sync-resources.ts';

/** The snapshot of `resource` after `cursor` as lines; `exportRecords` is the fallback. */
export function snapshotLineWalk(
  client: StoreApiClient,
  resource: SyncResource,
  cursor: string | null,
  exportRecords: (resource: SyncResource, cursor: string | null) => AsyncIterable<MirrorRecord>,
): SnapshotLineWalk {
  const path = `${resource.path}/snapshot`;
  let endCursor: string | null = null;
  let total: number | null = null;
  return {
    async *[Symbol.asyncIterator]() {
      let position = cursor;
      let consumed = 0;
      let last: string | undefined;
      let failures = 0;
      for (;;) {
        const query = { ...resource.query, ...(position ? { cursor: position } : {}) };
        let response: Response;
        try {
          response = await client.getResponse(path, query, 'application/x-ndjson');
        } catch (error) {
          if (consumed > 0 || !isSnapshotUnsupported(error)) throw error;
          for await (const record of exportRecords(resource, cursor)) yield JSON.stringify(record);
          return;
        }
        const url = client.urlOf(path, query);
        const request = `GET ${url.pathname}${url.search}`;
        const end = response.headers.get('x-snapshot-cursor');
        if (!end) {
          await response.body?.cancel().catch(() => {});
          throw new StoreApiError(
            `${url.origin} did not answer like the Store Integration API (no X-Snapshot-Cursor header on GET ${url.pathname}); check the base URL`,
            { status: response.status, code: 'not_store_api', request },
          );
        }
        const announced = Number.parseInt(response.headers.get('x-total-count') ?? '', 10);
        // A resumed stream counts what is left after its cursor: add what was consumed before it.
        if (Number.isSafeInteger(announced) && announced >= 0) total = consumed + announced;
        try {
          if (response.body) {
            for await (const line of ndjsonLines(response.body)) {
              yield line;
              consumed++;
              last = line;
              failures = 0;
            }
          }
        } catch (cause) {
          const lost = new StoreApiError(`Lost the connection to the Store API at ${url.origin} while reading the snapshot of ${resource.path}`, {
            status: response.status,
            code: 'network_error',
            request,
            cause,
          });
          if (++failures > client.retryPolicy.maxRetries) throw lost;
          client.retryPolicy.onRetry?.({ attempt: failures, delayMs: 0, status: undefined, error: lost });
          if (last !== undefined) position = cursorAfter(resource, JSON.parse(last) as MirrorRecord);
          continue;
        }
        endCursor = end;
        return;
      }
    },
    endCursor: () => endCursor,
    total: () => total,
  };
}
