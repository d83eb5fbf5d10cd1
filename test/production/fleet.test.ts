/**
 * The deployment of README "Deployment", as real processes: `serve` ×2 and `worker` ×2 against one
 * PostgreSQL database and one Redis. It shows that
 *  - one token's 61st request within the window is refused whichever server receives it;
 *  - every event is delivered exactly once to a receiver while workers are SIGTERMed and restarted
 *    (a clean SIGTERM drains: the attempts a worker has in flight finish and settle before it exits 0);
 *  - /metrics of the servers and workers reflect that traffic.
 * Needs TEST_DATABASE_URL and TEST_REDIS_URL; skipped with a message otherwise.
 *
 * Determinism without sleeping: the receiver can hold its responses, so the test knows when both
 * workers have their per-endpoint slots (WEBHOOK_ENDPOINT_CONCURRENCY) full of attempts in flight,
 * SIGTERMs one of them at that moment, checks it is still draining, then releases the responses.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { Webhook } from 'standardwebhooks';
import { sql } from 'kysely';
import { createToken } from '../../src/tokens/token.service.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { listeningUrl, metricSum, parseMetrics, startStoreApi, type StoreApiProcess } from './process-helpers.ts';

const DATABASE_URL = process.env.TEST_DATABASE_URL;
const REDIS_URL = process.env.TEST_REDIS_URL;
const PER_ENDPOINT = 4;
const BATCH = 20;

async function redisReachable(url: string | undefined): Promise<boolean> {
  if (!url) return false;
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

const skipReason = !DATABASE_URL
  ? 'TEST_DATABASE_URL is not set (the fleet runs on PostgreSQL)'
  : !(await redisReachable(REDIS_URL))
    ? `Redis is not reachable at TEST_REDIS_URL (${REDIS_URL ?? 'unset'})`
    : undefined;
if (skipReason) console.warn(`fleet test skipped: ${skipReason}`);

interface Received {
  id: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A webhook receiver on loopback that records every POST and can hold its answers. */
class Receiver {
  readonly received: Received[] = [];
  #held: ServerResponse[] = [];
  #holding = false;
  #waiters: Array<() => void> = [];
  readonly server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.received.push({ id: String(req.headers['webhook-id']), headers: req.headers, body: Buffer.concat(chunks).toString() });
      if (this.#holding) this.#held.push(res);
      else res.writeHead(204).end();
      for (const wake of this.#waiters) wake();
    });
  });

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}/hooks`;
  }

  get heldCount(): number {
    return this.#held.length;
  }

  hold(): void {
    this.#holding = true;
  }

  /** Answers every held request 204 and stops holding. */
  release(): void {
    this.#holding = false;
    for (const res of this.#held.splice(0)) res.writeHead(204).end();
  }

  /** Resolves once `predicate` holds (checked on every request), or rejects after `timeoutMs`. */
  until(predicate: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!predicate()) return;
        clearTimeout(timer);
        this.#waiters = this.#waiters.filter((w) => w !== check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== check);
        reject(new Error(`receiver: timed out waiting for ${what} (received ${this.received.length}, held ${this.#held.length})`));
      }, timeoutMs);
      this.#waiters.push(check);
      check();
    });
  }
}

