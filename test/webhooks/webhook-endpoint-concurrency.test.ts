/**
 * Per-endpoint concurrency against real receivers: a fast receiver is given more than the initial
 * WEBHOOK_ENDPOINT_CONCURRENCY slots, a slow one loses its extra slots, and deliveries a worker
 * claimed ahead but did not send go back to the queue when it stops. Everything checked is an
 * order of events at the receiver (how many requests were open when one arrived), never a speed.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ServerResponse } from 'node:http';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import type { ClaimedDelivery } from '../../src/webhooks/delivery-queue.ts';
import { startWebhookWorker } from '../../src/webhooks/webhook-worker.ts';

/** Initial per-endpoint limit (the default). */
const INITIAL = 4;

describe.each(backends)('adaptive endpoint concurrency (%s)', (backend) => {
  let kit: WebhookTestKit;

  beforeAll(async () => {
    kit = await webhookTestKit(
      backend,
      {
        WEBHOOK_CONCURRENCY: '16',
        WEBHOOK_ENDPOINT_CONCURRENCY: String(INITIAL),
        WEBHOOK_ENDPOINT_CONCURRENCY_MAX: '16',
        WEBHOOK_BREAKER_THRESHOLD: '1000',
      },
      { worker: false },
    );
  });
  afterAll(async () => {
    await kit?.close();
  });

  async function ping(endpointId: string, n: number): Promise<void> {
    for (let i = 0; i < n; i++) await kit.api('POST', `/webhooks/endpoints/${endpointId}/ping`);
  }

  it('a receiver that answers fast is given more than the initial slots', async () => {
    const receiver = await new WebhookReceiver().start();
    // The first answers come at once; from then on requests are held until twice the initial
    // limit are open together, which a worker held to the initial limit never reaches (a request
    // the worker gave up on, at its timeout, is no longer open and does not count).
    const FAST = 30;
    const held = new Set<ServerResponse>();
    const answerHeld = () => {
      for (const r of held) r.writeHead(200).end('ok');
      held.clear();
    };
    receiver.respond = (req, n, res, socket) => {
      if (n <= FAST) return ok(req, n, res, socket);
      held.add(res);
      res.on('close', () => held.delete(res));
      if (held.size === 2 * INITIAL) answerHeld();
    };
    const endpoint = await kit.createEndpoint(receiver.url);
    await ping(endpoint.id, FAST + 2 * INITIAL);
    const worker = await kit.startWorker();
    const attempts = waitForAttempts(worker, FAST + 2 * INITIAL, (r) => r.endpointId === endpoint.id);
    try {
      await receiver.waitForRequests(FAST + 2 * INITIAL);
      // Every delivery succeeded on its first attempt: the held ones were answered together.
      expect((await attempts).every((r) => r.attemptNumber === 1 && r.settlement?.status === 'succeeded')).toBe(true);
      await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    } finally {
      answerHeld();
      await worker.stop();
      await receiver.close();
    }
  });

  it('a receiver that answers slowly loses its extra slots: one request at a time', async () => {
    const slowKit = await webhookTestKit(
      backend,
      {
        WEBHOOK_CONCURRENCY: '16',
        WEBHOOK_ENDPOINT_CONCURRENCY: String(INITIAL),
        // Every answer of the receiver below counts as slow.
        WEBHOOK_SLOW_ANSWER_MS: '1',
        WEBHOOK_BREAKER_THRESHOLD: '1000',
      },
      { worker: false },
    );
    const receiver = await new WebhookReceiver().start();
    let open = 0;
    const openAtArrival: number[] = [];
    receiver.respond = (req, n, res, socket) => {
      open++;
      openAtArrival.push(open);
      // The receiver's own pace (it is what is slow), not a wait in the test.
      setTimeout(() => {
        open--;
        ok(req, n, res, socket);
      }, 20);
    };
    try {
      const endpoint = await slowKit.createEndpoint(receiver.url);
      const N = 20;
      for (let i = 0; i < N; i++) await slowKit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
      await slowKit.startWorker();
      await receiver.waitForRequests(N);
      // At first up to the initial limit were open together; after each slow answer one fewer, so
      // the last requests each arrived alone.
      expect(Math.max(...openAtArrival.slice(0, INITIAL))).toBeLessThanOrEqual(INITIAL);
      expect(openAtArrival.slice(-5)).toEqual([1, 1, 1, 1, 1]);
    } finally {
      await slowKit.close();
      await receiver.close();
    }
  });

  it('claims ahead of its free slots, and gives back what it did not send when it stops', async () => {
    const receiver = await new WebhookReceiver().start();
    const held: ServerResponse[] = [];
    receiver.respond = (_req, _n, res) => void held.push(res);
    const endpoint = await kit.createEndpoint(receiver.url);
    const N = 20;
    await ping(endpoint.id, N);
    const worker = await kit.startWorker();
    const claimed: ClaimedDelivery[] = [];
    worker.events.on('claimed', (rows) => claimed.push(...rows.filter((r) => r.endpointId === endpoint.id)));
    await receiver.waitForRequests(INITIAL);
    // Requests hang: the initial limit is open, and more than that was claimed.
    expect(receiver.requests.length).toBe(INITIAL);
    expect(claimed.length).toBeGreaterThan(INITIAL);
    const stopping = worker.stop();
    for (const r of held.splice(0)) r.writeHead(200).end('ok');
    await stopping;

    const { rows } = await sql<{ status: string; locked_by: string | null; attempt_count: number; attempts: number }>`
      SELECT d.status, d.locked_by, d.attempt_count, (SELECT count(*)::int FROM webhook_attempts a WHERE a.delivery_id = d.id) AS attempts
      FROM webhook_deliveries d WHERE d.endpoint_id = ${endpoint.id}::uuid
    `.execute(kit.t.database.db);
    const sent = rows.filter((r) => r.status === 'succeeded');
    const unsent = rows.filter((r) => r.status !== 'succeeded');
    expect(sent).toHaveLength(INITIAL);
    expect(sent.every((r) => r.attempt_count === 1 && r.attempts === 1)).toBe(true);
    // Released unsent: free for any worker, no attempt used or recorded.
    expect(unsent).toHaveLength(N - INITIAL);
    expect(unsent.every((r) => r.status === 'pending' && r.locked_by === null && r.attempt_count === 0 && r.attempts === 0)).toBe(true);
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    await receiver.close();
  });

  it('a claimed delivery whose lease no longer covers an attempt is released unsent and claimed afresh', async () => {
    const receiver = await new WebhookReceiver().start();
    const held: ServerResponse[] = [];
    receiver.respond = (_req, _n, res) => void held.push(res);
    const endpoint = await kit.createEndpoint(receiver.url);
    const N = 12;
    await ping(endpoint.id, N);
    // The worker's clock jumps forward while requests hang: what it claimed ahead then has less
    // lease left (WEBHOOK_LEASE_MS 10 s) than an attempt may take (WEBHOOK_TIMEOUT_MS 5 s + 0.5 s).
    let skew = 0;
    const worker = await startWebhookWorker(kit.t.ctx, { clock: () => Date.now() + skew, listenUrl: kit.t.database.url });
    const claims = new Map<string, number>();
    worker.events.on('claimed', (rows) => rows.forEach((r) => claims.set(r.id, (claims.get(r.id) ?? 0) + 1)));
    try {
      await receiver.waitForRequests(INITIAL);
      expect(claims.size).toBeGreaterThan(INITIAL);
      skew = 6000;
      receiver.respond = ok;
      for (const r of held.splice(0)) r.writeHead(200).end('ok');
      await receiver.waitForRequests(N);
      await vi.waitFor(
        async () => {
          const { rows } = await sql<{
            n: number;
          }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}::uuid AND status = 'succeeded'`.execute(kit.t.database.db);
          expect(rows[0]!.n).toBe(N);
        },
        { timeout: 15_000, interval: 50 },
      );
    } finally {
      for (const r of held.splice(0)) r.writeHead(200).end('ok');
      await worker.stop();
    }
    const { rows } = await sql<{ attempt_count: number; attempts: number; outcomes: string[] }>`
      SELECT d.attempt_count, (SELECT count(*)::int FROM webhook_attempts a WHERE a.delivery_id = d.id) AS attempts,
        (SELECT array_agg(a.outcome) FROM webhook_attempts a WHERE a.delivery_id = d.id) AS outcomes
      FROM webhook_deliveries d WHERE d.endpoint_id = ${endpoint.id}::uuid
    `.execute(kit.t.database.db);
    // Some were claimed twice (released, then claimed again), yet every delivery was sent once and
    // has one attempt, a success: a release uses no attempt and records none.
    expect([...claims.values()].some((n) => n > 1)).toBe(true);
    expect(rows.every((r) => r.attempt_count === 1 && r.attempts === 1 && r.outcomes[0] === 'success')).toBe(true);
    expect(new Set(receiver.requests.map((r) => r.headers['webhook-id'])).size).toBe(N);
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    await receiver.close();
  });
});
