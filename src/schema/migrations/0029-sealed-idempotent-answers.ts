/**
 * Stored idempotent answers are sealed (decision 0040): the table keeps the SHA-256 of the
 * Idempotency-Key instead of the key, an HMAC of the request's hash, and the answer encrypted with
 * AES-256-GCM under keys derived from the key and its principal (admin/idempotency/sealed-answer.ts).
 * Rows written before (at most 24 h of answers, still replayable) are converted in place rather than
 * dropped, so a retry that spans the upgrade still replays instead of writing twice: their key is in
 * the row, so they are sealed exactly as a new answer would be, then the clear key column is dropped.
 *
 * The sealing below is the format v1 of sealed-answer.ts as it was when this migration shipped,
 * frozen here (decision 0041): a migration that called today's application code would seal in a
 * later format, or fail, when that code changes. Application code opens v1 for as long as it can
 * replay rows this migration wrote (test/api/admin-idempotency.test.ts seals here and opens there).
 */
import { createCipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

/** Format v1 of a sealed answer: HKDF-SHA256 keys, AES-256-GCM with a 12-byte nonce and a 16-byte tag. */
const V1 = { prefix: 'v1:', hkdfInfo: 'store-api idempotent answer v1', nonceBytes: 12, tagBytes: 16 } as const;

/** A row as the table held it before this migration: the key, the request's hash and the answer in clear. */
export interface OldRow {
  idempotency_key: string;
  principal: string;
  request_hash: string;
  response_status: number;
  response_type: string | null;
  response_body: string;
}

/** What replaces a row's clear Idempotency-Key, request hash and answer body (format v1). */
export function sealRowV1(row: OldRow): { keyHash: string; requestTag: string; sealedBody: string } {
  const okm = Buffer.from(hkdfSync('sha256', Buffer.from(row.idempotency_key, 'utf8'), Buffer.from(row.principal, 'utf8'), V1.hkdfInfo, 64));
  const seal = okm.subarray(0, 32);
  const mac = okm.subarray(32);
  const nonce = randomBytes(V1.nonceBytes);
  const cipher = createCipheriv('aes-256-gcm', seal, nonce, { authTagLength: V1.tagBytes });
  // Bound to the status and content type, which stay in clear.
  cipher.setAAD(Buffer.from(`${row.response_status}\n${row.response_type ?? ''}`, 'utf8'));
  const sealed = Buffer.concat([nonce, cipher.update(row.response_body, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return {
    keyHash: createHash('sha256').update(row.idempotency_key, 'utf8').digest('hex'),
    requestTag: createHmac('sha256', mac).update(row.request_hash, 'utf8').digest('hex'),
    sealedBody: V1.prefix + sealed.toString('base64'),
  };
}

const BATCH = 500;

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(db, 'ALTER TABLE idempotency_keys ADD COLUMN key_hash text;');
  for (;;) {
    const { rows } = await sql<OldRow>`
      SELECT idempotency_key, principal, request_hash, response_status, response_type, response_body
      FROM idempotency_keys WHERE key_hash IS NULL LIMIT ${BATCH}
    `.execute(db);
    for (const row of rows) {
      const sealed = sealRowV1(row);
      await sql`
        UPDATE idempotency_keys
        SET key_hash = ${sealed.keyHash}, request_hash = ${sealed.requestTag}, response_body = ${sealed.sealedBody}
        WHERE idempotency_key = ${row.idempotency_key}
      `.execute(db);
    }
    if (rows.length < BATCH) break;
  }
  await executeScript(
    db,
    `
    ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
    ALTER TABLE idempotency_keys DROP COLUMN idempotency_key;
    ALTER TABLE idempotency_keys ALTER COLUMN key_hash SET NOT NULL, ADD PRIMARY KEY (key_hash);
  `,
  );
}
