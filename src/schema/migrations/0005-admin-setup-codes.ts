/**
 * One-time setup codes: while no administrator exists, a starting server issues a random code and
 * prints a link with it; the dashboard's setup page trades it for the first administrator. Only the
 * code's SHA-256 is stored. In the database (not in process memory) so that any process of a
 * deployment accepts the link another one printed.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE admin_setup_codes (
      code_hash text PRIMARY KEY,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      used_at timestamptz
    );
  `,
  );
}
