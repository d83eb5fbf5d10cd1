/**
 * Route builders shared by every resource of the read API: a list, a single GET and an NDJSON
 * export, each from the resource's ListSource. Pages are assembled from JSON text built in SQL.
 */
import { currentStoreId } from '../../../db/store-scope.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TSchema } from '@sinclair/typebox';
import type { Kysely, RawBuilder } from 'kysely';
import type { Database } from '../../../db/schema.ts';
import { Readable } from 'node:stream';
import {
  readPageBody,
  countRecords,
  fetchPageBody,
  fetchPageKeys,
  pageBodyQuery,
  streamPage,
  type KeyRow,
  type ListSource,
  type PageRequest,
} from '../../../db/keyset-page.ts';
import { listPageCacheOf, type CachedPage } from '../../list-page-cache.ts';
import { SNAPSHOT_CHUNK, SNAPSHOT_DEPTH, snapshotPieces, snapshotStream, snapshotEndCursor } from '../../../db/snapshot.ts';
import { StoreSlots } from '../../../stores/store-slots.ts';
import { SnapshotSlots } from '../../snapshot-slots.ts';
import { inStatementHorizon, readHorizon, sharedHorizon } from '../../../db/write-clock.ts';
import type { Scope } from '../../../tokens/token.service.ts';
import { formatCursor, parseCursor } from '../../../shared/cursor.ts';
import { ApiError, notFound } from '../../../shared/problem.ts';
import { requireUuid } from '../../../records/filters.ts';
import { IdParams, ProblemSchema, listOf, listQuery, single, snapshotQuery } from '../../schemas.ts';
import { setNextLink } from '../../plugins/pagination-links.ts';

export interface ResourceDefinition {
  /** URL segment, e.g. 'products'. */
  path: string;
  /** Human name for messages, e.g. 'product'. */
  noun: string;
  /** The scope a token needs, or several of which it needs one (`conditions` then narrows by the token's scopes). */
  scope: Scope | readonly Scope[];
  tag: string;
  source: ListSource;
  record: TSchema;
  /** Query filters beyond limit/cursor/order. */
  filters: Readonly<Record<string, TSchema>>;
  /** Builds SQL conditions from the parsed query (validated by the schema already) and the request's token. */
  conditions(query: Record<string, unknown>, request: FastifyRequest): RawBuilder<unknown>[] | Promise<RawBuilder<unknown>[]>;
  /** The JSON text of one record by id (undefined when none) for the single GET; omit for no single GET. */
  byId?: ((db: Kysely<Database>, id: string) => Promise<string | undefined>) | undefined;
  description: { readonly list: string; readonly get?: string; readonly export: string };
}

/** `inventory/movements` → `InventoryMovements`, `stock movement` → `StockMovement`: operation ids a person would write. */
export const pascalCase = (words: string): string => words.replace(/(?:^|[\s/_-]+)(\w)/g, (_match, first: string) => first.toUpperCase());

/** The query every list and export accepts, plus the resource's own filters. */
export type ListQuery = { limit: number; cursor?: string; order?: 'asc' | 'desc' } & Record<string, unknown>;

/** Error responses every read API route documents. */
export const errorResponses = {
  400: ProblemSchema,
  401: ProblemSchema,
  403: ProblemSchema,
  429: ProblemSchema,
};

/**
 * The horizon of a page read by one statement: on the embedded database the statement reads it
 * itself (one turn of its connection per page), on PostgreSQL a statement shared by the requests
 * waiting for one (write-clock.ts, decision 0037).
 */
function pageHorizon(app: FastifyInstance): Promise<string> | RawBuilder<string> {
  return inStatementHorizon(app.ctx.database.backend) ?? sharedHorizon(app.ctx.database.db);
}

async function pageRequest(app: FastifyInstance, def: ResourceDefinition, request: FastifyRequest): Promise<PageRequest> {
  const query = request.query as ListQuery;
  const cursor = query.cursor === undefined ? undefined : parseCursor(query.cursor);
  const filters = await def.conditions(query, request);
  return {
    cursor,
    limit: query.limit,
    order: query.order ?? 'asc',
    horizon: await pageHorizon(app),
    filters,
  };
}

/** The pagination object; an empty page hands the given cursor back so polling can resume. */
export function paginationOf(query: ListQuery, last: { iso: string; id: string } | undefined, hasMore: boolean) {
  return {
    next_cursor: last ? formatCursor(last.iso, last.id) : (query.cursor ?? null),
    has_more: hasMore,
    limit: query.limit,
  };
}

