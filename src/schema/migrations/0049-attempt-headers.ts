/**
 * An attempt keeps the headers it sent and the ones its receiver answered with, so the
 * dashboard and the admin API show what was sent: `request_headers` with credential values
 * redacted (an endpoint's extra headers, its OAuth bearer token), `response_headers` bounded in
 * number and length (webhook-http-client.ts). Both null on attempts made before, on abandoned
 * attempts and where nothing was sent or answered. `json`, not `jsonb`: written with every attempt
 * and only ever read back whole, so the text is kept as validated rather than converted.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE webhook_attempts ADD COLUMN request_headers json;
    ALTER TABLE webhook_attempts ADD COLUMN response_headers json;
  `,
  );
}
