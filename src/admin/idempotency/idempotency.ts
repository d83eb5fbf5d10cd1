/**
 * Idempotent admin writes (decision 0013): one hook for every POST of the admin API, whatever the
 * route (new routes are covered without doing anything).
 *
 * A POST with `Idempotency-Key: <key>` (1–255 printable ASCII characters):
 *  - first time (per principal and key): the key is claimed in the database (a primary-key insert,
 *    so of two concurrent requests exactly one runs), the request runs, and its answer (status,
 *    content type, body) is stored with the key;
 *  - again with the same method, path and body within 24 h: the stored answer is sent again with
 *    `Idempotent-Replayed: true`, and the route does not run (nothing is written twice);
 *  - again with another method, path or body: 422 `idempotency_key_reused`;
 *  - while the first is still running: 409 `idempotency_key_in_use` with Retry-After: 1.
 * A 5xx answer releases the key (every write is one transaction, so a 5xx wrote nothing and the
 * retry runs afresh); 2xx and 4xx answers are kept. A claim whose request never answered (the
 * process died) is taken over by the same request after CLAIM_LEASE_MS. Keys live 24 h
 * (IDEMPOTENCY_KEY_TTL_MS): after that the key may be used again, and the retention pruner deletes it.
 * POSTs without the header work as before.
 */
import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Database } from '../../db/schema.ts';
import { ApiError, invalidParameter } from '../../shared/problem.ts';

/** The request header, as Stripe and the IETF draft (draft-ietf-httpapi-idempotency-key-header) name it. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** Response header of a replayed answer. */
export const REPLAYED_HEADER = 'idempotent-replayed';
/** How long a key is kept (and its answer replayed). */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 60 * 60 * 1000;
/** After this long without an answer, a claim is taken to be abandoned (its process died). */
export const CLAIM_LEASE_MS = 10 * 60 * 1000;

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

declare module '../../db/schema.ts' {
  interface Database {
    idempotency_keys: {
      principal: string;
      idempotency_key: string;
      request_hash: string;
      method: string;
      path: string;
      state: 'in_progress' | 'done';
      response_status: number | null;
      response_type: string | null;
      response_body: string | null;
      created_at: string;
      locked_until: string;
    };
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The key this request claimed, until its answer is stored. */
    idempotencyClaim?: { principal: string; key: string };
  }
}

interface StoredKey {
  request_hash: string;
  state: 'in_progress' | 'done';
  response_status: number | null;
  response_type: string | null;
  response_body: string | null;
}

