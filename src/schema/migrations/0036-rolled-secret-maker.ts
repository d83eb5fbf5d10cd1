/**
 * A rolled-out secret acts with no more than the maker it had (issue 40, decision 0026 amended): rolling
 * makes the roller the key's maker, and the old secret, still valid for the overlap, used to act
 * with the roller's power, though it may be exactly the secret the roll was meant to retire (a
 * removed administrator's). `previous_made_by_admin_id` / `previous_made_by_email` keep the maker
 * of the secret that was rolled out; the token look-up gives that secret the weaker of the two
 * makers' powers now (a removed one: no admin and no write power). NULL id: the operator made it,
 * or it was rolled before this migration (the roller's power, as before).
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE api_tokens ADD COLUMN previous_made_by_admin_id uuid;
    ALTER TABLE api_tokens ADD COLUMN previous_made_by_email text;
  `,
  );
}
