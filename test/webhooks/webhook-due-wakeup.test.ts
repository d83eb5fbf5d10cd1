/**
 * Retries and breaker probes go out when they fall due, not up to one poll interval late: the
 * dispatch loop sleeps until the next delivery falls due. The poll interval is set deliberately
 * large (a minute) and the retry schedule and breaker pause short, so a loop that slept a whole
 * interval would miss the deadline by far more than any slow machine could: the bound asserted is
 * half the poll interval, derived from the configuration, not a guess at speed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const POLL_INTERVAL_MS = 60_000;
const RETRY_MS = 300;
const PAUSE_MS = 500;
/** A loop that sleeps a whole poll interval misses this; one that sleeps until the due time never does. */
const ON_TIME_MS = POLL_INTERVAL_MS / 2;

describe.each(backends)('dispatch wakes when a delivery falls due (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, {
      WEBHOOK_POLL_INTERVAL_MS: String(POLL_INTERVAL_MS),
      // Leases longer than the poll interval: the dispatcher must not rely on one ending to look again.
      WEBHOOK_LEASE_MS: String(2 * POLL_INTERVAL_MS),
      WEBHOOK_RETRY_SCHEDULE_MS: Array(5).fill(RETRY_MS).join(','),
      WEBHOOK_BREAKER_THRESHOLD: '2',
      WEBHOOK_BREAKER_PAUSE_MS: String(PAUSE_MS),
    });
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('a retry goes out when its delay has passed, not at the next poll', async () => {
    let failures = 1;
    receiver.respond = (req, n, res, socket) => (failures-- > 0 ? res.writeHead(503).end() : ok(req, n, res, socket));
    const endpoint = await kit.createEndpoint(receiver.url);
    const both = waitForAttempts(kit.worker, 2, (r) => r.endpointId === endpoint.id, ON_TIME_MS);
    await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    const [first, retry] = await both;
    expect(first!.settlement).toMatchObject({ status: 'failed' });
    expect(retry!.settlement).toMatchObject({ status: 'succeeded' });
    const dueAt = (first!.settlement as { nextAttemptAt: number }).nextAttemptAt;
    expect(retry!.startedAt).toBeGreaterThanOrEqual(dueAt);
    expect(retry!.startedAt - dueAt).toBeLessThan(ON_TIME_MS);
  });

  it("the breaker's probe goes out when the pause ends, not at the next poll", async () => {
    // Down until the breaker has opened, up from then on.
    let up = false;
    receiver.respond = (req, n, res, socket) => (up ? ok(req, n, res, socket) : res.writeHead(500).end());
    const endpoint = await kit.createEndpoint(receiver.url, {});
    const tripped = waitForAttempts(kit.worker, 2, (r) => r.endpointId === endpoint.id, ON_TIME_MS);
    await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    const failures2 = await tripped;
    up = true;
    // The pause began when the second failure settled: after it started, before its report arrived.
    const reportedAt = Date.now();
    expect(failures2.map((r) => r.settlement?.status)).toEqual(['failed', 'failed']);
    const [probe] = await waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id, ON_TIME_MS);
    expect(probe!.settlement).toMatchObject({ status: 'succeeded' });
    // (Either failure may be the one that opened it: both may settle in one batch.)
    expect(probe!.startedAt).toBeGreaterThanOrEqual(Math.min(...failures2.map((r) => r.startedAt)) + PAUSE_MS);
    expect(probe!.startedAt - (reportedAt + PAUSE_MS)).toBeLessThan(ON_TIME_MS);
  });
});
