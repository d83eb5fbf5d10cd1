/**
 * A secret acts for no more than the person who was shown it (decision 0026 amended).
 * Rolling makes the roller the key's maker, and the old secret, still valid for the overlap, used to
 * act with the roller's power, though it may be exactly the secret the roll was meant to retire (a
 * removed administrator's); a transfer gave a removed maker's unrotated secret the new maker's
 * power. Now:
 *  - `shown_to_admin_id` / `shown_to_email`: who was shown the current secret when that is not the
 *    key's maker: set by a transfer (to the maker before it) and cleared by a roll (the roller, now
 *    the maker, saw the new secret). NULL: the maker saw it (every key before this migration).
 *  - `previous_shown_to_admin_id` / `previous_shown_to_email`: who was shown the rolled-out secret;
 *    NULL: the operator (the CLI), or a roll before this migration (the roller, as before).
 * The token look-up gives a secret the weaker of its key's maker's power and its viewer's, both now
 * (a removed one: no admin and no write power; the operator bounds nothing). No row is rewritten.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE api_tokens ADD COLUMN shown_to_admin_id uuid;
    ALTER TABLE api_tokens ADD COLUMN shown_to_email text;
    ALTER TABLE api_tokens ADD COLUMN previous_shown_to_admin_id uuid;
    ALTER TABLE api_tokens ADD COLUMN previous_shown_to_email text;
  `,
  );
}
