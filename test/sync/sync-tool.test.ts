/**
 * The sync tool's parts against the real service: a resumable initial sync that never leaves half a
 * batch, the receiver's idempotent newest-wins apply, a reconcile across bulk-import ties, and the
 * CLI's one-line errors and verify exit codes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { backends, openTestDatabase } from '../helpers/test-database.ts';
import { freshMirror as freshMirrorOf } from './mirror-fixture.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';
import { importStockCsv } from '../../src/inventory/stock-import.ts';
import { revokeToken, createToken } from '../../src/tokens/token.service.ts';
import { signatureHeaders } from '../../src/webhooks/webhook-signing.ts';
import { PROJECT_ROOT } from '../production/process-helpers.ts';
import {
  clientStoreReader,
  handleWebhook,
  initialSync,
  mirrorMatches,
  reconcile,
  verifyMirror,
  webhookVerifier,
  SYNC_RESOURCES,
} from '../../packages/sync/src/index.ts';
import { applyRecordLines, applyRecords, readSyncState, countRecords } from '../../packages/sync/src/mirror/mirror.repository.ts';
import type { StoreReader } from '../../packages/sync/src/store-reader.ts';
import { StoreApiClient } from '../../packages/client/src/index.ts';

const SYNC_CLI = join(PROJECT_ROOT, 'packages/sync/bin/store-api-sync.js');
/** The CLI under test loads @store-api/client from its source too (the package's "source" export condition). */
const RUN_CLIENT_SOURCE = '--conditions=source';
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const products = SYNC_RESOURCES.find((r) => r.name === 'products')!;

