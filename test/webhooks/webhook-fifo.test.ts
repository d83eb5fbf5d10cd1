/**
 * FIFO endpoints (decision 0059): while three writers update the same customers, a receiver fails
 * and times out at random and workers are stopped (on PostgreSQL: worker processes killed with
 * SIGKILL) and replaced, every FIFO endpoint receives its events, duplicates removed, exactly in
 * their write order, (created_at, seq) in the event log; each batch is one signed request whose body
 * is the JSON array of the events' envelopes. Every event the receiver never took is a dead letter.
 * The endpoint's two fields are validated: out of range is a 400 naming the field, nothing stored.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver } from './webhook-receiver.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import { verifyWebhookBatch } from '@store-api/client';
import type { WebhookWorker } from '../../src/webhooks/webhook-worker.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Short enough for a hung request to fail within the test, the lease 1.5 s beyond it. */
const WORKER_ENV = {
  WEBHOOK_TIMEOUT_MS: '1000',
  WEBHOOK_LEASE_MS: '2500',
  // Few retries: now and then a batch goes dead, and its line must move on.
  WEBHOOK_RETRY_SCHEDULE_MS: '20,20,20,20',
  WEBHOOK_BREAKER_THRESHOLD: '10000',
  WEBHOOK_POLL_INTERVAL_MS: '50',
  WEBHOOK_ENDPOINT_CONCURRENCY: '4',
};
const WRITERS = 3;
const WRITES_PER_WRITER = 30;
const CUSTOMERS = 4;
/** Workers stopped (killed) in the run: each held line waits for its lease to expire. */
const KILLS = 8;

