/**
 * The snapshot's promise (src/db/snapshot.ts): every record is in the stream or after its end
 * cursor (X-Snapshot-Cursor). It holds only if the end cursor is the horizon the stream itself read
 * below. An end cursor from a second read of the horizon passes the other snapshot tests, yet a
 * record committed between the two reads would be neither in the stream (its key is at or above the
 * stream's horizon) nor after the cursor (below the later one). Here a writer commits exactly in
 * that window: the statement observer (db/store-scope.ts `observeStatements`, awaited after each
 * Kysely statement) holds the request right after its horizon statement until the write committed.
 *
 * PostgreSQL only: the observer runs while the statement's connection is still held, and the
 * embedded database's one connection would make the writer wait for it (a deadlock, not a window).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { startClientTestServer, type ClientTestServer } from '../client/client-test-kit.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { observeStatements } from '../../src/db/store-scope.ts';
import { createCustomer } from '../../src/customers/customer.service.ts';

const postgres = Boolean(process.env.TEST_DATABASE_URL);

describe.runIf(postgres)('snapshot end cursor against a write committed right after its horizon was read (postgres)', () => {
  let s: ClientTestServer;
  beforeAll(async () => {
    s = await startClientTestServer('postgres', UNLIMITED);
    await sql`
      INSERT INTO customers (id, name, phone, email, city, is_active, created_at, last_modified)
      SELECT md5('w' || g)::uuid, 'Customer ' || g, NULL, NULL, 'Mombasa', true, now() - interval '1 hour', now() - interval '1 hour'
      FROM generate_series(1, 300) g`.execute(s.t.database.db);
  }, 240_000);
  afterAll(async () => {
    observeStatements(undefined);
    await s?.close();
  });

  const get = (path: string) => fetch(`${s.baseUrl}/api/v1/${path}`, { headers: { authorization: `Bearer ${s.token}` } });
  const ids = (text: string) =>
    text
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => (JSON.parse(l) as { id: string }).id);

  it('has the record in the stream or after X-Snapshot-Cursor', async () => {
    let created: Promise<{ id: string }> | undefined;
    observeStatements((text) => {
      // The first read of the read horizon (write-clock.ts: the lock table) after arming: the
      // snapshot's own. The write commits before the request's next statement starts.
      if (created || !text.includes('pg_locks')) return;
      created = createCustomer(s.t.database.db, { name: 'Committed in the window' });
      return created.then(() => undefined);
    });
    let response: Response;
    try {
      response = await get('customers/snapshot');
    } finally {
      observeStatements(undefined);
    }
    expect(response.status).toBe(200);
    expect(created).toBeDefined();
    const { id } = await created!;
    const streamed = ids(await response.text());
    const end = response.headers.get('x-snapshot-cursor')!;
    const after = ids(await (await get(`customers/export?cursor=${encodeURIComponent(end)}&limit=500`)).text());
    expect(streamed.length).toBe(300);
    expect([...streamed, ...after]).toContain(id);
  });
});
