/**
 * Idempotent admin writes (decisions 0013 and 0027): every POST of the admin API, whatever the route
 * (new routes are covered without doing anything), honours `Idempotency-Key: <key>` (1–255 printable
 * ASCII characters):
 *  - first time: the key is claimed, the request runs, and its answer (status, content type, body)
 *    is stored with the key in the request's own transaction (admin/admin-write-transaction.ts), so
 *    the answer is stored exactly when the write commits;
 *  - again with the same method, path and body within 24 h, by the same principal: the stored answer
 *    is sent again with `Idempotent-Replayed: true`, and the route does not run;
 *  - again with another method, path or body, or by another principal (token or administrator):
 *    422 `idempotency_key_reused`, nothing written;
 *  - while the first is still running: 409 `idempotency_key_in_use` with Retry-After: 1.
 *
 * The claim is a lock, never a row: in this process a set of keys in flight, and on PostgreSQL a
 * transaction-level advisory lock taken in the request's transaction (other processes). Both end
 * with the transaction: a commit stores the answer and frees the key at the same instant; a
 * rollback, a killed process or a terminated connection frees it with nothing stored, and the retry
 * runs afresh. A 5xx answer is rolled back (nothing written, nothing stored); 2xx and 4xx answers are
 * kept. Keys live 24 h (IDEMPOTENCY_KEY_TTL_MS): after that the key may be used again, and the
 * retention pruner deletes it. POSTs without the header work as before.
 *
 * The table never holds the key nor the answer in clear (decision 0040, admin/idempotency/sealed-answer.ts):
 * rows are found by the key's SHA-256, the request's hash is kept as an HMAC and the answer sealed
 * with AES-256-GCM, under keys derived from the Idempotency-Key and the principal.
 */
import { currentStoreId, ownStore, ownStoreIs } from '../../db/store-scope.ts';
import { createHash } from 'node:crypto';
import { sql, type Generated, type Kysely } from 'kysely';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Database } from '../../db/schema.ts';
import { ApiError, invalidParameter } from '../../shared/problem.ts';
import { answerKeys, idempotencyKeyHash, openAnswer, requestTag, sealAnswer, type AnswerKeys } from './sealed-answer.ts';
import { IDEMPOTENCY_KEY_TTL_MS } from '../../retention/retention-policy.ts';

/** The request header, as Stripe and the IETF draft (draft-ietf-httpapi-idempotency-key-header) name it. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** Response header of a replayed answer. */
export const REPLAYED_HEADER = 'idempotent-replayed';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

declare module '../../db/schema.ts' {
  interface Database {
    idempotency_keys: {
      /** The store of the request that sent the key (migration 0031): with key_hash, the primary key. */
      store_id: Generated<string>;
      /** SHA-256 (hex) of the Idempotency-Key. */
      key_hash: string;
      principal: string;
      /** HMAC-SHA256 (hex) of `requestHash(…)` under the key's MAC key. */
      request_hash: string;
      method: string;
      path: string;
      response_status: number;
      response_type: string | null;
      /** The answer's body sealed by `sealAnswer` (AES-256-GCM under the key's sealing key). */
      response_body: string;
      created_at: string;
    };
  }
}

/** A key this request holds: its answer is stored at the commit of the request's transaction. */
export interface IdempotencyClaim {
  readonly principal: string;
  readonly key: string;
  /** SHA-256 of the key: the row's primary key. */
  readonly keyHash: string;
  /** The request's hash as stored (HMAC under `keys.mac`). */
  readonly hash: string;
  readonly keys: AnswerKeys;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The key this request claimed, until its transaction ends. */
    idempotencyClaim?: IdempotencyClaim;
  }
}

/** Keys claimed by requests of this process that have not ended yet. */
const inFlight = new Set<string>();

