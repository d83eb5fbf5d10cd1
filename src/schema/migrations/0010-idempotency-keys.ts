/**
 * Idempotency keys of the admin API (decision 0013): per principal (admin token or administrator)
 * and key, the hash of the first request and, once it has been answered, its response to replay.
 * Kept 24 h, pruned by the retention pruner.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE idempotency_keys (
      principal text NOT NULL,
      idempotency_key text NOT NULL,
      request_hash text NOT NULL,
      method text NOT NULL,
      path text NOT NULL,
      state text NOT NULL CHECK (state IN ('in_progress', 'done')),
      response_status integer,
      response_type text,
      response_body text,
      created_at timestamptz NOT NULL,
      locked_until timestamptz NOT NULL,
      PRIMARY KEY (principal, idempotency_key)
    );
    CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
  `,
  );
}
