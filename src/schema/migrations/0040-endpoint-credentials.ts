/**
 * Endpoint credentials (decision 0058): a webhook endpoint may carry extra request headers, OAuth 2.0
 * client credentials and a client certificate for mutual TLS. `credentials` is what the admin API
 * shows of them (header names, token URL, client id, scope, the certificate's subject and expiry);
 * `credentials_sealed` is all of it, secrets included, encrypted with AES-256-GCM under
 * WEBHOOK_CREDENTIALS_KEY (webhooks/endpoint-credentials.ts): the only column the worker reads.
 * Both null for an endpoint without credentials. Nullable columns without a default: adding them
 * rewrites no row.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(db, 'ALTER TABLE webhook_endpoints ADD COLUMN credentials jsonb, ADD COLUMN credentials_sealed text;');
}
