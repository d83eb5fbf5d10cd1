/**
 * Idempotency keys hold answers only (decision 0027): a key's row is written with its answer in the
 * write's own transaction, so there is no "in progress" row any more (the claim is a lock that ends
 * with its transaction). Claims left by an older version are dropped (their key is free again, as
 * their lease would have made it). A key belongs to one principal: the first to use it; another
 * principal sending it is refused, so the key alone is the primary key (of a key held by several
 * principals under the old rule, the oldest row is kept).
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    DELETE FROM idempotency_keys WHERE state <> 'done' OR response_status IS NULL;
    DELETE FROM idempotency_keys k USING idempotency_keys o WHERE o.idempotency_key = k.idempotency_key AND (o.created_at, o.principal) < (k.created_at, k.principal);
    ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey, ADD PRIMARY KEY (idempotency_key), DROP COLUMN state, DROP COLUMN locked_until, ALTER COLUMN response_status SET NOT NULL;
    UPDATE idempotency_keys SET response_body = '' WHERE response_body IS NULL;
    ALTER TABLE idempotency_keys ALTER COLUMN response_body SET NOT NULL;
  `,
  );
}