/** Hash of what makes two requests "the same": method, path with query, and the JSON body. */
export function requestHash(method: string, url: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${url}\n`)
    .update(body === undefined ? '' : JSON.stringify(body))
    .digest('hex');
}

/** Claims `key` for this request; returns the stored row instead when someone else holds it. */
async function claim(db: Kysely<Database>, principal: string, key: string, hash: string, method: string, path: string): Promise<StoredKey | undefined> {
  const ttl = `${IDEMPOTENCY_KEY_TTL_MS} milliseconds`;
  const lease = `${CLAIM_LEASE_MS} milliseconds`;
  const { rows } = await sql<{ claimed: number }>`
    INSERT INTO idempotency_keys (principal, idempotency_key, request_hash, method, path, state, created_at, locked_until)
    VALUES (${principal}, ${key}, ${hash}, ${method}, ${path}, 'in_progress', now(), now() + ${lease}::interval)
    ON CONFLICT (principal, idempotency_key) DO UPDATE SET
      request_hash = excluded.request_hash, method = excluded.method, path = excluded.path, state = 'in_progress',
      response_status = NULL, response_type = NULL, response_body = NULL,
      created_at = excluded.created_at, locked_until = excluded.locked_until
    WHERE idempotency_keys.created_at <= now() - ${ttl}::interval
       OR (idempotency_keys.state = 'in_progress' AND idempotency_keys.locked_until < now()
           AND idempotency_keys.request_hash = excluded.request_hash)
    RETURNING 1 AS claimed
  `.execute(db);
  if (rows.length > 0) return undefined;
  const existing = await db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'state', 'response_status', 'response_type', 'response_body'])
    .where('principal', '=', principal)
    .where('idempotency_key', '=', key)
    .executeTakeFirst();
  // Gone between the two statements (pruned or released): the caller may simply try again.
  if (!existing)
    throw new ApiError('idempotency_key_in_use', 'This Idempotency-Key changed state while being checked. Retry the request.', undefined, {
      'Retry-After': '1',
    });
  return existing as StoredKey;
}

async function beforeHandler(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
  if (request.method !== 'POST') return undefined;
  const raw = request.headers[IDEMPOTENCY_KEY_HEADER];
  if (raw === undefined) return undefined;
  const key = Array.isArray(raw) ? raw.join(',') : raw;
  if (!KEY_PATTERN.test(key)) {
    throw invalidParameter('header.Idempotency-Key', 'must be 1–255 printable ASCII characters without spaces (a UUID is a good key)');
  }
  const admin = request.admin;
  if (!admin) return undefined; // authentication failed first and answered already
  const principal = `${admin.kind}:${admin.id}`;
  const db = request.server.ctx.database.db;
  const hash = requestHash(request.method, request.url, request.body);
  const existing = await claim(db, principal, key, hash, request.method, request.url);
  if (!existing) {
    request.idempotencyClaim = { principal, key };
    return undefined;
  }
  if (existing.request_hash !== hash) {
    throw new ApiError(
      'idempotency_key_reused',
      'This Idempotency-Key was already used with another request (method, path or body) in the last 24 hours. Use a new key for a new request; nothing was written.',
      [{ param: 'header.Idempotency-Key', message: 'was used with another request' }],
    );
  }
  if (existing.state === 'in_progress') {
    throw new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed. Retry shortly to get its answer.', undefined, {
      'Retry-After': '1',
    });
  }
  reply.code(existing.response_status ?? 200).header(REPLAYED_HEADER, 'true');
  if (existing.response_type) reply.type(existing.response_type);
  return reply.send(existing.response_body ?? '');
}

async function storeAnswer(request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  const claimed = request.idempotencyClaim;
  if (!claimed) return payload;
  request.idempotencyClaim = undefined;
  const db = request.server.ctx.database.db;
  if (reply.statusCode >= 500 || (typeof payload !== 'string' && payload !== null && payload !== undefined && !Buffer.isBuffer(payload))) {
    // Nothing was written (5xx), or a streamed answer that cannot be kept: release the key.
    await db.deleteFrom('idempotency_keys').where('principal', '=', claimed.principal).where('idempotency_key', '=', claimed.key).execute();
    return payload;
  }
  const type = reply.getHeader('content-type');
  await db
    .updateTable('idempotency_keys')
    .set({
      state: 'done',
      response_status: reply.statusCode,
      response_type: typeof type === 'string' ? type : null,
      response_body: payload === null || payload === undefined ? '' : payload.toString(),
    })
    .where('principal', '=', claimed.principal)
    .where('idempotency_key', '=', claimed.key)
    .execute();
  return payload;
}

/** Registers the hooks on the admin API's scope (after its authentication hook). */
export function registerIdempotency(app: FastifyInstance): void {
  app.addHook('preHandler', beforeHandler);
  app.addHook('onSend', storeAnswer);
}

/** Deletes up to `limit` keys created before `cutoff` (ISO); returns how many. */
export async function deleteExpiredIdempotencyKeys(db: Kysely<Database>, cutoff: string, limit: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    WITH gone AS (
      DELETE FROM idempotency_keys WHERE ctid IN (
        SELECT ctid FROM idempotency_keys WHERE created_at < ${cutoff}::timestamptz LIMIT ${limit}
      ) RETURNING 1
    )
    SELECT count(*)::int AS n FROM gone
  `.execute(db);
  return rows[0]?.n ?? 0;
}
