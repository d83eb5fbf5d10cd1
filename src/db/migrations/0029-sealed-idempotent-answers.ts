/**
 * Stored idempotent answers are sealed (decision 0040): the table keeps the SHA-256 of the
 * Idempotency-Key instead of the key, an HMAC of the request's hash, and the answer encrypted with
 * AES-256-GCM under keys derived from the key and its principal (admin/idempotency/sealed-answer.ts).
 * Rows written before (at most 24 h of answers, still replayable) are converted in place rather than
 * dropped, so a retry that spans the upgrade still replays instead of writing twice: their key is in
 * the row, so they are sealed exactly as a new answer would be, then the clear key column is dropped.
 */
import { sql, type Kysely } from 'kysely';
import { executeScript } from '../execute-script.ts';
import { answerKeys, idempotencyKeyHash, requestTag, sealAnswer } from '../../admin/idempotency/sealed-answer.ts';

const BATCH = 500;

interface OldRow {
  idempotency_key: string;
  principal: string;
  request_hash: string;
  response_status: number;
  response_type: string | null;
  response_body: string;
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(db, 'ALTER TABLE idempotency_keys ADD COLUMN key_hash text;');
  for (;;) {
    const { rows } = await sql<OldRow>`
      SELECT idempotency_key, principal, request_hash, response_status, response_type, response_body
      FROM idempotency_keys WHERE key_hash IS NULL LIMIT ${BATCH}
    `.execute(db);
    for (const row of rows) {
      const keys = answerKeys(row.idempotency_key, row.principal);
      await sql`
        UPDATE idempotency_keys
        SET key_hash = ${idempotencyKeyHash(row.idempotency_key)},
            request_hash = ${requestTag(keys, row.request_hash)},
            response_body = ${sealAnswer(keys, row.response_status, row.response_type, row.response_body)}
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
