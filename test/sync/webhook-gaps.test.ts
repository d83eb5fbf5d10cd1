/**
 * `status` tells when webhooks are silently missing: the events received are compared with the
 * service's events feed, and each feed event that never arrived (its change came only through the
 * reconcile) is named, although `verify` passes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backends, openTestDatabase } from '../helpers/test-database.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';
import { aCustomer } from '../helpers/store-fixtures.ts';
import { signatureHeaders } from '../../src/webhooks/webhook-signing.ts';
import { PROJECT_ROOT } from '../production/process-helpers.ts';
import { StoreApiClient } from '../../packages/client/src/index.ts';
import { handleWebhook, openMirror, webhookGaps, webhookVerifier } from '../../packages/sync/src/index.ts';

const SYNC_CLI = join(PROJECT_ROOT, 'packages/sync/bin/store-api-sync.js');
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe.each(backends)('webhooks missing compared with the events feed (%s)', (backend) => {
  let t: TestApp;
  let baseUrl: string;
  let token: string;
  const closers: { close(): Promise<void> }[] = [];
  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED });
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    token = (await t.auth()).authorization.slice('Bearer '.length);
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c.close();
    await t?.close();
  });

  it('names the feed events that never arrived as webhooks, in the function and in `status`', async () => {
    for (let i = 0; i < 6; i++) await aCustomer(t.database.db);
    const client = new StoreApiClient({ baseUrl, token });
    const feed = await client.events.iterate().toArray();
    expect(feed).toHaveLength(6);
    let mirrorArgs: string[];
    let mirror;
    if (backend === 'postgres') {
      const db = await openTestDatabase('postgres', { poolSize: 1 });
      closers.push(db);
      mirrorArgs = ['--database', db.url!];
      mirror = await openMirror({ databaseUrl: db.url });
    } else {
      const dataDir = mkdtempSync(join(tmpdir(), 'store-api-sync-gaps-'));
      mirrorArgs = ['--data-dir', dataDir];
      mirror = await openMirror({ dataDir });
    }
    const verify = webhookVerifier([SECRET]);
    // Every event but the 2nd and the 5th arrives.
    const dropped = [feed[1]!, feed[4]!];
    for (const event of feed.filter((e) => !dropped.includes(e))) {
      const body = JSON.stringify(event);
      expect((await handleWebhook(mirror, verify, body, signatureHeaders([SECRET], event.id, Math.floor(Date.now() / 1000), body))).status).toBe(200);
    }
    const gaps = await webhookGaps(mirror, client);
    expect(gaps.feedEvents).toBe(6);
    expect(gaps.received).toBe(4);
    expect(gaps.missed.map((m) => m.id)).toEqual(dropped.map((e) => e.id));
    expect(gaps.missed[0]).toMatchObject({ type: 'customer.created', resource_id: (dropped[0]!.data as { id: string }).id });
    await mirror.close();

    const status = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawn(process.execPath, [SYNC_CLI, 'status', ...mirrorArgs, '--url', baseUrl, '--token', token], {
        env: { ...process.env, NODE_OPTIONS: '--conditions=source' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.on('exit', (code) => resolve({ code, stdout }));
    });
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/webhooks: 4 of 6 events of the feed between \S+ and \S+ arrived; 2 MISSING \(only the reconcile brought their changes/);
    for (const event of dropped) expect(status.stdout).toContain(`customer.created ${event.id}`);
  }, 120_000);
});
