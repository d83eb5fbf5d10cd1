/**
 * Test deliveries (decision 0020): an administrator sends an example event of any type to one
 * endpoint. The event is kept in the log like a ping, marked `test`, so it is signed and delivered
 * like a real one but never reaches the events feed, the fan-out to other endpoints or a replay; the
 * delivery is marked `test` too, so lists and the delivery page can say so without a join.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    ALTER TABLE events ADD COLUMN test boolean NOT NULL DEFAULT false;
    ALTER TABLE webhook_deliveries ADD COLUMN test boolean NOT NULL DEFAULT false;
  `,
  );
}
