/**
 * src/README.md's "Adding a resource", done by a test: a scratch `gadgets` resource, its declaration
 * (test/fixtures/gadgets/gadget.resource.ts) added to RESOURCES and its migration
 * (test/fixtures/gadgets/0099-gadgets.ts) run, and nothing else. It must then be first-class
 * everywhere: its list, single GET, export and snapshot; its events in the feed and the webhook
 * catalogue with their example; its stored document (kept by the derived triggers and covered by the
 * documents check); cache invalidation by the cache-notify trigger (another connection's write, on
 * PostgreSQL where the page cache runs); the dashboard's lists; the client's generated typed member;
 * the sync tool's mirror table.
 *
 * The declaration is registered for this file only: vi.mock adds it to resources/resource-list.ts in
 * this test's module graph, so the production registry (and every other test file) never holds it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { renderApiTypes, renderResourceClients, renderResources } from '../../packages/client/scripts/generate-api-types.ts';
import { migrateMirror } from '../../packages/sync/src/mirror/mirror-migrations.ts';
import { applyRecords, readRecords } from '../../packages/sync/src/mirror/mirror.repository.ts';
import { syncResourceOf, type ApiResourceEntry, type MirrorRecord } from '../../packages/sync/src/sync-resources.ts';
import { listPageCacheOf } from '../../src/api/list-page-cache.ts';
import { homeStore } from '../../src/stores/store.service.ts';
import { storeGeneration } from '../../src/db/read-cache-signals.ts';
import { RESOURCES } from '../../src/resources/registry.ts';
import { checkStoreDocuments, rebuildStoreDocuments, storeTables } from '../../src/resources/store-schema.ts';
import { up as migrateGadgets } from '../fixtures/gadgets/0099-gadgets.ts';
import { gadgetResource } from '../fixtures/gadgets/gadget.resource.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { backends } from '../helpers/test-database.ts';

vi.mock('../../src/resources/resource-list.ts', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/resources/resource-list.ts')>();
  const { gadgetResource: gadgets } = await import('../fixtures/gadgets/gadget.resource.ts');
  return { RESOURCES: [...original.RESOURCES, gadgets] };
});

const REPO = join(dirname(fileURLToPath(import.meta.url)), '../..');
type Json = Record<string, any>;

describe.each(backends)('a scratch resource added by the recipe (%s)', (backend) => {
  let t: TestApp;
  let read: { authorization: string };
  let admin: { authorization: string };
  let document: Json;
  let created: Json;
  let baseUrl: string;
  let tmp: string;

  beforeAll(async () => {
    t = await buildTestApp(backend, { RATE_LIMIT_STANDARD: '1000000', RATE_LIMIT_EXPORT: '1000000' });
    await migrateGadgets(t.ctx.database.db as never);
    read = await t.auth(['gadgets:read' as never]);
    admin = await t.auth(['admin']);
    document = (await t.app.inject({ url: '/api/v1/openapi.json' })).json();
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    mkdirSync(join(REPO, 'tmp'), { recursive: true });
    tmp = mkdtempSync(join(REPO, 'tmp', 'scratch-resource-'));
    const res = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/gadgets',
      headers: admin,
      payload: { name: 'Atelier Lin', email: 'orders@atelier-lin.example', lead_time_days: 14 },
    });
    expect(res.statusCode, res.body).toBe(201);
    created = res.json().data;
  });
  afterAll(async () => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
    await t?.close();
  });

  it('is in this test registry only, through the one list', () => {
    expect(RESOURCES.map((r) => r.name)).toContain('gadgets');
    expect(storeTables()).toContain('gadgets');
  });

  it('has its list, single GET, export and snapshot, behind its own scope', async () => {
    const list = await t.app.inject({ url: '/api/v1/gadgets', headers: read });
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json().data).toEqual([created]);
    expect(list.json().pagination).toMatchObject({ has_more: false });
    const one = await t.app.inject({ url: `/api/v1/gadgets/${created.id}`, headers: read });
    expect(one.json()).toEqual({ data: created });
    expect((await t.app.inject({ url: '/api/v1/gadgets/0190a000-0000-7000-8000-00000000ffff', headers: read })).statusCode).toBe(404);
    const exported = await t.app.inject({ url: '/api/v1/gadgets/export', headers: read });
    expect(exported.statusCode).toBe(200);
    expect(exported.headers['x-has-more']).toBe('false');
    expect(
      exported.body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([created]);
    const snapshot = await t.app.inject({ url: '/api/v1/gadgets/snapshot', headers: read });
    expect(snapshot.statusCode).toBe(200);
    expect(snapshot.headers['x-snapshot-cursor']).toEqual(expect.any(String));
    expect(
      snapshot.body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([created]);
    // Its filter: deactivated gadgets only with include_inactive=true.
    const patched = await t.app.inject({ method: 'PATCH', url: `/admin/api/v1/gadgets/${created.id}`, headers: admin, payload: { is_active: false } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect((await t.app.inject({ url: '/api/v1/gadgets', headers: read })).json().data).toEqual([]);
    const all = (await t.app.inject({ url: '/api/v1/gadgets?include_inactive=true', headers: read })).json().data;
    expect(all).toEqual([patched.json().data]);
    created = patched.json().data;
    // Another resource's scope does not read it.
    expect((await t.app.inject({ url: '/api/v1/gadgets', headers: await t.auth(['products:read']) })).statusCode).toBe(403);
  });

  it('appends its events with the record, seen by its scope only, and lists them for webhooks with their example', async () => {
    const feed = await t.app.inject({ url: '/api/v1/events?type=gadget.created&type=gadget.updated', headers: read });
    expect(feed.statusCode, feed.body).toBe(200);
    const events = feed.json().data as Json[];
    expect(events.map((e) => e.type)).toEqual(['gadget.created', 'gadget.updated']);
    expect(events.at(-1)!.data).toEqual(created);
    const others = await t.app.inject({ url: '/api/v1/events', headers: await t.auth(['products:read']) });
    expect((others.json().data as Json[]).filter((e) => e.type.startsWith('gadget.'))).toEqual([]);
    expect(document.webhooks['gadget.created'].post.requestBody.content['application/json'].example.data).toEqual(gadgetResource.example);
  });

  it('is in the OpenAPI document: its routes, its tag with its description, x-resources', () => {
    for (const path of ['/api/v1/gadgets', '/api/v1/gadgets/{id}', '/api/v1/gadgets/export', '/api/v1/gadgets/snapshot']) {
      expect(document.paths[path], path).toBeDefined();
    }
    expect(document.tags).toContainEqual({ name: 'Gadgets', description: 'Scratch records of the resource recipe test.' });
    expect(document['x-resources']).toContainEqual(
      expect.objectContaining({ name: 'gadgets', record: 'Gadget', events: ['gadget.created', 'gadget.updated'] }),
    );
  });

  it("is in the dashboard's lists: its scope and its event group", async () => {
    const { scopes, event_groups } = (await t.app.inject({ url: '/admin/api/v1/resources', headers: admin })).json().data;
    expect(scopes).toContainEqual({ value: 'gadgets:read', label: 'Gadgets', hint: 'read gadgets' });
    expect(event_groups).toContainEqual({ label: 'Gadgets', types: ['gadget.created', 'gadget.updated'] });
  });

  it('has a stored document, kept by its derived triggers and covered by the documents check', async () => {
    const db = t.ctx.database.db;
    const { rows } = await sql<{ doc: string }>`SELECT doc::text AS doc FROM gadgets WHERE id = ${created.id}`.execute(db);
    expect(JSON.parse(rows[0]!.doc)).toEqual(created);
    expect(await checkStoreDocuments(db)).toEqual([]);
    // A document left behind (written with the triggers' rebuild switched off) is found, by its kind.
    await db.transaction().execute(async (trx) => {
      await sql`SELECT set_config('store_api.rebuilding_documents', 'on', true)`.execute(trx);
      await sql`UPDATE gadgets SET doc = '{"stale":true}' WHERE id = ${created.id}`.execute(trx);
    });
    expect(await checkStoreDocuments(db)).toEqual([expect.objectContaining({ kind: 'gadget', id: created.id, stored: '{"stale":true}' })]);
    await rebuildStoreDocuments(db);
    expect(await checkStoreDocuments(db)).toEqual([]);
  });

  it('has the cache-notify trigger on its table', async () => {
    const { rows } = await sql<{ name: string }>`
      SELECT tgname AS name FROM pg_trigger WHERE tgrelid = 'gadgets'::regclass AND NOT tgisinternal ORDER BY 1`.execute(t.ctx.database.db);
    expect(rows.map((r) => r.name)).toEqual(expect.arrayContaining(['gadgets_notify_store_changed', 'gadgets_documents_update']));
  });

  it.runIf(backend === 'postgres')("a cached page of it is not served after another connection's write (the store_changed NOTIFY)", async () => {
    const db = t.ctx.database.db;
    expect(listPageCacheOf(db)).toBeDefined();
    const names = async () => ((await t.app.inject({ url: '/api/v1/gadgets?include_inactive=true', headers: read })).json().data as Json[]).map((s) => s.name);
    expect(await names()).toEqual(['Atelier Lin']);
    expect(await names()).toEqual(['Atelier Lin']); // now from the cache
    const storeOfDb = (await homeStore(db))!.id;
    const before = storeGeneration(db, storeOfDb);
    await sql`UPDATE gadgets SET name = 'renamed by SQL', last_modified = clock_timestamp() WHERE id = ${created.id}`.execute(db);
    // The NOTIFY names the writing connection's store: that store's generation moves.
    await vi.waitFor(() => expect(storeGeneration(db, storeOfDb)).not.toBe(before));
    expect(await names()).toEqual(['renamed by SQL']);
    created = (await t.app.inject({ url: `/api/v1/gadgets/${created.id}`, headers: read })).json().data;
  });

  it("gets a typed member in the generated client and a table in the sync tool's mirror", async () => {
    // What `npm run generate -w @store-api/client` writes for this registry, into a scratch folder.
    const clients = renderResourceClients(document, join(REPO, 'packages/client/src'));
    expect(clients).toContain(
      "readonly gadgets: ResourceWithGet<Schemas['Gadget'], QueryOf<'listGadgets'>, QueryOf<'exportGadgets'>> = new ResourceWithGet(this, 'gadgets');",
    );
    const types = await renderApiTypes(document);
    expect(types).toMatch(/\n {8}Gadget: \{/);
    expect(types).toContain('listGadgets: {');
    writeFileSync(join(tmp, 'resource-clients.ts'), clients);
    writeFileSync(join(tmp, 'api-types.ts'), types);
    writeFileSync(join(tmp, 'resources.ts'), renderResources(document));
    const { ResourceClients } = await import(join(tmp, 'resource-clients.ts'));
    const client = new ResourceClients({ baseUrl, token: read.authorization.slice('Bearer '.length) });
    expect(await client.gadgets.get(created.id)).toEqual(created);
    expect(await client.resource('gadgets').export({ include_inactive: true }).toArray()).toEqual([created]);

    // The sync tool's view of it, from the generated resource list, mirrored into its own table.
    const { RESOURCES: generated } = (await import(join(tmp, 'resources.ts'))) as { RESOURCES: readonly ApiResourceEntry[] };
    const mirrored = syncResourceOf(generated.find((r) => r.name === 'gadgets')!);
    expect(mirrored).toMatchObject({ name: 'gadgets', path: 'gadgets', key: 'id', query: { include_inactive: 'true' } });
    expect(mirrored.columns).toEqual({ name: 'text', email: 'text', lead_time_days: 'integer', is_active: 'boolean', created_at: 'text', version: 'integer' });
    const db = t.ctx.database.db;
    await migrateMirror(db as never, [mirrored]);
    const records = (await client.gadgets.list({ include_inactive: true })).data as MirrorRecord[];
    expect(await applyRecords(db as never, mirrored, records)).toEqual([created.id]);
    const held: MirrorRecord[] = [];
    for await (const record of readRecords(db as never, mirrored)) held.push(record);
    expect(held).toEqual([created]);
    const { rows } = await sql<{ name: string; lead_time_days: number }>`SELECT name, lead_time_days FROM store_mirror.gadgets`.execute(db);
    expect(rows).toEqual([{ name: created.name, lead_time_days: 14 }]);
  });
});
