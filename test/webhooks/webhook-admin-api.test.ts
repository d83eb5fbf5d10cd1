/**
 * The webhook admin API: endpoint registry and validation, secrets and rotation (both signatures
 * during the overlap), 410 Gone, Retry-After, replays, delivery lists with cursors, statistics,
 * and what the poller fans out to whom.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { backends } from '../helpers/test-database.ts';
import { createCustomer, updateCustomer } from '../../src/customers/customer.service.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const DAY = 86_400_000;

describe.each(backends)('webhook admin API (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    kit = await webhookTestKit(backend);
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('registers, lists, reads and updates endpoints; the secret only through its own route', async () => {
    const created = await kit.api('POST', '/webhooks/endpoints', { url: receiver.url, event_types: ['order.created', 'order.updated'], description: 'ERP' });
    expect(created.status).toBe(201);
    const endpoint = created.body.data;
    expect(endpoint).toMatchObject({
      url: receiver.url,
      description: 'ERP',
      event_types: ['order.created', 'order.updated'],
      enabled: true,
      state: 'active',
      paused_until: null,
      consecutive_failures: 0,
      disabled_reason: null,
    });
    expect(endpoint.secret).toMatch(/^whsec_/);
    expect(endpoint.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    const read = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data;
    expect(read).not.toHaveProperty('secret');
    expect(read).toEqual(Object.fromEntries(Object.entries(endpoint).filter(([k]) => k !== 'secret')));
    expect((await kit.api('GET', '/webhooks/endpoints')).body.data.map((e: { id: string }) => e.id)).toContain(endpoint.id);
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/secret`)).body.data).toEqual({
      secret: endpoint.secret,
      previous_secret_expires_at: null,
    });

    const patched = await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { event_types: [], description: null, enabled: false });
    expect(patched.body.data).toMatchObject({
      event_types: [],
      description: null,
      enabled: false,
      state: 'disabled',
      disabled_reason: 'disabled by an administrator',
    });
    expect(patched.body.data.url).toBe(receiver.url);
  });

  it('refuses bad input with problem+json', async () => {
    const cases: [unknown, string][] = [
      [{ url: 'ftp://example.com/x' }, 'url'],
      [{ url: 'http://127.0.0.1:1/x', event_types: ['order.deleted'] }, ''],
      [{ url: 'http://127.0.0.1:1/x', event_types: ['ping'] }, ''],
      [{ url: 'http://127.0.0.1:1/x', secret: 'mine' }, ''],
      [{}, ''],
    ];
    for (const [body] of cases) {
      const res = await kit.t.app.inject({ method: 'POST', url: '/admin/api/v1/webhooks/endpoints', headers: kit.admin, payload: body as object });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    }
    expect((await kit.api('GET', '/webhooks/endpoints/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await kit.api('GET', '/webhooks/deliveries?status=lost')).status).toBe(400);
    expect((await kit.api('GET', '/webhooks/deliveries?limit=201')).status).toBe(400);
    const unauthenticated = await kit.t.app.inject({ method: 'GET', url: '/admin/api/v1/webhooks/endpoints' });
    expect(unauthenticated.statusCode).toBe(401);
    const reader = await kit.t.app.inject({ method: 'GET', url: '/admin/api/v1/webhooks/endpoints', headers: await kit.t.auth() });
    expect(reader.statusCode).toBe(403);
  });

  it('refuses private and loopback URLs unless the deployment allows them', async () => {
    const strict = await webhookTestKit(backend, { WEBHOOK_ALLOW_PRIVATE_URLS: 'false' }, { worker: false });
    try {
      for (const url of [
        'http://127.0.0.1:8080/h',
        'http://localhost/h',
        'http://10.0.0.8/h',
        'http://[::1]/h',
        'http://169.254.169.254/',
        // IPv4 inside IPv6 spellings: IPv4-compatible, IPv4-mapped in hex, NAT64, 6to4.
        'http://[::127.0.0.1]/h',
        'http://[::ffff:7f00:1]/h',
        'http://[64:ff9b::a9fe:a9fe]/',
        'http://[2002:a00:1::]/h',
      ]) {
        const res = await strict.api('POST', '/webhooks/endpoints', { url });
        expect(res.status, url).toBe(400);
        expect(res.body.errors[0].param).toBe('url');
      }
    } finally {
      await strict.close();
    }
  });

  it('rotates the secret: both signatures are sent during the overlap and each verifies', async () => {
    receiver.respond = ok;
    const endpoint = await kit.createEndpoint(receiver.url);
    const rotated = await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.data.secret).not.toBe(endpoint.secret);
    expect(Date.parse(rotated.body.data.previous_secret_expires_at) - Date.now()).toBeGreaterThan(DAY - 60_000);
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/secret`)).body.data).toEqual(rotated.body.data);

    const done = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    const ping = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data;
    await done;
    const [request] = await receiver.waitFor((r) => r.json.id === ping.event_id);
    expect(request!.headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(rotated.body.data.secret).verify(request!.body, request!.headers)).toMatchObject({ type: 'ping' });
    expect(new Webhook(endpoint.secret).verify(request!.body, request!.headers)).toMatchObject({ type: 'ping' });
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });

  it('a 410 Gone disables the endpoint; re-enabling and retrying delivers', async () => {
    receiver.respond = (_req, _n, res) => res.writeHead(410).end('gone');
    const endpoint = await kit.createEndpoint(receiver.url);
    const gone = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    const ping = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data;
    expect((await gone)[0]).toMatchObject({ endpointDisabled: true, settlement: { status: 'failed' } });
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data).toMatchObject({
      enabled: false,
      state: 'disabled',
      disabled_reason: 'the receiver answered 410 Gone',
    });
    expect((await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).status).toBe(409);

    receiver.respond = ok;
    expect((await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: true })).body.data).toMatchObject({
      state: 'active',
      disabled_reason: null,
    });
    const delivered = waitForAttempts(kit.worker, 1, (r) => r.deliveryId === ping.delivery_id);
    expect((await kit.api('POST', `/webhooks/deliveries/${ping.delivery_id}/retry`)).body.data.status).toBe('pending');
    expect((await delivered)[0]!.settlement).toEqual({ status: 'succeeded' });
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });

  it('honours a Retry-After longer than the scheduled delay', async () => {
    receiver.respond = (_req, _n, res) => res.writeHead(429, { 'retry-after': '300' }).end();
    const endpoint = await kit.createEndpoint(receiver.url);
    const limited = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    const ping = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`)).body.data;
    const [report] = await limited;
    expect(report!.result).toMatchObject({ statusCode: 429, retryAfterMs: 300_000 });
    const delivery = (await kit.api('GET', `/webhooks/deliveries/${ping.delivery_id}`)).body.data;
    const attemptEnd = Date.parse(delivery.attempts[0].started_at) + delivery.attempts[0].duration_ms;
    // Scheduled delay here is 60 s; the receiver asked for 300 s.
    expect(Date.parse(delivery.next_attempt_at) - attemptEnd).toBeGreaterThanOrEqual(299_000);
    expect(Date.parse(delivery.next_attempt_at) - attemptEnd).toBeLessThan(305_000);
    expect(delivery).toMatchObject({ status: 'failed', last_status_code: 429 });
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });

  it('fans events out only to subscribed, enabled endpoints registered before the change; replays a time range to one endpoint', async () => {
    receiver.respond = ok;
    const early = (await createCustomer(kit.t.database.db, { name: 'Before Registration' })) as { id: string };
    const customers = await kit.createEndpoint(receiver.url, { event_types: ['customer.created', 'customer.updated'] });
    const ordersOnly = await kit.createEndpoint(receiver.url, { event_types: ['order.created'] });
    const disabled = await kit.createEndpoint(receiver.url, { enabled: false });
    const from = new Date().toISOString();
    const three = waitForAttempts(kit.worker, 3, (r) => r.endpointId === customers.id);
    const customer = (await createCustomer(kit.t.database.db, { name: 'Replayed' })) as { id: string };
    await updateCustomer(kit.t.database.db, customer.id, { city: 'Lyon' });
    await updateCustomer(kit.t.database.db, customer.id, { city: 'Nantes' });
    const reports = await three;
    // Deliveries to one endpoint run side by side: no order is promised, only that each arrives.
    expect(reports.map((r) => r.eventType).sort()).toEqual(['customer.created', 'customer.updated', 'customer.updated']);
    const to = new Date(Date.now() + 1000).toISOString();
    for (const other of [ordersOnly, disabled]) {
      expect((await kit.api('GET', `/webhooks/deliveries?endpoint_id=${other.id}`)).body.data).toEqual([]);
    }
    const all = (await kit.api('GET', `/webhooks/deliveries?endpoint_id=${customers.id}`)).body.data;
    expect(all.some((d: { event_id: string }) => d.event_id === early.id)).toBe(false);

    const replayedTwice = waitForAttempts(kit.worker, 3, (r) => r.endpointId === customers.id);
    const replay = await kit.api('POST', `/webhooks/endpoints/${customers.id}/replay`, { from, to });
    expect(replay.status).toBe(202);
    expect(replay.body.data).toEqual({ queued: 3 });
    const again = await replayedTwice;
    expect(again.map((r) => r.eventId).sort()).toEqual(reports.map((r) => r.eventId).sort());
    expect((await kit.api('POST', `/webhooks/endpoints/${customers.id}/replay`, { from: to, to: from })).status).toBe(400);
    expect((await kit.api('POST', `/webhooks/endpoints/${customers.id}/replay`, { from: 'yesterday', to })).status).toBe(400);
    for (const id of [customers.id, ordersOnly.id]) await kit.api('PATCH', `/webhooks/endpoints/${id}`, { enabled: false });
  });

  it('lists deliveries newest first with cursors, and reports hourly statistics', async () => {
    const everything = (await kit.api('GET', '/webhooks/deliveries?limit=200')).body;
    expect(everything.data.length).toBeGreaterThanOrEqual(8);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = (await kit.api('GET', `/webhooks/deliveries?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).body;
      expect(page.pagination.limit).toBe(3);
      seen.push(...page.data.map((d: { id: string }) => d.id));
      if (!page.pagination.has_more) break;
      cursor = page.pagination.next_cursor;
    }
    expect(seen).toEqual(everything.data.map((d: { id: string }) => d.id));
    const created = everything.data.map((d: { created_at: string }) => d.created_at);
    expect([...created].sort().reverse()).toEqual(created);
    expect(everything.data[0]).toEqual(
      expect.objectContaining({
        id: expect.any(String),
        event_id: expect.any(String),
        event_type: expect.any(String),
        endpoint_id: expect.any(String),
        endpoint_url: receiver.url,
        status: expect.stringMatching(/^(pending|succeeded|failed|dead)$/),
        attempt_count: expect.any(Number),
      }),
    );
    expect((await kit.api('GET', '/webhooks/deliveries?status=succeeded')).body.data.every((d: { status: string }) => d.status === 'succeeded')).toBe(true);

    const stats = (await kit.api('GET', '/webhooks/stats?hours=3')).body.data;
    expect(stats.buckets).toHaveLength(3);
    expect(stats.buckets[2].hour).toBe(new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000).toISOString().replace('.000Z', '.000000Z'));
    const sum = (k: string) => stats.buckets.reduce((n: number, b: Record<string, number>) => n + b[k]!, 0);
    const byStatus = (s: string) => everything.data.filter((d: { status: string }) => d.status === s).length;
    expect(stats.totals).toEqual({ succeeded: byStatus('succeeded'), failed: byStatus('failed'), dead: byStatus('dead'), pending: byStatus('pending') });
    expect(sum('succeeded')).toBe(byStatus('succeeded'));
    expect(sum('failed')).toBeGreaterThanOrEqual(2); // the 410 and the 429 attempts
    expect((await kit.api('GET', '/webhooks/stats')).body.data.buckets).toHaveLength(24);
  });
});