const PAGE_OPEN = Buffer.from('{"data":[');
const LINE_END = Buffer.from('\n');

/**
 * How far an NDJSON body is read ahead of the client, in bytes (beyond the socket's own buffers).
 * `Readable.from` defaults to object mode, where the limit is 16 chunks: 16 snapshot chunks of up to
 * ~1 MiB each held in `serve`'s memory per slow client, and a stream read to its end long before the
 * client got there.
 */
const STREAM_READ_AHEAD = { objectMode: false, highWaterMark: 1024 * 1024 } as const;

/** The snapshots running per app (one per token at a time, whatever the resource). */
const snapshotSlots = new WeakMap<FastifyInstance, SnapshotSlots>();
/** The snapshots running per app and store (STORE_MAX_SNAPSHOTS, whatever the resource). */
const storeSnapshotSlots = new WeakMap<FastifyInstance, StoreSlots>();

/** Registers GET /{path}, GET /{path}/export, GET /{path}/snapshot and (with byId) GET /{path}/:id. */
export function registerResource(app: FastifyInstance, def: ResourceDefinition): void {
  let slots = snapshotSlots.get(app);
  if (!slots) {
    slots = new SnapshotSlots(app.sharedStore);
    snapshotSlots.set(app, slots);
  }
  const running = slots;
  let perStore = storeSnapshotSlots.get(app);
  if (!perStore) {
    perStore = new StoreSlots('snapshots', app.ctx.config.STORE_MAX_SNAPSHOTS, app.sharedStore);
    storeSnapshotSlots.set(app, perStore);
  }
  const storeRunning = perStore;
  const config = (rateLimitClass: 'standard' | 'export') =>
    typeof def.scope === 'string' ? { scope: def.scope, rateLimitClass } : { anyScope: def.scope, rateLimitClass };
  // Several scopes: several security requirements, any one of which suffices (OpenAPI semantics).
  const security = (typeof def.scope === 'string' ? [def.scope] : def.scope).map((scope) => ({ bearerAuth: [scope] }));

  app.get(`/${def.path}`, {
    config: config('standard'),
    schema: {
      tags: [def.tag],
      operationId: `list${pascalCase(def.path)}`,
      summary: def.description.list,
      security,
      querystring: listQuery(def.filters),
      response: { 200: listOf(def.record), ...errorResponses },
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const query = request.query as ListQuery;
      const db = app.ctx.database.db;
      const cache = listPageCacheOf(db);
      const cursor = query.cursor === undefined ? undefined : parseCursor(query.cursor);
      const filters = await def.conditions(query, request);
      const base = { cursor, limit: query.limit, order: query.order ?? 'asc', filters } as const;
      let page: CachedPage | undefined;
      let key: string | undefined;
      const storeId = currentStoreId() ?? '';
      if (cache) {
        // The page's content is named by its store (the statement sees that store's rows only,
        // decision 0051), its statement (filters, token-dependent conditions, order, limit,
        // cursor) without the horizon, and by the cursor as sent (an empty page hands it back).
        const compiled = pageBodyQuery(def.source, { ...base, horizon: '' }).compile(db);
        key = `${storeId}\n${query.cursor ?? ''}\n${compiled.sql}\n${JSON.stringify(compiled.parameters)}`;
        page = cache.get(storeId, key);
      }
      if (!page) {
        const generation = cache?.generation(storeId) ?? '';
        const req = { ...base, horizon: await pageHorizon(app) };
        // The page's JSON bytes as the database sends them, never decoded into a string and
        // encoded back, copied once into the body (decisions 0037, 0046, 0050); a PGlite run on
        // this thread (the build's) has no RowReader: the same statement's value through Kysely.
        const readRows = app.ctx.database.readRows;
        const tailOf = (last: KeyRow | undefined, hasMore: boolean) => `],"pagination":${JSON.stringify(paginationOf(query, last, hasMore))}}`;
        const body = readRows
          ? await readPageBody(readRows, db, def.source, req, ',', (p) => ({ head: PAGE_OPEN, tail: Buffer.from(tailOf(p.last, p.hasMore)) }))
          : await fetchPageBody(db, def.source, req);
        page = {
          body: typeof body.data === 'string' ? Buffer.from(`{"data":[${body.data}${tailOf(body.last, body.hasMore)}`) : body.data,
          nextCursor: paginationOf(query, body.last, body.hasMore).next_cursor,
          hasMore: body.hasMore,
        };
        if (cache && key !== undefined) cache.put(storeId, key, page, generation);
      }
      setNextLink(request, reply, page.nextCursor, page.hasMore);
      return reply.type('application/json; charset=utf-8').send(page.body);
    },
  });

  app.get(`/${def.path}/export`, {
    config: config('export'),
    schema: {
      tags: [def.tag],
      operationId: `export${pascalCase(def.path)}`,
      summary: def.description.export,
      security,
      querystring: listQuery(def.filters, true),
      produces: ['application/x-ndjson'],
      response: {
        200: {
          description: 'NDJSON: one record per line. Headers X-Next-Cursor and X-Has-More.',
          content: { 'application/x-ndjson': { schema: def.record } },
          headers: {
            'X-Next-Cursor': { type: 'string', description: 'cursor for the next page' },
            'X-Has-More': { type: 'string', enum: ['true', 'false'] },
          },
        },
        ...errorResponses,
      },
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const query = request.query as ListQuery;
      const db = app.ctx.database.db;
      const readRows = app.ctx.database.readRows;
      if (readRows) {
        // The page's NDJSON, its bounds and whether more follow from ONE statement, its bytes
        // passed through undecoded (decisions 0037, 0046, 0050); a page is at most
        // `limit` (≤ 500) records, held once with its last line break.
        const cursor = query.cursor === undefined ? undefined : parseCursor(query.cursor);
        const base = { cursor, limit: query.limit, order: query.order ?? 'asc', filters: await def.conditions(query, request) } as const;
        const read = async (at: typeof base) =>
          readPageBody(readRows, db, def.source, { ...at, horizon: await pageHorizon(app) }, '\n', (p) => (p.last ? { tail: LINE_END } : {}));
        // With the list page cache on (PostgreSQL), the next page is read while this one is sent and
        // the client asks for it (decision 0069): named as a cached page is, by its statement
        // (token-dependent conditions included) without the horizon and by the cursor as sent.
        const cache = listPageCacheOf(db);
        const storeId = currentStoreId() ?? '';
        const keyOf = (at: typeof base, cursorText: string | undefined) => {
          const compiled = pageBodyQuery(def.source, { ...at, horizon: '' }, '\n').compile(db);
          return `${storeId}\n${cursorText ?? ''}\n${compiled.sql}\n${JSON.stringify(compiled.parameters)}`;
        };
        const page = (cache && (await cache.takeAhead(storeId, keyOf(base, query.cursor)))) ?? (await read(base));
        const { next_cursor } = paginationOf(query, page.last, page.hasMore);
        if (cache && page.hasMore && next_cursor !== null) {
          const next = { ...base, cursor: parseCursor(next_cursor) };
          cache.readAhead(storeId, keyOf(next, next_cursor), () => read(next));
        }
        reply.header('X-Next-Cursor', next_cursor ?? '');
        reply.header('X-Has-More', String(page.hasMore));
        setNextLink(request, reply, next_cursor, page.hasMore);
        reply.type('application/x-ndjson; charset=utf-8');
        return reply.send(page.last ? page.data : '');
      }
      // Fix the page's bounds first (keys only) so the headers are known before the body streams.
      const req = await pageRequest(app, def, request);
      const { keys, hasMore } = await fetchPageKeys(db, def.source, req);
      const last = keys[keys.length - 1];
      const { next_cursor } = paginationOf(query, last, hasMore);
      reply.header('X-Next-Cursor', next_cursor ?? '');
      reply.header('X-Has-More', String(hasMore));
      setNextLink(request, reply, next_cursor, hasMore);
      reply.type('application/x-ndjson; charset=utf-8');
      if (!last) return reply.send('');
      const chunks = streamPage(db, def.source, req, last);
      return reply.send(
        Readable.from(
          (async function* () {
            for await (const rows of chunks) yield `${rows.map((r) => r.json).join('\n')}\n`;
          })(),
          STREAM_READ_AHEAD,
        ),
      );
    },
  });

  app.get(`/${def.path}/snapshot`, {
    config: config('export'),
    schema: {
      tags: [def.tag],
      operationId: `snapshot${pascalCase(def.path)}`,
      summary: `Every ${def.noun} record in one NDJSON stream (initial sync)`,
      description: [
        `Streams every ${def.noun} record (filters as in the export) in (last_modified, id) order, with no page limit, then ends.`,
        'The response header X-Total-Count is an upper bound of the records the stream holds, for a progress bar: it counts, at the start, the records after `cursor` below the read horizon; a record changed while the stream runs is not sent in it (it comes after X-Snapshot-Cursor), so the stream may hold fewer lines, never more (decision 0032).',
        'The response header X-Snapshot-Cursor is the cursor to continue from with lists, exports or webhooks: every record is either in the stream or changed after that cursor.',
        'A broken stream resumes with `cursor` set to the cursor of the last record received (`<last_modified>_<id>`); the resumed stream ends with its own X-Snapshot-Cursor.',
        'Counts once against the export rate limit. One snapshot per token at a time, and at most STORE_MAX_SNAPSHOTS (default 4) per store across its tokens: one more while they stream is answered 429 with Retry-After.',
        'No transaction is held while the client reads: the server reads in short keyset chunks below the read horizon fixed at the start.',
      ].join(' '),
      security,
      querystring: snapshotQuery(def.filters),
      produces: ['application/x-ndjson'],
      response: {
        200: {
          description: 'NDJSON: one record per line. Headers X-Snapshot-Cursor and X-Total-Count (an upper bound of the lines).',
          content: { 'application/x-ndjson': { schema: def.record } },
          headers: {
            'X-Snapshot-Cursor': {
              type: 'string',
              description: 'cursor after the snapshot: pass it as `cursor` to lists and exports to continue with what changed since',
            },
            'X-Total-Count': {
              type: 'integer',
              minimum: 0,
              description:
                'An upper bound of the records this stream holds, for a progress bar: the records after `cursor` below the read horizon, counted before the first one is sent. A record changed while the stream runs is left out of it (it comes after X-Snapshot-Cursor), so the stream may hold fewer lines, never more.',
            },
          },
        },
        ...errorResponses,
      },
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const query = request.query as Record<string, unknown> & { cursor?: string };
      const cursor = query.cursor === undefined ? undefined : parseCursor(query.cursor);
      const filters = await def.conditions(query, request);
      const tokenId = request.token?.id ?? 'anonymous';
      const release = await running.acquire(tokenId);
      if (!release) {
        throw new ApiError('rate_limited', `A snapshot is already streaming for this token: one at a time. Retry after it ends.`, undefined, {
          'Retry-After': String(StoreSlots.RETRY_AFTER_SECONDS),
        });
      }
      // Released when the response ends or the client goes away, whichever comes first (also while
      // the statements below run: a client gone before the stream starts frees the token too).
      reply.raw.once('close', release);
      const storeId = currentStoreId();
      const releaseStore = storeId === undefined ? () => {} : await storeRunning.acquire(storeId);
      if (!releaseStore) {
        release();
        throw new ApiError(
          'rate_limited',
          `This store already streams ${storeRunning.limit} snapshots, its limit (STORE_MAX_SNAPSHOTS = ${storeRunning.limit}). Retry after one ends.`,
          undefined,
          { 'Retry-After': String(StoreSlots.RETRY_AFTER_SECONDS) },
        );
      }
      reply.raw.once('close', releaseStore);
      let streaming = false;
      try {
        const db = app.ctx.database.db;
        const horizon = await readHorizon(db);
        const [endCursor, total] = await Promise.all([
          snapshotEndCursor(db, horizon, cursor && { text: query.cursor!, cursor }),
          // What this stream will hold, known before the first record: a sync tool shows a percentage and an ETA.
          countRecords(db, def.source, { cursor, horizon, filters }),
        ]);
        reply.header('X-Snapshot-Cursor', endCursor);
        reply.header('X-Total-Count', String(total));
        reply.type('application/x-ndjson; charset=utf-8');
        streaming = true;
        const chunkSize = SNAPSHOT_CHUNK[app.ctx.database.backend];
        return reply.send(
          Readable.from(
            snapshotPieces(
              snapshotStream(
                db,
                def.source,
                { cursor, horizon, filters },
                chunkSize,
                undefined,
                app.ctx.database.readRows,
                SNAPSHOT_DEPTH[app.ctx.database.backend],
              ),
            ),
            STREAM_READ_AHEAD,
          ),
        );
      } finally {
        if (!streaming) release();
      }
    },
  });

  if (def.byId) {
    const byId = def.byId;
    app.get(`/${def.path}/:id`, {
      config: { ...config('standard'), etag: true },
      schema: {
        tags: [def.tag],
        operationId: `get${pascalCase(def.noun)}`,
        summary: def.description.get,
        security,
        params: IdParams,
        response: { 200: single(def.record), 404: ProblemSchema, ...errorResponses },
      },
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        const id = requireUuid((request.params as { id: string }).id, 'id');
        const json = await byId(app.ctx.database.db, id);
        if (json === undefined) throw notFound(def.noun, id);
        return reply.type('application/json; charset=utf-8').send(`{"data":${json}}`);
      },
    });
  }
}
