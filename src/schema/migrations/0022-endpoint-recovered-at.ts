/**
 * When an endpoint's breaker last closed on a success after a pause (decision 0029): the first
 * attempts of deliveries whose events were written before that moment — the backlog of the pause —
 * that the receiver answers with a refusal do not count toward pausing it again.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(db, 'ALTER TABLE webhook_endpoints ADD COLUMN recovered_at timestamptz;');
}
