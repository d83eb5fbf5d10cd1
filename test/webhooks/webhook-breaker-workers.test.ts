/**
 * The breaker with several workers on one endpoint (decision 0029): attempts past the failure that
 * opens it are bounded. Each worker stops sending to the endpoint at its first failed attempt until
 * that attempt's settle says whether the breaker opened (the settle reads the failures every worker
 * counted), so past the threshold-th failure a worker's attempts are at most those it had in flight
 * when the breaker opened: its concurrency limit for the endpoint (the bound of decision 0029).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver } from './webhook-receiver.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const THRESHOLD = 10;
const WORKERS = 3;
const ENDPOINT_CONCURRENCY = 4;
const EVENTS = 60;

describe.each(backends)('breaker with several workers on one endpoint (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    kit = await webhookTestKit(
      backend,
      {
        WEBHOOK_BREAKER_THRESHOLD: String(THRESHOLD),
        WEBHOOK_BREAKER_PAUSE_MS: '600000',
        WEBHOOK_ENDPOINT_CONCURRENCY: String(ENDPOINT_CONCURRENCY),
        WEBHOOK_RETRY_SCHEDULE_MS: '600000,600000,600000,600000,600000',
        WEBHOOK_LEASE_MS: '20000',
        WEBHOOK_TIMEOUT_MS: '10000',
      },
      { worker: false },
    );
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it(`${WORKERS} workers against a failing endpoint: past the threshold-th failure, at most each worker's concurrency in flight`, async () => {
    // Every answer a 500, a little late: each worker keeps several requests in flight.
    receiver.respond = (_req, _n, res) => void setTimeout(() => res.writeHead(500).end('down'), 30);
    const endpoint = await kit.createEndpoint(receiver.url);
    for (let i = 0; i < EVENTS; i++) await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    const workers = [];
    for (let i = 0; i < WORKERS; i++) workers.push(await kit.startWorker());
    try {
      // Until the breaker is open and nothing of the endpoint is held or in flight any more.
      await vi.waitFor(
        async () => {
          const { rows } = await sql<{ paused: boolean; held: number }>`
            SELECT e.paused_until > now() AS paused,
              (SELECT count(*)::int FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.locked_by IS NOT NULL) AS held
            FROM webhook_endpoints e WHERE e.id = ${endpoint.id}::uuid`.execute(kit.t.database.db);
          expect(rows[0]).toEqual({ paused: true, held: 0 });
        },
        { timeout: 30_000, interval: 50 },
      );
    } finally {
      for (const w of workers) await w.stop();
    }
    const { rows } = await sql<{ attempts: number; failures: number }>`
      SELECT (SELECT count(*)::int FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = e.id) AS attempts,
        e.consecutive_failures AS failures
      FROM webhook_endpoints e WHERE e.id = ${endpoint.id}::uuid`.execute(kit.t.database.db);
    const past = receiver.requests.length - THRESHOLD;
    console.info(
      `${backend}: ${receiver.requests.length} requests, ${rows[0]!.attempts} attempts recorded, ${rows[0]!.failures} consecutive failures; ${past} past the threshold`,
    );
    expect(rows[0]!.attempts).toBe(receiver.requests.length);
    expect(rows[0]!.failures).toBe(receiver.requests.length);
    expect(past).toBeLessThanOrEqual(WORKERS * ENDPOINT_CONCURRENCY - 1);
  });
});
