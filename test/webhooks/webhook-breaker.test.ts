/**
 * The circuit breaker against a real receiver, with the pause shrunk to 1.5 s: it opens at the 10th
 * consecutive failure, due deliveries wait (not failed) while it is open, then one probe goes out;
 * a failed probe pauses again, a successful one resets the endpoint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const PAUSE_MS = 1500;

describe.each(backends)('circuit breaker (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, {
      WEBHOOK_BREAKER_THRESHOLD: '10',
      WEBHOOK_BREAKER_PAUSE_MS: String(PAUSE_MS),
      // One delivery at a time to the endpoint, so the failure count is exact; retries far away.
      WEBHOOK_ENDPOINT_CONCURRENCY: '1',
      WEBHOOK_RETRY_SCHEDULE_MS: '600000,600000,600000,600000,600000',
    });
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('opens at 10 consecutive failures, holds due deliveries, probes after the pause, re-pauses on failure and resets on success', async () => {
    // Requests 1–11 fail (10 to open the breaker, then the first probe); the second probe succeeds.
    receiver.respond = (req, n, res, socket) => (n <= 11 ? res.writeHead(500).end('down') : ok(req, n, res, socket));
    const endpoint = await kit.createEndpoint(receiver.url);
    const tenFailures = waitForAttempts(kit.worker, 10, (r) => r.endpointId === endpoint.id);
    const pings: string[] = [];
    for (let i = 0; i < 12; i++) pings.push((await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data.delivery_id);
    const failures = await tenFailures;
    expect(failures.every((r) => r.settlement?.status === 'failed')).toBe(true);

    const paused = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data;
    expect(paused).toMatchObject({ state: 'paused', consecutive_failures: 10, enabled: true });
    const pausedUntil = Date.parse(paused.paused_until);
    expect(receiver.requests).toHaveLength(10);
    // The deliveries due meanwhile wait: still pending, never attempted.
    const waiting = (await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint.id}&status=pending`)).body.data;
    expect(waiting.map((d: { id: string }) => d.id).sort()).toEqual(pings.slice(10).sort());
    expect(waiting.every((d: { attempt_count: number }) => d.attempt_count === 0)).toBe(true);

    // After the pause: one probe (request 11), which fails → paused again.
    const probe1 = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    const [, second] = [await receiver.waitForRequests(11, 15_000), await probe1];
    const probeAt = receiver.requests[10]!.at;
    expect(probeAt).toBeGreaterThanOrEqual(pausedUntil - 5);
    expect(probeAt - pausedUntil).toBeLessThan(1000);
    expect(second[0]!.settlement?.status).toBe('failed');
    const repaused = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data;
    expect(repaused).toMatchObject({ state: 'paused', consecutive_failures: 11 });
    const repausedUntil = Date.parse(repaused.paused_until);
    expect(repausedUntil).toBeGreaterThanOrEqual(probeAt + PAUSE_MS - 50);
    expect(receiver.requests).toHaveLength(11); // exactly one probe

    // The second probe (request 12) succeeds → the endpoint is reset and deliveries flow at once.
    const probe2 = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    await receiver.waitForRequests(12, 15_000);
    expect(receiver.requests[11]!.at).toBeGreaterThanOrEqual(repausedUntil - 5);
    expect((await probe2)[0]!.settlement?.status).toBe('succeeded');
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data).toMatchObject({
      state: 'active', consecutive_failures: 0, paused_until: null,
    });
    const before = Date.now();
    const fresh = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    expect((await fresh)[0]!.settlement?.status).toBe('succeeded');
    expect(Date.now() - before).toBeLessThan(PAUSE_MS);
  });

  it('an admin re-enabling an endpoint closes its breaker at once', async () => {
    receiver.respond = (_req, _n, res) => res.writeHead(500).end();
    const endpoint = await kit.createEndpoint(receiver.url);
    const tenFailures = waitForAttempts(kit.worker, 10, (r) => r.endpointId === endpoint.id);
    for (let i = 0; i < 10; i++) await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    await tenFailures;
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data.state).toBe('paused');
    const reset = await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: true });
    expect(reset.body.data).toMatchObject({ state: 'active', consecutive_failures: 0, paused_until: null });
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });
});