describe.each(backends)('FIFO endpoints (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  const hung: ServerResponse[] = [];

  beforeAll(async () => {
    kit = await webhookTestKit(backend, WORKER_ENV, { worker: false });
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    for (const res of hung) res.destroy();
    await kit?.close();
    await receiver?.close();
  });

  it('rejects delivery_order and batch_size out of range with a 400 naming the field, storing nothing', async () => {
    const before = (await kit.api('GET', '/webhooks/endpoints')).body.data.length;
    for (const [field, value] of [
      ['delivery_order', 'sorted'],
      ['batch_size', 0],
      ['batch_size', 501],
      ['batch_size', 2.5],
    ] as const) {
      const res = await kit.api('POST', '/webhooks/endpoints', { url: `${receiver.url}?bad`, delivery_order: 'fifo', [field]: value });
      expect(res.status, `${field}=${value}`).toBe(400);
      expect(JSON.stringify(res.body)).toContain(field);
    }
    expect((await kit.api('GET', '/webhooks/endpoints')).body.data).toHaveLength(before);
    const created = await kit.createEndpoint(`${receiver.url}?fields`, { delivery_order: 'fifo', batch_size: 7, enabled: false });
    const shown = (await kit.api('GET', `/webhooks/endpoints/${created.id}`)).body.data;
    expect([shown.delivery_order, shown.batch_size]).toEqual(['fifo', 7]);
    const patched = await kit.api('PATCH', `/webhooks/endpoints/${created.id}`, { batch_size: 600 });
    expect(patched.status).toBe(400);
    expect(JSON.stringify(patched.body)).toContain('batch_size');
    expect((await kit.api('GET', `/webhooks/endpoints/${created.id}`)).body.data.batch_size).toBe(7);
    expect((await kit.api('PATCH', `/webhooks/endpoints/${created.id}`, { delivery_order: 'unordered', batch_size: 1 })).body.data).toMatchObject({
      delivery_order: 'unordered',
      batch_size: 1,
    });
    const plain = await kit.createEndpoint(`${receiver.url}?plain`, { enabled: false });
    expect((await kit.api('GET', `/webhooks/endpoints/${plain.id}`)).body.data).toMatchObject({ delivery_order: 'unordered', batch_size: 50 });
  });

  it('three writers, a receiver failing and timing out at random, workers stopped mid-batch: each FIFO endpoint receives the write order', async () => {
    const lines = [
      { tag: 'fifo-a', batch_size: 5 },
      { tag: 'fifo-b', batch_size: 1 },
      { tag: 'fifo-c', batch_size: 50 },
    ];
    const endpoints = await Promise.all(
      lines.map(async (l) => ({
        ...l,
        ...(await kit.createEndpoint(`${receiver.url}?${l.tag}`, {
          delivery_order: 'fifo',
          batch_size: l.batch_size,
          event_types: ['customer.created', 'customer.updated'],
        })),
      })),
    );
    // What each endpoint took (answered 2xx), in the order it took it.
    const taken = new Map<string, string[]>(endpoints.map((e) => [e.tag, []]));
    let badSignatures = 0;
    let nonArrays = 0;
    receiver.respond = (req, _n, res) => {
      const tag = req.path.split('?')[1]!;
      const endpoint = endpoints.find((e) => e.tag === tag);
      if (!endpoint) return void res.writeHead(200).end();
      // As a receiver would: the client's verifier, over the raw body.
      try {
        verifyWebhookBatch(req.body, req.headers, endpoint.secret);
      } catch {
        badSignatures++;
      }
      const roll = Math.random();
      if (roll < 0.08) return void hung.push(res); // never answered: the worker's request times out
      if (roll < 0.3) return void res.writeHead(500).end('try again');
      const batch = req.json as unknown;
      if (!Array.isArray(batch)) nonArrays++;
      for (const event of (Array.isArray(batch) ? batch : [batch]) as { id: string }[]) taken.get(tag)!.push(event.id);
      res.writeHead(200).end();
    };

    const customers: string[] = [];
    for (let i = 0; i < CUSTOMERS; i++) customers.push((await kit.api('POST', '/customers', { name: `FIFO ${i}` })).body.data.id);

    // Workers: on PostgreSQL processes killed with SIGKILL at random points and replaced; on the
    // embedded PGlite (its directory belongs to one process) workers in this process, stopped and replaced.
    const pool = backend === 'postgres' ? processWorkers(kit.t.database.url!) : inProcessWorkers(kit);
    for (let i = 0; i < 3; i++) await pool.start();
    const ids = endpoints.map((e) => e.id);
    let drained = false;
    let holderKills = 0;
    // Until every line is drained (KILLS at most): now and then a worker goes, mostly one holding a line at that
    // moment (its batch in flight, or its settle to come).
    const churn = (async () => {
      for (let n = 0, kills = 0; !drained && kills < KILLS; n++) {
        await new Promise((r) => setTimeout(r, 1000 + Math.random() * 1500)); // load pattern, not a wait for a result
        const { rows: holders } = await sql<{ locked_by: string }>`
          SELECT DISTINCT locked_by FROM webhook_deliveries
          WHERE endpoint_id = ANY(${ids}::uuid[]) AND status IN ('pending', 'failed') AND locked_until > now()
        `.execute(kit.t.database.db);
        // Mostly the holder of a line (killed mid-batch); every fourth time any worker, holder or not.
        const holder = await pool.replaceOne(
          holders.map((h) => h.locked_by),
          n % 4 === 3,
        );
        if (holder) holderKills++;
        if (holder || n % 4 === 3) kills++;
      }
    })();
    await Promise.all(
      Array.from({ length: WRITERS }, async (_, w) => {
        for (let i = 0; i < WRITES_PER_WRITER; i++) {
          const id = customers[Math.floor(Math.random() * customers.length)]!;
          const res = await kit.api('PATCH', `/customers/${id}`, { name: `writer ${w} write ${i}` });
          expect(res.status).toBe(200);
        }
      }),
    );
    try {
      await vi.waitFor(
        async () => {
          const { rows } = await sql<{ n: number }>`
              SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = ANY(${ids}::uuid[]) AND status IN ('pending', 'failed')
            `.execute(kit.t.database.db);
          const { rows: all } = await sql<{ n: number }>`
              SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = ANY(${ids}::uuid[])
            `.execute(kit.t.database.db);
          expect(all[0]!.n).toBe(endpoints.length * (CUSTOMERS + WRITERS * WRITES_PER_WRITER));
          expect(rows[0]!.n).toBe(0);
        },
        { timeout: 240_000, interval: 200 },
      );
    } finally {
      drained = true;
      await churn;
      await pool.stopAll();
    }

    for (const endpoint of endpoints) {
      // The write order: the endpoint's deliveries in their events' (created_at, seq) order.
      const { rows } = await sql<{ event_id: string; status: string }>`
          SELECT d.event_id, d.status FROM webhook_deliveries d JOIN events ev ON ev.store_id = d.store_id AND ev.id = d.event_id
          WHERE d.endpoint_id = ${endpoint.id}::uuid ORDER BY ev.created_at, ev.seq
        `.execute(kit.t.database.db);
      const received = [...new Set(taken.get(endpoint.tag))];
      const tookIt = new Set(received);
      // Exactly the write order of what it took, and it took everything that succeeded; what it
      // never took went dead (a dead head lets the line move on).
      expect(received, endpoint.tag).toEqual(rows.filter((r) => tookIt.has(r.event_id)).map((r) => r.event_id));
      for (const r of rows) if (!tookIt.has(r.event_id)) expect(r.status, `${endpoint.tag} ${r.event_id}`).toBe('dead');
      for (const r of rows) if (r.status === 'succeeded') expect(tookIt.has(r.event_id)).toBe(true);
      // Something got through (how much depends on the machine: a loaded one times out more batches).
      expect(received.length).toBeGreaterThan(0);
    }
    expect(badSignatures).toBe(0);
    expect(nonArrays).toBe(0);
    if (backend === 'postgres' && holderKills >= 3) {
      // Workers did die holding a line: their batches were recorded abandoned and sent again.
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM webhook_attempts WHERE outcome = 'abandoned'
      `.execute(kit.t.database.db);
      expect(rows[0]!.n).toBeGreaterThan(0);
    }
  }, 300_000);
});

interface WorkerPool {
  start(): Promise<void>;
  /**
   * Stops one of `holders` (worker ids) when one runs here, else (with `anyOne`) any worker, and starts
   * another in its place; true when it was a holder.
   */
  replaceOne(holders: readonly string[], anyOne: boolean): Promise<boolean>;
  stopAll(): Promise<void>;
}

function processWorkers(databaseUrl: string): WorkerPool {
  const running: ChildProcess[] = [];
  const start = async () => {
    const child = spawn(process.execPath, ['bin/store-api.js', 'worker'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', LOG_LEVEL: 'warn', DATABASE_POOL_SIZE: '3', ...WORKER_ENV },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    running.push(child);
  };
  const kill = async (child: ChildProcess) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  };
  return {
    start,
    async replaceOne(holders, anyOne) {
      // A worker's id is host:pid:random (webhook-worker.ts).
      const pids = new Set(holders.map((h) => Number(h.split(':')[1])));
      const holder = running.findIndex((c) => pids.has(c.pid!));
      if (holder < 0 && !anyOne) return false;
      const victim = running.splice(holder >= 0 ? holder : Math.floor(Math.random() * running.length), 1)[0]!;
      await kill(victim);
      await start();
      return holder >= 0;
    },
    async stopAll() {
      await Promise.all(running.splice(0).map(kill));
    },
  };
}

function inProcessWorkers(kit: WebhookTestKit): WorkerPool {
  const running: WebhookWorker[] = [];
  return {
    async start() {
      running.push(await kit.startWorker());
    },
    async replaceOne(holders, anyOne) {
      const holder = running.findIndex((w) => holders.includes(w.id));
      if (holder < 0 && !anyOne) return false;
      const victim = running.splice(holder >= 0 ? holder : Math.floor(Math.random() * running.length), 1)[0]!;
      // Not awaited: the replacement starts while the stopped one still drains its batch.
      void victim.stop();
      running.push(await kit.startWorker());
      return holder >= 0;
    },
    async stopAll() {
      await Promise.all(running.splice(0).map((w) => w.stop()));
    },
  };
}
