/**
 * Workers: several on one database never send one delivery twice at once; stop() lets attempts in
 * flight finish; a worker process killed with SIGKILL mid-delivery loses nothing (its lease
 * expires and a restarted worker sends the delivery).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Lease of the spawned worker processes: how long a killed worker's delivery stays held. */
const CHILD_LEASE_MS = 5000;
/** Deliveries in flight per endpoint per worker (WEBHOOK_ENDPOINT_CONCURRENCY, set below). */
const ENDPOINT_CONCURRENCY = 4;

describe.each(backends)('webhook workers (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    // Generous timeout and lease: on PGlite the receiver shares its thread with three workers' SQL.
    kit = await webhookTestKit(
      backend,
      { WEBHOOK_LEASE_MS: '20000', WEBHOOK_TIMEOUT_MS: '10000', WEBHOOK_ENDPOINT_CONCURRENCY: String(ENDPOINT_CONCURRENCY) },
      { worker: false },
    );
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('three workers on one database deliver 40 deliveries exactly once each', async () => {
    // A short delay per answer keeps several deliveries in flight across workers at once.
    receiver.respond = (req, n, res, socket) => void setTimeout(() => ok(req, n, res, socket), 20);
    const workers = [await kit.startWorker(), await kit.startWorker(), await kit.startWorker()];
    try {
      const endpoints = [await kit.createEndpoint(receiver.url), await kit.createEndpoint(receiver.url)];
      const claimedBy = new Map<string, string[]>();
      for (const w of workers) w.events.on('claimed', (rows) => rows.forEach((r) => claimedBy.set(r.id, [...(claimedBy.get(r.id) ?? []), w.id])));
      const base = receiver.requests.length;
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) {
        for (const e of endpoints) ids.push((await kit.api('POST', `/webhooks/endpoints/${e.id}/ping`)).body.data.delivery_id);
      }
      await receiver.waitForRequests(base + 40, 30_000);
      await vi.waitFor(
        async () => {
          const { rows } = await sql<{
            n: number;
          }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE id = ANY(${ids}::uuid[]) AND status = 'succeeded'`.execute(kit.t.database.db);
          expect(rows[0]!.n).toBe(40);
        },
        { timeout: 10_000, interval: 50 },
      );
      const received = receiver.requests.slice(base).map((r) => r.headers['webhook-id']);
      expect(new Set(received).size).toBe(40);
      expect(received).toHaveLength(40);
      expect([...claimedBy.values()].every((by) => by.length === 1)).toBe(true);
      if (backend === 'postgres') expect(new Set([...claimedBy.values()].flat()).size).toBeGreaterThan(1);
      // Keep-alive: far fewer connections than requests.
      expect(receiver.connections.size).toBeLessThan(20);
      for (const e of endpoints) await kit.api('PATCH', `/webhooks/endpoints/${e.id}`, { enabled: false });
    } finally {
      for (const w of workers) await w.stop();
    }
  });

  it("one endpoint's backlog does not hold up another endpoint", async () => {
    // The busy endpoint's requests hang until the quiet endpoint's delivery has succeeded: what is
    // checked is an order of events (the quiet one gets through while the busy one has every slot of
    // its own taken), not a speed, so a slow machine cannot turn it into a failure.
    const slow = await new WebhookReceiver().start();
    const held: (() => void)[] = [];
    slow.respond = (req, n, res, socket) => void held.push(() => ok(req, n, res, socket));
    receiver.respond = ok;
    const worker = await kit.startWorker();
    try {
      const busy = await kit.createEndpoint(slow.url);
      const quiet = await kit.createEndpoint(receiver.url);
      for (let i = 0; i < 40; i++) await kit.api('POST', `/webhooks/endpoints/${busy.id}/ping`);
      await slow.waitForRequests(ENDPOINT_CONCURRENCY);
      const quick = waitForAttempts(worker, 1, (r) => r.endpointId === quiet.id);
      await kit.api('POST', `/webhooks/endpoints/${quiet.id}/ping`);
      expect((await quick)[0]!.settlement?.status).toBe('succeeded');
      // At most WEBHOOK_ENDPOINT_CONCURRENCY at a time to the busy endpoint, all still unanswered.
      expect(slow.requests.length).toBe(ENDPOINT_CONCURRENCY);
      for (const e of [busy, quiet]) await kit.api('PATCH', `/webhooks/endpoints/${e.id}`, { enabled: false });
    } finally {
      for (const answer of held.splice(0)) answer();
      await worker.stop();
      await slow.close();
    }
  });

  it('stop() waits for the attempt in flight to finish and settle, then claims nothing more', async () => {
    let answer: (() => void) | undefined;
    receiver.respond = (req, n, res, socket) => {
      answer = () => ok(req, n, res, socket);
    };
    const worker = await kit.startWorker();
    const endpoint = await kit.createEndpoint(receiver.url);
    const base = receiver.requests.length;
    const ping = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data;
    await receiver.waitForRequests(base + 1);
    const settled = waitForAttempts(worker, 1, (r) => r.deliveryId === ping.delivery_id);
    let stopped = false;
    const stopping = worker.stop().then(() => {
      stopped = true;
    });
    // Stop is waiting on the attempt: give the event loop a turn, then answer.
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    answer!();
    await stopping;
    expect((await settled)[0]!.settlement?.status).toBe('succeeded');
    expect((await kit.api('GET', `/webhooks/deliveries/${ping.delivery_id}`)).body.data.status).toBe('succeeded');
    // Nothing claims after stop: a new ping stays pending.
    receiver.respond = ok;
    const later = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data;
    const { rows } = await sql<{
      status: string;
      locked_by: string | null;
    }>`SELECT status, locked_by FROM webhook_deliveries WHERE id = ${later.delivery_id}::uuid`.execute(kit.t.database.db);
    expect(rows[0]).toEqual({ status: 'pending', locked_by: null });
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });

  it.skipIf(backend === 'pglite')(
    'a worker process killed with SIGKILL mid-delivery: the delivery arrives after a restart (PostgreSQL only: an embedded PGlite directory belongs to one process, so there is no separate worker process to kill)',
    async () => {
      receiver.respond = (req, n, res, socket) => {
        if (req.json.type === 'ping' && hangFirst) {
          hangFirst = false; // the first try hangs until its worker is killed
          return;
        }
        ok(req, n, res, socket);
      };
      let hangFirst = true;
      const endpoint = await kit.createEndpoint(receiver.url);
      const base = receiver.requests.length;
      const first = spawnWorker(kit.t.database.url!);
      try {
        const ping = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data;
        await receiver.waitForRequests(base + 1, 30_000);
        const claimedAt = Date.now();
        first.kill('SIGKILL');
        await once(first, 'exit');
        const { rows: held } = await sql<{
          locked_by: string | null;
          status: string;
        }>`SELECT locked_by, status FROM webhook_deliveries WHERE id = ${ping.delivery_id}::uuid`.execute(kit.t.database.db);
        expect(held[0]!.locked_by).not.toBeNull(); // the dead worker's lease still holds it
        expect(held[0]!.status).toBe('pending');

        const second = spawnWorker(kit.t.database.url!);
        try {
          await receiver.waitForRequests(base + 2, 30_000);
          const resentAt = receiver.requests[base + 1]!.at;
          expect(receiver.requests[base + 1]!.headers['webhook-id']).toBe(ping.event_id);
          expect(resentAt - claimedAt).toBeGreaterThanOrEqual(CHILD_LEASE_MS - 1000); // not before the lease ran out
          await vi.waitFor(
            async () => {
              const detail = (await kit.api('GET', `/webhooks/deliveries/${ping.delivery_id}`)).body.data;
              expect(detail.status).toBe('succeeded');
              expect(detail.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['abandoned', 'success']);
            },
            { timeout: 10_000, interval: 50 },
          );
          second.kill('SIGTERM');
          const [code] = await once(second, 'exit');
          expect(code).toBe(0);
        } finally {
          if (second.exitCode === null) second.kill('SIGKILL');
        }
      } finally {
        if (first.exitCode === null) first.kill('SIGKILL');
      }
    },
    90_000,
  );
});

function spawnWorker(databaseUrl: string): ChildProcess {
  const child = spawn(process.execPath, ['bin/store-api.js', 'worker'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: databaseUrl,
      WEBHOOK_POLL_INTERVAL_MS: '50',
      WEBHOOK_LEASE_MS: String(CHILD_LEASE_MS),
      WEBHOOK_TIMEOUT_MS: '3500',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      LOG_LEVEL: 'warn',
      DATABASE_POOL_SIZE: '3',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.on('data', (chunk: Buffer) => process.stderr.write(`[worker ${child.pid}] ${chunk}`));
  return child;
}
