/**
 * The circuit breaker against a real receiver, with the pause shrunk to 2.5 s: it opens at the 10th
 * consecutive failure, due deliveries wait (not failed) while it is open, then one probe goes out;
 * a failed probe pauses again, a successful one resets the endpoint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import type { AttemptReport } from '../../src/webhooks/webhook-worker.ts';

// Long enough that the state read after the 10th failure comes before the probe on a loaded machine.
const PAUSE_MS = 8000;

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
    // The receiver fails until the first probe has failed, then answers 200.
    let healthy = false;
    receiver.respond = (req, n, res, socket) => (healthy ? ok(req, n, res, socket) : res.writeHead(500).end('down'));
    const endpoint = await kit.createEndpoint(receiver.url);
    const attempts: AttemptReport[] = [];
    const waiters: { n: number; resolve: (r: AttemptReport) => void }[] = [];
    kit.worker.events.on('attempt', (r) => {
      if (r.endpointId !== endpoint.id) return;
      attempts.push(r);
      if (attempts.length === 11) healthy = true;
      for (const w of waiters.filter((w) => w.n === attempts.length)) w.resolve(r);
    });
    /** The endpoint's nth attempt, whenever it happens (before or after this call). */
    const nth = (n: number) => (attempts[n - 1] ? Promise.resolve(attempts[n - 1]!) : new Promise<AttemptReport>((resolve) => waiters.push({ n, resolve })));
    const tenFailures = waitForAttempts(kit.worker, 10, (r) => r.endpointId === endpoint.id);
    const pings: string[] = [];
    for (let i = 0; i < 12; i++) pings.push((await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data.delivery_id);
    const failures = await tenFailures;
    expect(failures.every((r) => r.settlement?.status === 'failed')).toBe(true);

    const paused = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data;
    expect(paused).toMatchObject({ state: 'paused', consecutive_failures: 10, enabled: true });
    const pausedUntil = Date.parse(paused.paused_until);
    expect(attempts).toHaveLength(10);
    // The deliveries due meanwhile wait: still pending, never attempted.
    const waiting = (await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint.id}&status=pending`)).body.data;
    expect(waiting.map((d: { id: string }) => d.id).sort()).toEqual(pings.slice(10).sort());
    expect(waiting.every((d: { attempt_count: number }) => d.attempt_count === 0)).toBe(true);

    // After the pause: one probe, which fails → paused again.
    const probe1 = await nth(11);
    expect(probe1!.startedAt).toBeGreaterThanOrEqual(pausedUntil);
    expect(probe1!.startedAt - pausedUntil).toBeLessThan(5000);
    expect(probe1!.settlement?.status).toBe('failed');
    const repaused = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data;
    expect(repaused).toMatchObject({ state: 'paused', consecutive_failures: 11 });
    const repausedUntil = Date.parse(repaused.paused_until);
    expect(repausedUntil).toBeGreaterThanOrEqual(probe1!.startedAt + PAUSE_MS);
    expect(attempts).toHaveLength(11); // exactly one probe per pause

    // The second probe succeeds → the endpoint is reset and the waiting deliveries flow.
    const probe2 = await nth(12);
    expect(probe2!.startedAt).toBeGreaterThanOrEqual(repausedUntil);
    expect(probe2!.settlement?.status).toBe('succeeded');
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data).toMatchObject({
      state: 'active',
      consecutive_failures: 0,
      paused_until: null,
    });
    const rest = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id && r.settlement?.status === 'succeeded');
    await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    await rest;
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