/** Hash of what makes two requests "the same": method, path with query, and the JSON body. */
export function requestHash(method: string, url: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${url}\n`)
    .update(body === undefined ? '' : JSON.stringify(body))
    .digest('hex');
}

/** The two int4 of the key's advisory lock (the two-key form, apart from the write clock's one-key lock). */
function lockKeys(key: string): [number, number] {
  const digest = createHash('sha256').update(`idempotency-key\n${key}`).digest();
  return [digest.readInt32BE(0), digest.readInt32BE(4)];
}

function inUse(): ApiError {
  return new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed. Retry shortly to get its answer.', undefined, {
    'Retry-After': '1',
  });
}

/**
 * The preHandler part, run inside the request's transaction: refuses a malformed key, answers a
 * replay, or claims the key (`request.idempotencyClaim`). Returns the reply when it answered.
 */
export async function claimIdempotencyKey(
  request: FastifyRequest,
  reply: FastifyReply,
  db: Kysely<Database>,
  onPostgres: boolean,
): Promise<{ replay: () => FastifyReply } | undefined> {
  if (request.method !== 'POST') return undefined;
  const raw = request.headers[IDEMPOTENCY_KEY_HEADER];
  if (raw === undefined) return undefined;
  const sent = Array.isArray(raw) ? raw.join(',') : raw;
  if (!KEY_PATTERN.test(sent)) {
    throw invalidParameter('header.Idempotency-Key', 'must be 1–255 printable ASCII characters without spaces (a UUID is a good key)');
  }
  const admin = request.admin;
  if (!admin) return undefined; // authentication failed first and answered already
  const principal = `${admin.kind}:${admin.id}`;
  // A key is the store's (decision 0051): held, locked and sealed under the store and the key sent.
  // Its row is found by the key's own hash within the store (primary key (store_id, key_hash)), so
  // a key stored before stores existed is still found.
  const keyHash = idempotencyKeyHash(sent);
  const key = `${currentStoreId() ?? ''}\n${sent}`;
  if (inFlight.has(key)) throw inUse();
  inFlight.add(key);
  try {
    const stored = await storedAnswer(db, key, keyHash, onPostgres);
    const keys = answerKeys(sent, principal);
    const hash = requestTag(keys, requestHash(request.method, request.url, request.body));
    if (!stored) {
      request.idempotencyClaim = { principal, key, keyHash, hash, keys };
      return undefined;
    }
    if (stored.principal !== principal) {
      throw new ApiError(
        'idempotency_key_reused',
        'This Idempotency-Key was already used by another API key or administrator in the last 24 hours. Use a new key for a new request; nothing was written.',
        [{ param: 'header.Idempotency-Key', message: 'was used by another credential' }],
      );
    }
    if (stored.request_hash !== hash) {
      throw new ApiError(
        'idempotency_key_reused',
        'This Idempotency-Key was already used with another request (method, path or body) in the last 24 hours. Use a new key for a new request; nothing was written.',
        [{ param: 'header.Idempotency-Key', message: 'was used with another request' }],
      );
    }
    // Same key, principal and request: the keys are the ones that sealed it (a row altered in the
    // database fails to open, a 500, rather than replaying something else).
    const body = openAnswer(keys, stored.response_status, stored.response_type, stored.response_body);
    return {
      replay: () => {
        reply.code(stored.response_status).header(REPLAYED_HEADER, 'true');
        if (stored.response_type) reply.type(stored.response_type);
        return reply.send(body);
      },
    };
  } finally {
    // Only a key this request goes on to write under stays held.
    if (!request.idempotencyClaim) inFlight.delete(key);
  }
}

/** The live answer stored under `key`, after taking its lock (another process may hold it: 409). */
async function storedAnswer(db: Kysely<Database>, key: string, keyHash: string, onPostgres: boolean) {
  // Another process: its transaction holds the lock until it commits (answer stored) or ends.
  if (onPostgres) {
    const [k1, k2] = lockKeys(key);
    const { rows } = await sql<{ locked: boolean }>`SELECT pg_try_advisory_xact_lock(${k1}::int, ${k2}::int) AS locked`.execute(db);
    if (!rows[0]?.locked) throw inUse();
  }
  const stored = await db
    .selectFrom('idempotency_keys')
    .select(['principal', 'request_hash', 'response_status', 'response_type', 'response_body'])
    .where(ownStoreIs('store_id'))
    .where('key_hash', '=', keyHash)
    .where('created_at', '>', sql<string>`now() - ${`${IDEMPOTENCY_KEY_TTL_MS} milliseconds`}::interval`)
    .executeTakeFirst();
  return stored;
}

/** Whether `payload` is an answer that can be stored (not a stream). */
export function isStorableAnswer(payload: unknown): payload is string | Buffer | null | undefined {
  return typeof payload === 'string' || payload === null || payload === undefined || Buffer.isBuffer(payload);
}

/** Stores the answer of `claim`; run inside the request's transaction, just before its commit. */
export async function storeIdempotentAnswer(
  db: Kysely<Database>,
  claim: IdempotencyClaim,
  request: FastifyRequest,
  reply: FastifyReply,
  payload: string | Buffer | null | undefined,
): Promise<void> {
  const header = reply.getHeader('content-type');
  const type = typeof header === 'string' ? header : null;
  const body = payload === null || payload === undefined ? '' : payload.toString();
  const row = {
    key_hash: claim.keyHash,
    principal: claim.principal,
    request_hash: claim.hash,
    method: request.method,
    path: request.url,
    response_status: reply.statusCode,
    response_type: type,
    response_body: sealAnswer(claim.keys, reply.statusCode, type, body),
    created_at: sql<string>`now()`,
  };
  // An expired row of the key (older than 24 h, not yet pruned) is replaced.
  const written = await db
    .insertInto('idempotency_keys')
    .values({ store_id: ownStore(), ...row })
    .onConflict((oc) =>
      oc
        .columns(['store_id', 'key_hash'])
        .doUpdateSet({ ...row, created_at: sql<string>`excluded.created_at` })
        .where('idempotency_keys.created_at', '<=', sql<string>`now() - ${`${IDEMPOTENCY_KEY_TTL_MS} milliseconds`}::interval`),
    )
    .returning('key_hash')
    .executeTakeFirst();
  // A live answer appeared under our claim: only a second process without the lock (PGlite shared
  // by two processes, which the data directory lock forbids) could do that. Write nothing.
  if (!written) throw inUse();
}

/** Frees the key this request claimed in this process (its transaction has ended). */
export function releaseIdempotencyClaim(request: FastifyRequest): void {
  const claim = request.idempotencyClaim;
  if (!claim) return;
  request.idempotencyClaim = undefined;
  inFlight.delete(claim.key);
}
