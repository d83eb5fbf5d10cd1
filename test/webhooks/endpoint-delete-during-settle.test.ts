/**
 * Deleting an endpoint while a worker records an attempt of one of its deliveries (decision 0044:
 * webhook_attempts has no foreign key to its delivery, so the deletion itself must leave no attempt
 * behind). The settle is a transaction of another connection that has moved the delivery under its
 * row lock and inserted the attempt, not committed yet; the deletion must wait for it, then delete
 * the attempt with its delivery. Before, the deletion deleted the attempts it could see, then its
 * delete of the deliveries waited for the settle and failed on the attempt committed meanwhile.
 * PostgreSQL only: two connections at once (PGlite has one).
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { deleteEndpointCascade } from '../../src/webhooks/webhook-endpoint.repository.ts';

describe.each(backends)('deleting an endpoint during a settle (%s)', (backend) => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });

  afterAll(async () => {
    await database?.close();
  });

  it.runIf(backend === 'postgres')('waits for the attempt being recorded and deletes it with its delivery', async () => {
    const db = database.db;
    const endpointId = randomUUID();
    const eventId = randomUUID();
    const deliveryId = randomUUID();
    await sql`INSERT INTO webhook_endpoints (id, url, secret, event_types, enabled, created_at, updated_at)
      VALUES (${endpointId}, 'https://receiver.example/hook', 'whsec_dGVzdA==', '{}', true, now(), now())`.execute(db);
    await sql`INSERT INTO events (id, type, resource_type, resource_id, data, created_at)
      VALUES (${eventId}, 'product.updated', 'product', 'p1', '{}', now())`.execute(db);
    await sql`INSERT INTO webhook_deliveries (id, event_id, event_type, endpoint_id, status, next_attempt_at, locked_by, locked_at, locked_until, created_at, updated_at)
      VALUES (${deliveryId}, ${eventId}, 'product.updated', ${endpointId}, 'pending', now(), 'worker-1', now(), now() + interval '1 minute', now(), now())`.execute(
      db,
    );

    const worker = new pg.Client({ connectionString: database.url });
    await worker.connect();
    try {
      const { rows } = await worker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const workerPid = rows[0]!.pid;
      // The settle, as delivery-queue.ts writes it: the delivery moved under its lock, its attempt recorded.
      await worker.query('BEGIN');
      await worker.query(
        `UPDATE webhook_deliveries SET status = 'succeeded', next_attempt_at = NULL, attempt_count = 1, locked_by = NULL, locked_at = NULL,
           locked_until = NULL, last_status_code = 200, succeeded_at = now(), updated_at = now() WHERE id = $1 AND locked_by = 'worker-1'`,
        [deliveryId],
      );
      await worker.query(
        `INSERT INTO webhook_attempts (id, delivery_id, attempt_number, started_at, duration_ms, status_code, outcome)
         VALUES (gen_random_uuid(), $1, 1, now(), 3, 200, 'success')`,
        [deliveryId],
      );

      const deletion = deleteEndpointCascade(db, endpointId);
      const outcome = deletion.then(
        (counts) => ({ counts }),
        (error: unknown) => ({ error }),
      );
      // The deletion reaches the settle's lock and waits there (a condition, polled: no interval slept through).
      for (;;) {
        const { rows: blocked } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${workerPid}::int = ANY(pg_blocking_pids(pid))
        `.execute(db);
        if (blocked[0]!.n > 0) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      await worker.query('COMMIT');

      expect(await outcome).toEqual({ counts: { succeeded: 1 } });
      const left = await sql<{ attempts: number; deliveries: number; endpoints: number }>`
        SELECT (SELECT count(*)::int FROM webhook_attempts WHERE delivery_id = ${deliveryId}::uuid) AS attempts,
               (SELECT count(*)::int FROM webhook_deliveries WHERE id = ${deliveryId}::uuid) AS deliveries,
               (SELECT count(*)::int FROM webhook_endpoints WHERE id = ${endpointId}::uuid) AS endpoints
      `.execute(db);
      expect(left.rows[0]).toEqual({ attempts: 0, deliveries: 0, endpoints: 0 });
    } finally {
      await worker.end();
    }
  });
});