describe.each(backends)('store-api-sync (%s)', (backend) => {
  let t: TestApp;
  let baseUrl: string;
  let token: string;
  const closers: { close(): Promise<void> }[] = [];

  const freshMirror = () => freshMirrorOf(backend, closers);

  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    token = (await t.auth()).authorization.slice('Bearer '.length);
    for (let i = 0; i < 12; i++) await aProductWithVariants(t.database.db, [3, 4]);
    for (let i = 0; i < 13; i++) await aProduct(t.database.db);
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c.close();
    await t?.close();
  });

  it('initial sync: a crash mid-export leaves whole batches only, and a second run resumes to an exact mirror', async () => {
    const mirror = await freshMirror();
    const reader = clientStoreReader({ baseUrl, token });
    // A reader that dies after 15 of the 25 product records: batches of 10 → one committed, five in hand.
    const crashing: StoreReader = {
      listPage: reader.listPage,
      async *exportRecords(resource, cursor) {
        let n = 0;
        for await (const record of reader.exportRecords(resource, cursor)) {
          if (resource.name === 'products' && ++n > 15) throw new Error('connection lost');
          yield record;
        }
      },
    };
    await expect(initialSync(mirror, crashing, [products], { batchSize: 10 })).rejects.toThrow('connection lost');
    const state = await readSyncState(mirror.db, 'products');
    expect(state).toMatchObject({ initial_done: false, initial_records: 10 });
    expect(await countRecords(mirror.db, products)).toBe(10);

    const resumed = await initialSync(mirror, reader, SYNC_RESOURCES, { batchSize: 10 });
    expect(resumed.get('products')).toBe(15); // only what was missing
    expect(mirrorMatches(await verifyMirror(mirror, reader, SYNC_RESOURCES))).toBe(true);
  });

  it('initial sync: the snapshot announces its total before the first batch, and every report carries it', async () => {
    const mirror = await freshMirror();
    const reports: { records: number; total: number | null; done: boolean }[] = [];
    await initialSync(mirror, clientStoreReader({ baseUrl, token }), [products], {
      batchSize: 4,
      onProgress: ({ records, total, done }) => reports.push({ records, total, done }),
    });
    const applied = reports.at(-1)!.records;
    expect(applied).toBeGreaterThan(8);
    expect(reports.length).toBeGreaterThan(2);
    // Known from the first report on: the count the snapshot's X-Total-Count gave.
    for (const report of reports) expect(report.total).toBe(applied);
    expect(reports.filter((r) => !r.done).map((r) => r.records)).toEqual(reports.filter((r) => !r.done).map((_, i) => 4 * (i + 1)));
  });

  it('mirror: the attribute views equal GET /api/v1/attributes walked to its end', async () => {
    const mirror = await freshMirror();
    await initialSync(mirror, clientStoreReader({ baseUrl, token }), [products]);
    const api: { key: string; variant_count: number; values: { value: string; variant_count: number }[] }[] = [];
    for await (const attribute of new StoreApiClient({ baseUrl, token }).iterateAttributes({ limit: 1 })) api.push(attribute);
    expect(api.length).toBeGreaterThan(1);
    const { rows: values } = await sql<{ key: string; value: string; variant_count: number }>`
      SELECT key, value, variant_count FROM store_mirror.attribute_values ORDER BY key COLLATE "C", value COLLATE "C"`.execute(mirror.db);
    expect(values).toEqual(api.flatMap((a) => a.values.map((v) => ({ key: a.key, ...v }))));
    const { rows: keys } = await sql<{ key: string; variant_count: number; value_count: number }>`
      SELECT key, variant_count, value_count FROM store_mirror.attributes ORDER BY key COLLATE "C"`.execute(mirror.db);
    expect(keys).toEqual(api.map((a) => ({ key: a.key, variant_count: a.variant_count, value_count: a.values.length })));
    // Joinable to the variants they describe.
    const { rows: joined } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM store_mirror.products p
      JOIN store_mirror.variant_attributes va ON va.product_id = p.id
      WHERE va.variant_id IN (SELECT v->>'id' FROM jsonb_array_elements(p.record->'variants') v)`.execute(mirror.db);
    expect(joined[0]!.n).toBe(api.reduce((n, a) => n + a.variant_count, 0));
  });

  it('receiver: newer payloads apply, older ones and redeliveries change nothing, a wrong secret is refused', async () => {
    const mirror = await freshMirror();
    const verify = webhookVerifier([SECRET]);
    const product = (await aProduct(t.database.db)) as unknown as Record<string, unknown> & { id: string; last_modified: string };
    const older = { ...product, name: 'old name', last_modified: '2026-01-01T00:00:00.000001Z' };
    const newer = { ...product, name: 'new name', last_modified: '2026-01-01T00:00:00.000002Z' };
    const deliver = (eventId: string, data: unknown, secret = SECRET) => {
      const body = JSON.stringify({ id: eventId, type: 'product.updated', created_at: '2026-01-01T00:00:00.000002Z', data });
      return handleWebhook(mirror, verify, body, signatureHeaders([secret], eventId, Math.floor(Date.now() / 1000), body));
    };
    const stored = async () =>
      (
        await sql<{
          name: string;
          last_modified: string;
        }>`SELECT name, record->>'last_modified' AS last_modified FROM store_mirror.products WHERE id = ${product.id}`.execute(mirror.db)
      ).rows[0];

    expect(await deliver('0192aaaa-0000-7000-8000-000000000002', newer)).toMatchObject({ status: 200, outcome: 'applied' });
    expect(await deliver('0192aaaa-0000-7000-8000-000000000001', older)).toMatchObject({ status: 200, outcome: 'stale' });
    expect(await deliver('0192aaaa-0000-7000-8000-000000000002', { ...newer, name: 'tampered' })).toMatchObject({ status: 200, outcome: 'duplicate' });
    expect(await stored()).toEqual({ name: 'new name', last_modified: newer.last_modified });
    const wrong = await deliver(
      '0192aaaa-0000-7000-8000-000000000003',
      { ...newer, name: 'forged', last_modified: '2027-01-01T00:00:00.000000Z' },
      'whsec_b3RoZXJzZWNyZXRvdGhlcnNlY3JldA==',
    );
    expect(wrong).toMatchObject({ status: 401, outcome: 'bad-signature' });
    expect(wrong.message).toMatch(/^webhook signature rejected .*check --secret/);
    expect(await stored()).toEqual({ name: 'new name', last_modified: newer.last_modified });
  });

  it('a batch holding several versions of one record keeps the newest, in whatever order they come', async () => {
    const mirror = await freshMirror();
    const product = (await aProduct(t.database.db)) as unknown as Record<string, unknown> & { id: string };
    const version = (name: string, micros: number) => ({ ...product, name, last_modified: `2026-02-01T00:00:00.00000${micros}Z` });
    const stored = async () =>
      (await sql<{ name: string }>`SELECT record->>'name' AS name FROM store_mirror.products WHERE id = ${product.id}`.execute(mirror.db)).rows[0]?.name;
    expect(await applyRecords(mirror.db, products, [version('v2', 2), version('v1', 1)])).toEqual([product.id]);
    expect(await stored()).toBe('v2');
    expect(await applyRecords(mirror.db, products, [version('v3', 3), version('v5', 5), version('v4', 4)])).toEqual([product.id]);
    expect(await stored()).toBe('v5');
    // An older batch changes nothing.
    expect(await applyRecords(mirror.db, products, [version('v4', 4), version('v3', 3)])).toEqual([]);
    expect(await stored()).toBe('v5');
  });

  it('the highest version wins: a webhook or a page with a lower version never overwrites the mirror, whatever its last_modified', async () => {
    const mirror = await freshMirror();
    const verify = webhookVerifier([SECRET]);
    const admin = await t.auth(['admin']);
    const reader = await t.auth();
    const product = (await aProduct(t.database.db)) as unknown as { id: string };
    const read = async () => (await t.app.inject({ url: `/api/v1/products/${product.id}`, headers: reader })).json().data;
    const change = async (name: string) => {
      const res = await t.app.inject({ method: 'PATCH', url: `/admin/api/v1/products/${product.id}`, headers: admin, payload: { name } });
      expect(res.statusCode, res.body).toBe(200);
      return read();
    };
    const v1 = await read();
    const v2 = await change('second name');
    const v3 = await change('third name');
    expect([v1.version, v2.version, v3.version]).toEqual([1, 2, 3]);
    const deliver = (eventId: string, data: unknown) => {
      const body = JSON.stringify({ id: eventId, type: 'product.updated', created_at: '2026-01-01T00:00:00.000002Z', data });
      return handleWebhook(mirror, verify, body, signatureHeaders([SECRET], eventId, Math.floor(Date.now() / 1000), body));
    };
    const stored = async () =>
      (
        await sql<{
          name: string;
          version: string;
        }>`SELECT record->>'name' AS name, record->>'version' AS version FROM store_mirror.products WHERE id = ${product.id}`.execute(mirror.db)
      ).rows[0];
    // A stale payload stamped later than the held one (as no payload of the service is) still loses to the version.
    const staleButLater = (record: { last_modified: string }) => ({ ...record, last_modified: '2099-01-01T00:00:00.000000Z' });

    expect(await deliver('0192bbbb-0000-7000-8000-000000000002', v2)).toMatchObject({ status: 200, outcome: 'applied' });
    expect(await deliver('0192bbbb-0000-7000-8000-000000000001', staleButLater(v1))).toMatchObject({ status: 200, outcome: 'stale' });
    expect(await stored()).toEqual({ name: 'second name', version: '2' });
    // A page (reconcile's list pages, the initial sync's export lines) with the stale version changes nothing either.
    expect(await applyRecords(mirror.db, products, [staleButLater(v1)])).toEqual([]);
    await applyRecordLines(mirror, products, [JSON.stringify(staleButLater(v1))], { cursor: null, records: 1, done: false });
    expect(await stored()).toEqual({ name: 'second name', version: '2' });
    // Of one key's payloads in a batch the highest version counts, in whatever order they come.
    await applyRecordLines(mirror, products, [JSON.stringify(v3), JSON.stringify(staleButLater(v1))], { cursor: null, records: 3, done: false });
    expect(await stored()).toEqual({ name: 'third name', version: '3' });
    expect(await applyRecords(mirror.db, products, [staleButLater(v2), staleButLater(v1)])).toEqual([]);
    expect(await deliver('0192bbbb-0000-7000-8000-000000000003', staleButLater(v2))).toMatchObject({ status: 200, outcome: 'stale' });
    expect(await stored()).toEqual({ name: 'third name', version: '3' });
  });

  it('reconcile: pulls what no webhook brought, across a bulk import stamping many records alike, in small pages', async () => {
    const mirror = await freshMirror();
    const reader = clientStoreReader({ baseUrl, token });
    await initialSync(mirror, reader, SYNC_RESOURCES);
    const skus = (
      await sql<{
        sku: string;
      }>`SELECT sku FROM variants WHERE sku IS NOT NULL UNION ALL SELECT sku FROM products p WHERE sku IS NOT NULL AND NOT EXISTS (SELECT 1 FROM variants v WHERE v.product_id = p.id)`.execute(
        t.database.db,
      )
    ).rows.map((r) => r.sku);
    await importStockCsv(t.database.db, `sku,quantity_change\n${skus.map((s) => `${s},1`).join('\n')}\n`);
    expect(mirrorMatches(await verifyMirror(mirror, reader, SYNC_RESOURCES))).toBe(false);

    const reports = await reconcile(mirror, reader, SYNC_RESOURCES, { pageSize: 7 });
    const byName = Object.fromEntries(reports.map((r) => [r.resource, r]));
    expect(byName.stock_movements!.applied).toBe(skus.length); // one movement per CSV row, all one last_modified
    expect(byName.products!.applied).toBeGreaterThanOrEqual(25);
    expect(byName.products!.lagMs).toBeGreaterThanOrEqual(0);
    expect(mirrorMatches(await verifyMirror(mirror, reader, SYNC_RESOURCES))).toBe(true);
    // A second run finds nothing new.
    expect((await reconcile(mirror, reader, SYNC_RESOURCES)).every((r) => r.applied === 0)).toBe(true);
  });

  it('CLI: verify exits 0 on an exact mirror and 1 listing a tampered id; wrong URL and revoked token are one line each', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'store-api-sync-cli-'));
    const mirrorArgs =
      backend === 'postgres'
        ? [
            '--database',
            (
              await openTestDatabase('postgres', { poolSize: 1 }).then((db) => {
                closers.push(db);
                return db;
              })
            ).url!,
          ]
        : ['--data-dir', dataDir];
    const env = { STORE_API_URL: baseUrl, STORE_API_TOKEN: token };
    expect((await cli(['init', ...mirrorArgs], env)).code).toBe(0);
    const ok = await cli(['verify', ...mirrorArgs], env);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/products +api \d+ \((-?\w+)\) mirror \d+ \(\1\) match/);

    const tampered = (await aProduct(t.database.db)).id; // changed in the store, never synced
    const differ = await cli(['verify', ...mirrorArgs], env);
    expect(differ.code).toBe(1);
    expect(differ.stdout).toContain(`missing from mirror (1): ${tampered}`);

    const badUrl = await cli(['verify', ...mirrorArgs, '--url', 'http://127.0.0.1:1'], { ...env });
    expect(badUrl.code).toBe(1);
    expect(badUrl.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^store-api-sync: Cannot reach the Store API at http:\/\/127\.0\.0\.1:1/)]);

    const revoked = await createToken(t.database.db, { name: 'revoked' });
    await revokeToken(t.database.db, revoked.summary.id);
    const denied = await cli(['verify', ...mirrorArgs, '--token', revoked.token], env);
    expect(denied.code).toBe(1);
    expect(denied.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^store-api-sync: .*401/)]);

    const badSecret = await cli(['serve', ...mirrorArgs, '--secret', 'not-a-secret'], env);
    expect(badSecret.code).toBe(1);
    expect(badSecret.stderr.trim()).toBe(
      'store-api-sync: the signing secret is not a whsec_… secret (--secret, --secret-file, STORE_WEBHOOK_SECRET or STORE_WEBHOOK_SECRET_FILE)',
    );
    // The secret from a file (kept out of `ps`): read, and checked like one on the command line.
    const secretFile = join(mkdtempSync(join(tmpdir(), 'sync-secret-')), 'webhook-secret');
    writeFileSync(secretFile, 'not-a-secret\n', { mode: 0o600 });
    const badFile = await cli(['serve', ...mirrorArgs, '--secret-file', secretFile], env);
    expect(badFile.code).toBe(1);
    expect(badFile.stderr.trim()).toMatch(/^store-api-sync: the signing secret is not a whsec_… secret/);
    const noFile = await cli(['serve', ...mirrorArgs], { ...env, STORE_WEBHOOK_SECRET_FILE: `${secretFile}.missing` });
    expect(noFile.code).toBe(1);
    expect(noFile.stderr.trim()).toBe(`store-api-sync: cannot read the secret file ${secretFile}.missing (ENOENT)`);
  }, 120_000);

  it('CLI: init says on screen that it waits for the export rate limit (snapshots count against it), then finishes', async () => {
    // One snapshot a second: the second resource's snapshot is answered 429 until the window turns.
    const limited = await buildTestApp(backend, { RATE_LIMIT_STANDARD: '1000000', RATE_LIMIT_EXPORT: '1', RATE_LIMIT_WINDOW_MS: '1000' });
    closers.push(limited);
    await limited.app.listen({ port: 0, host: '127.0.0.1' });
    await aProduct(limited.database.db);
    const env = {
      STORE_API_URL: `http://127.0.0.1:${(limited.app.server.address() as AddressInfo).port}`,
      STORE_API_TOKEN: (await limited.auth()).authorization.slice('Bearer '.length),
    };
    const mirrorArgs =
      backend === 'postgres'
        ? [
            '--database',
            (
              await openTestDatabase('postgres', { poolSize: 1 }).then((db) => {
                closers.push(db);
                return db;
              })
            ).url!,
          ]
        : ['--data-dir', mkdtempSync(join(tmpdir(), 'store-api-sync-limited-'))];
    const init = await cli(['init', ...mirrorArgs], env);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stderr).toMatch(/store-api-sync: waiting \d+ s for the export rate limit/);
    expect(init.stderr).not.toMatch(/for the standard rate limit/);
    const verified = await cli(['verify', ...mirrorArgs], env);
    expect(verified.code, verified.stderr).toBe(0);
  }, 120_000);
});

function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SYNC_CLI, ...args], {
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', NODE_OPTIONS: RUN_CLIENT_SOURCE, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
