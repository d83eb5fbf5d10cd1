/**
 * A database of the release before administrators per store (every migration up to 0032) with two
 * stores, an owner and a viewer, the deployment-wide second-factor requirement on, an open
 * invitation and a key the viewer made, upgraded in place by migration 0033 (decision 0051,
 * "Administrators per store"): every administrator is a member of the home store with the role
 * they had, and signs in there; the requirement is the home store's; the invitation joins the home
 * store; the viewer's key still reads and writes nothing.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { pino } from 'pino';
import { backends, emptyPostgresDatabase } from '../helpers/test-database.ts';
import { openDatabase, type DatabaseHandle } from '../../src/db/database.ts';
import { loadConfig } from '../../src/config/config.ts';
import { buildApp, type App } from '../../src/app.ts';
import { migrateToLatest, migrateUpTo, migrationNames } from '../../src/schema/migrate.ts';
import { SCOPES, TOKEN_PREFIX, hashToken } from '../../src/tokens/token.service.ts';
import { hashPassword } from '../../src/admin/sessions/admin-user.service.ts';
import { useDefaultStoreScope } from '../../src/stores/store.service.ts';
import { asPlatform } from '../../src/db/store-scope.ts';

const PREVIOUS_RELEASE = '0032-platform-audit-log';
const PASSWORD = 'correct horse battery';

async function emptyDatabase(backend: string): Promise<{ database: DatabaseHandle; drop: () => Promise<void> }> {
  if (backend === 'pglite') {
    const database = await openDatabase({});
    return { database, drop: () => database.close() };
  }
  const scratch = await emptyPostgresDatabase('upgrademembers');
  const database = await openDatabase({ databaseUrl: scratch.url, poolSize: 4 });
  return {
    database,
    drop: async () => {
      await database.close();
      await scratch.drop();
    },
  };
}

describe.each(backends)('upgrading to administrators per store in place (%s)', (backend) => {
  let database: DatabaseHandle;
  let drop: () => Promise<void>;
  let app: App;
  let home: string;
  let other: string;
  let ownerId: string;
  let viewerId: string;
  let viewerKey: string;
  const invitationCode = randomBytes(32).toString('base64url');

  beforeAll(async () => {
    ({ database, drop } = await emptyDatabase(backend));
    const names = migrationNames();
    expect(names[names.indexOf(PREVIOUS_RELEASE) + 1]).toBe('0033-admin-memberships');
    await migrateUpTo(database.db, PREVIOUS_RELEASE);
    const db = database.db;
    // Written as the previous release wrote it (its statements, its schema).
    home = (await sql<{ id: string }>`SELECT id FROM stores ORDER BY created_at, id LIMIT 1`.execute(db)).rows[0]!.id;
    other = randomUUID();
    await sql`INSERT INTO stores (id, name, status, created_at) VALUES (${other}::uuid, 'Later shop', 'active', now() + interval '1 second')`.execute(db);
    ownerId = randomUUID();
    viewerId = randomUUID();
    const hash = await hashPassword(PASSWORD);
    await sql`
      INSERT INTO admin_users (id, email, password_hash, role, created_at, password_changed_at) VALUES
        (${ownerId}::uuid, 'owner@example.com', ${hash}, 'owner', now(), now()),
        (${viewerId}::uuid, 'viewer@example.com', ${hash}, 'viewer', now(), now())
    `.execute(db);
    await sql`UPDATE admin_settings SET require_second_factor = true, updated_by = 'owner@example.com', updated_at = now()`.execute(db);
    await sql`
      INSERT INTO admin_links (id, code_hash, purpose, email, role, created_by, created_at, expires_at)
      VALUES (gen_random_uuid(), ${createHash('sha256').update(invitationCode).digest('hex')}, 'invitation', 'new@example.com', 'admin',
              'owner@example.com', now(), now() + interval '1 day')
    `.execute(db);
    viewerKey = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    await asPlatform(() =>
      sql`
        INSERT INTO api_tokens (store_id, id, name, prefix, token_hash, scopes, created_at, made_by_admin_id, made_by_email)
        VALUES (${home}::uuid, gen_random_uuid(), 'viewer key', ${viewerKey.slice(0, 12)}, ${hashToken(viewerKey)}, ${[...SCOPES]}::text[], now(),
                ${viewerId}::uuid, 'viewer@example.com')
      `.execute(db),
    );

    await migrateToLatest(db);
    await useDefaultStoreScope(database);
    app = await buildApp({ config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false' }), database, logger: pino({ level: 'silent' }) });
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await drop?.();
  });

  it('makes every administrator a member of the home store with the role they had, and the requirement the home store’s', async () => {
    const db = database.db;
    const members = await sql<{ admin_user_id: string; store_id: string; role: string }>`
      SELECT admin_user_id, store_id, role FROM admin_memberships ORDER BY role
    `.execute(db);
    expect(members.rows).toEqual([
      { admin_user_id: ownerId, store_id: home, role: 'owner' },
      { admin_user_id: viewerId, store_id: home, role: 'viewer' },
    ]);
    const settings = await sql<{ store_id: string; require_second_factor: boolean }>`
      SELECT store_id, require_second_factor FROM store_admin_settings
    `.execute(db);
    expect(settings.rows).toEqual([{ store_id: home, require_second_factor: true }]);
  });

  it('signs the administrators in to the home store with their roles; the later store is none of theirs', async () => {
    const signIn = await app.inject({ method: 'POST', url: '/admin/session', payload: { email: 'owner@example.com', password: PASSWORD } });
    expect(signIn.statusCode, signIn.body).toBe(200);
    expect(signIn.json().data).toMatchObject({ role: 'owner', store: { id: home }, second_factor: { enabled: false, required: true } });
    const viewer = await app.inject({ method: 'POST', url: '/admin/session', payload: { email: 'viewer@example.com', password: PASSWORD } });
    expect(viewer.statusCode, viewer.body).toBe(200);
    expect(viewer.json().data).toMatchObject({ role: 'viewer', store: { id: home } });
    const cookie = String(viewer.headers['set-cookie']).split(';')[0]!;
    const csrf = viewer.json().data.csrf_token;
    const moved = await app.inject({
      method: 'POST',
      url: '/admin/api/v1/session/store',
      headers: { cookie, 'x-csrf-token': csrf },
      payload: { store_id: other },
    });
    expect(moved.statusCode).toBe(404);
  });

  it("keeps the viewer's key reading and writing nothing", async () => {
    const read = await app.inject({ url: '/admin/api/v1/tokens', headers: { authorization: `Bearer ${viewerKey}` } });
    expect(read.statusCode, read.body).toBe(200);
    const write = await app.inject({ method: 'POST', url: '/admin/api/v1/tokens', headers: { authorization: `Bearer ${viewerKey}` }, payload: { name: 'x' } });
    expect(write.statusCode).toBe(403);
  });

  it('an invitation of the previous release joins the home store', async () => {
    const joined = await app.inject({ method: 'POST', url: '/admin/links/use', payload: { code: invitationCode, password: PASSWORD } });
    expect(joined.statusCode, joined.body).toBe(200);
    expect(joined.json().data).toMatchObject({ email: 'new@example.com', role: 'admin', store: { id: home } });
  });
});
