/**
 * Sessions an administrator can see and end (decision 0061): each dashboard session gets
 *  - `id`: a random public id the admin API names it by (the cookie's value stays secret, and its
 *    hash, the primary key, is never shown either);
 *  - `client_ip`: the address of the request that last touched it (the sign-in's at first);
 *  - `last_seen_at`: when it was last used, written at most once a minute per session, so a busy
 *    dashboard costs no write per request.
 * Sessions that already exist get an id and count as last seen when they began.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE admin_sessions ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
    ALTER TABLE admin_sessions ADD COLUMN client_ip text;
    ALTER TABLE admin_sessions ADD COLUMN last_seen_at timestamptz;
    UPDATE admin_sessions SET last_seen_at = created_at;
    ALTER TABLE admin_sessions ALTER COLUMN last_seen_at SET NOT NULL;
    CREATE UNIQUE INDEX admin_sessions_id_idx ON admin_sessions (id);
  `,
  );
}