describe.skipIf(Boolean(skipReason))('fleet: serve ×2 + worker ×2 on PostgreSQL and Redis', () => {
  let database: TestDatabase;
  let receiver: Receiver;
  let env: Record<string, string>;
  let redisPrefix: string;
  let readToken: string;
  let adminToken: string;
  let endpointSecret: string;
  const servers: Array<{ proc: StoreApiProcess; base: string }> = [];
  const workers: Array<{ proc: StoreApiProcess; base: string }> = [];
  const everyProcess: StoreApiProcess[] = [];
  const createdNames: string[] = [];

  const startServe = async (n: number) => {
    const proc = startStoreApi(['serve'], env, { name: `serve #${n}` });
    everyProcess.push(proc);
    return { proc, base: await listeningUrl(proc) };
  };
  const startWorker = async (n: number) => {
    const proc = startStoreApi(['worker'], { ...env, METRICS_PORT: '0', LOG_LEVEL: 'info' }, { name: `worker #${n}` });
    everyProcess.push(proc);
    const base = await listeningUrl(proc, /Worker metrics listening on (http:\/\/[^\s"]+)/);
    await proc.waitFor(/Webhook worker started/);
    // The worker role prunes by retention, first at start, with one log line per run.
    await proc.waitFor(/"msg":"retention pruning run"/);
    return { proc, base };
  };

  const admin = (base: string, method: 'POST' | 'GET', path: string, body?: unknown) =>
    request(`${base}/admin/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });

  /** Creates `count` customers through the admin API, alternating between the two servers. */
  const createCustomers = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const name = `Fleet customer ${createdNames.length + 1}`;
      const res = await admin(servers[createdNames.length % 2]!.base, 'POST', '/customers', { name });
      expect(res.statusCode).toBe(201);
      await res.body.dump();
      createdNames.push(name);
    }
  };

  const distinctDelivered = () => new Set(receiver.received.map((r) => r.id)).size;

  const scrape = async (base: string) => {
    const res = await request(`${base}/metrics`);
    expect(res.statusCode).toBe(200);
    return parseMetrics(await res.body.text());
  };

  beforeAll(async () => {
    database = await openTestDatabase('postgres');
    receiver = new Receiver();
    await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
    readToken = (await createToken(database.db, { name: 'fleet reader' })).token;
    adminToken = (await createToken(database.db, { name: 'fleet admin', scopes: ['admin'] })).token;
    redisPrefix = `store-api-fleet-test:${randomBytes(6).toString('hex')}:`;
    env = {
      DATABASE_URL: database.url!,
      DATABASE_POOL_SIZE: '4',
      REDIS_URL: REDIS_URL!,
      REDIS_KEY_PREFIX: redisPrefix,
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '200',
      WEBHOOK_RETRY_SCHEDULE_MS: '500,1000,2000,4000,8000',
      WEBHOOK_TIMEOUT_MS: '20000',
      WEBHOOK_LEASE_MS: '40000',
      WEBHOOK_ENDPOINT_CONCURRENCY: String(PER_ENDPOINT),
      SHUTDOWN_TIMEOUT_MS: '30000',
    };
    const started = await Promise.all([startServe(1), startServe(2), startWorker(1), startWorker(2)]);
    servers.push(started[0], started[1]);
    workers.push(started[2], started[3]);

    const endpoint = await admin(servers[0]!.base, 'POST', '/webhooks/endpoints', { url: receiver.url, event_types: ['customer.created'] });
    expect(endpoint.statusCode).toBe(201);
    endpointSecret = ((await endpoint.body.json()) as { data: { secret: string } }).data.secret;
  });

  afterAll(async () => {
    receiver?.release();
    await Promise.all(everyProcess.map((proc) => proc.stop('SIGKILL')));
    await new Promise<void>((resolve) => (receiver ? receiver.server.close(() => resolve()) : resolve()));
    receiver?.server.closeAllConnections();
    if (REDIS_URL && redisPrefix) {
      const redis = new Redis(REDIS_URL);
      const keys = await redis.keys(`${redisPrefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      await redis.quit();
    }
    await database?.close();
  });

  it('refuses the 61st request of one token within the window, whichever server receives it', async () => {
    const headers = { authorization: `Bearer ${readToken}` };
    for (let i = 1; i <= 60; i++) {
      const res = await request(`${servers[i % 2]!.base}/api/v1/products`, { headers });
      expect(res.statusCode, `request ${i} (serve #${(i % 2) + 1})`).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe(String(60 - i));
      await res.body.dump();
    }
    for (const server of servers) {
      const refused = await request(`${server.base}/api/v1/products`, { headers });
      expect(refused.statusCode).toBe(429);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(((await refused.body.json()) as { code: string }).code).toBe('rate_limited');
    }
  });

  it('delivers every event exactly once while workers are SIGTERMed mid-delivery and restarted', async () => {
    // Round 1: both workers fill their slots with held attempts; worker #1 is stopped meanwhile.
    receiver.hold();
    await createCustomers(BATCH);
    await receiver.until(() => receiver.heldCount >= 2 * PER_ENDPOINT, 'both workers to have their slots in flight');
    const first = workers.shift()!;
    first.proc.child.kill('SIGTERM');
    await first.proc.waitFor(/shutting down/);
    // It cannot finish: its attempts are still in flight at the receiver. Now let them complete.
    expect(first.proc.child.exitCode).toBeNull();
    receiver.release();
    expect(await first.proc.exited).toBe(0);
    workers.push(await startWorker(3));
    await receiver.until(() => distinctDelivered() >= BATCH, `the first ${BATCH} events`);

    // Round 2: the same for the other original worker, with the restarted one beside it.
    receiver.hold();
    await createCustomers(BATCH);
    await receiver.until(() => receiver.heldCount >= 2 * PER_ENDPOINT, 'both workers to have their slots in flight');
    const second = workers.shift()!;
    second.proc.child.kill('SIGTERM');
    await second.proc.waitFor(/shutting down/);
    expect(second.proc.child.exitCode).toBeNull();
    receiver.release();
    expect(await second.proc.exited).toBe(0);
    workers.push(await startWorker(4));

    // Round 3: only restarted workers.
    await createCustomers(BATCH);
    await receiver.until(() => distinctDelivered() >= 3 * BATCH, `all ${3 * BATCH} events`);

    // Every delivery was settled by the worker that sent it — including the ones in flight at
    // SIGTERM — in one attempt; none is left leased to a stopped worker for a later repeat.
    // The receiver records a request before the worker has read the answer: wait for the last settles.
    const settled = () =>
      sql<{ status: string; attempt_count: number; attempts: number; locked_by: string | null }>`
      SELECT d.status, d.attempt_count, d.locked_by,
             (SELECT count(*) FROM webhook_attempts a WHERE a.delivery_id = d.id)::int AS attempts
      FROM webhook_deliveries d WHERE d.event_type = 'customer.created'
    `.execute(database.db);
    // (An abandoned attempt would stay leased past this wait: WEBHOOK_LEASE_MS is 40 s.)
    await vi.waitFor(
      async () => {
        const { rows } = await settled();
        expect(rows.filter((d) => d.locked_by !== null)).toEqual([]);
      },
      { timeout: 30_000, interval: 100 },
    );
    const { rows: deliveries } = await settled();
    expect(deliveries).toHaveLength(3 * BATCH);
    for (const d of deliveries) expect(d).toMatchObject({ status: 'succeeded', attempt_count: 1, attempts: 1, locked_by: null });

    const ids = receiver.received.map((r) => r.id);
    expect(ids).toHaveLength(3 * BATCH); // no repeats in a clean run
    expect(new Set(ids).size).toBe(3 * BATCH);
    const payloads = receiver.received.map((r) => JSON.parse(r.body) as { id: string; type: string; data: { name: string } });
    expect(payloads.every((p) => p.type === 'customer.created')).toBe(true);
    expect(payloads.map((p) => p.data.name).sort()).toEqual([...createdNames].sort());
    expect(receiver.received.every((r) => JSON.parse(r.body).id === r.id)).toBe(true);
    // Signed per Standard Webhooks with the endpoint's secret.
    const verifier = new Webhook(endpointSecret);
    for (const r of receiver.received.slice(0, 5)) {
      expect(() =>
        verifier.verify(r.body, {
          'webhook-id': String(r.headers['webhook-id']),
          'webhook-timestamp': String(r.headers['webhook-timestamp']),
          'webhook-signature': String(r.headers['webhook-signature']),
        }),
      ).not.toThrow();
    }
  });

  it('shows the traffic on /metrics of the servers and the workers', async () => {
    const [a, b] = await Promise.all(servers.map((s) => scrape(s.base)));
    const both = (name: string, ...labels: string[]) => metricSum(a!, name, ...labels) + metricSum(b!, name, ...labels);
    expect(both('http_requests_total', 'route="/api/v1/products"', 'status_code="200"')).toBe(60);
    expect(both('http_requests_total', 'route="/api/v1/products"', 'status_code="429"')).toBe(2);
    expect(both('store_api_rate_limit_rejections_total', 'class="standard"')).toBe(2);
    expect(both('http_requests_total', 'route="/admin/api/v1/customers"', 'method="POST"', 'status_code="201"')).toBe(3 * BATCH);
    expect(both('http_request_duration_seconds_count', 'route="/api/v1/products"')).toBe(62);
    expect(metricSum(a!, 'store_api_db_pool_connections', 'state="total"')).toBeGreaterThanOrEqual(1);
    expect(a!.get('store_api_webhook_queue_depth')).toBe(0);

    const current = await Promise.all(workers.map((w) => scrape(w.base)));
    const succeeded = current.reduce((sum, m) => sum + metricSum(m, 'store_api_webhook_deliveries_succeeded_total'), 0);
    expect(succeeded).toBeGreaterThanOrEqual(1);
    expect(succeeded).toBeLessThanOrEqual(3 * BATCH);
    for (const m of current) {
      expect(metricSum(m, 'store_api_webhook_queue_depth')).toBe(0);
      expect(metricSum(m, 'store_api_webhook_deliveries_failed_total')).toBe(0);
      expect(metricSum(m, 'store_api_retention_runs_total', 'result="ok"')).toBeGreaterThanOrEqual(1);
    }
  });
});
