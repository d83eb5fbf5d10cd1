/**
 * Searching deliveries and their statistics through the admin API (inject, every back end), on deliveries and attempts
 * written with known values: searching deliveries by delivery id or event id, filtering by event
 * type and creation range (bad values refused with problem+json naming the parameter); an
 * endpoint's success rate and latency p50/p95 over 24 hours and 7 days (decision 0021); replay
 * with failed_only, its dry run (the count before confirming) and its audit entry; a viewer reads
 * all of it but cannot replay.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const iso = (ms: number) => new Date(ms).toISOString();

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  return (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='))!.split(';')[0]!;
}

describe.each(backends)('delivery search, endpoint statistics and failed-only replay (%s)', (backend) => {
  let kit: WebhookTestKit;
  let endpointId: string;
  let otherEndpointId: string;
  const now = Date.now();
  /** Events of the log, each with the delivery written for it. */
  const events: { id: string; type: string; at: number; status: string; deliveryId: string; endpoint: 'one' | 'other' }[] = [];
  let viewer: { cookie: string; csrf: string };

  const db = () => kit.t.database.db;
  const insertEvent = async (type: string, at: number) => {
    const id = randomUUID();
    await sql`INSERT INTO events (id, type, resource_type, resource_id, data, created_at) VALUES (${id}, ${type}, 'order', 'x', ${JSON.stringify({ id: 'x' })}::jsonb, ${iso(at)})`.execute(
      db(),
    );
    return id;
  };
  const insertDelivery = async (eventId: string, type: string, endpoint: string, status: string, at: number) => {
    const id = randomUUID();
    await sql`
      INSERT INTO webhook_deliveries (id, event_id, event_type, endpoint_id, status, attempt_count, next_attempt_at, created_at, updated_at)
      VALUES (${id}, ${eventId}, ${type}, ${endpoint}, ${status}, 1, ${status === 'failed' || status === 'pending' ? iso(now + DAY) : null}, ${iso(at)}, ${iso(at)})
    `.execute(db());
    return id;
  };
  /** One attempt of `deliveryId` at `at` (updated_at follows, as a settle stamps it). */
  const insertAttempt = async (deliveryId: string, at: number, durationMs: number, statusCode: number | null, outcome: string) => {
    await sql`
      INSERT INTO webhook_attempts (id, delivery_id, attempt_number, started_at, duration_ms, status_code, outcome)
      VALUES (${randomUUID()}, ${deliveryId}, 1, ${iso(at)}, ${durationMs}, ${statusCode}, ${outcome})
    `.execute(db());
    await sql`UPDATE webhook_deliveries SET updated_at = greatest(updated_at, ${iso(at + durationMs)}::timestamptz) WHERE id = ${deliveryId}::uuid`.execute(
      db(),
    );
  };

  beforeAll(async () => {
    kit = await webhookTestKit(backend, {}, { worker: false });
    // Disabled: no worker runs here, and nothing may be claimed behind the test's back.
    endpointId = (await kit.createEndpoint('http://127.0.0.1:9/one', { enabled: false })).id;
    otherEndpointId = (await kit.createEndpoint('http://127.0.0.1:9/other', { enabled: false })).id;
    const plan: [string, number, string, 'one' | 'other'][] = [
      ['order.created', now - 10 * HOUR, 'succeeded', 'one'],
      ['order.updated', now - 9 * HOUR, 'dead', 'one'],
      ['customer.created', now - 8 * HOUR, 'dead', 'one'],
      ['order.created', now - 7 * HOUR, 'failed', 'one'],
      ['order.updated', now - 6 * HOUR, 'succeeded', 'one'],
      ['order.created', now - 5 * HOUR, 'dead', 'other'],
    ];
    for (const [type, at, status, endpoint] of plan) {
      const id = await insertEvent(type, at);
      const deliveryId = await insertDelivery(id, type, endpoint === 'one' ? endpointId : otherEndpointId, status, at);
      events.push({ id, type, at, status, deliveryId, endpoint });
    }
    // The dead order.updated was delivered again later and is dead again: still never got through.
    await insertDelivery(events[1]!.id, 'order.updated', endpointId, 'dead', now - 4 * HOUR);
    // The dead customer.created was replayed and succeeded: it got through.
    await insertDelivery(events[2]!.id, 'customer.created', endpointId, 'succeeded', now - 3 * HOUR);

    await createAdminUser(kit.t.database.db, { email: 'viewer@example.com', password: 'correct horse battery', role: 'viewer' });
    const login = await kit.t.app.inject({
      method: 'POST',
      url: '/admin/session',
      payload: { email: 'viewer@example.com', password: 'correct horse battery' },
    });
    viewer = { cookie: cookieOf(login), csrf: login.json().data.csrf_token };
  });
  afterAll(async () => kit?.close());

  const list = async (query: string) => {
    const res = await kit.api('GET', `/webhooks/deliveries?${query}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body.data as { id: string; event_id: string; event_type: string; created_at: string }[]).map((d) => d.id);
  };

  it('finds a delivery by its id, and every delivery of an event by the event id', async () => {
    expect(await list(`id=${events[0]!.deliveryId}`)).toEqual([events[0]!.deliveryId]);
    const ofEvent = await list(`id=${events[1]!.id}`);
    expect(ofEvent).toHaveLength(2);
    expect(ofEvent).toContain(events[1]!.deliveryId);
    expect(await list(`id=${randomUUID()}`)).toEqual([]);
    // Combined with the endpoint: the other endpoint's delivery of no event of this one.
    expect(await list(`id=${events[5]!.id}&endpoint_id=${endpointId}`)).toEqual([]);
  });

  it('filters by event type and by creation range, with paging inside the filter', async () => {
    const created = events.filter((e) => e.type === 'order.created').map((e) => e.deliveryId);
    expect(await list('event_type=order.created')).toEqual([...created].reverse());
    expect(await list(`event_type=order.created&endpoint_id=${endpointId}`)).toEqual([events[3]!.deliveryId, events[0]!.deliveryId]);
    // [now-9h, now-6h): the 9 h, 8 h and 7 h deliveries, newest first.
    const range = await list(`from=${iso(now - 9 * HOUR)}&to=${iso(now - 6 * HOUR)}`);
    expect(range).toEqual([events[3]!.deliveryId, events[2]!.deliveryId, events[1]!.deliveryId]);
    const first = await kit.api('GET', `/webhooks/deliveries?from=${iso(now - 9 * HOUR)}&to=${iso(now - 6 * HOUR)}&limit=2`);
    expect(first.body.pagination.has_more).toBe(true);
    const second = await list(`from=${iso(now - 9 * HOUR)}&to=${iso(now - 6 * HOUR)}&limit=2&cursor=${encodeURIComponent(first.body.pagination.next_cursor)}`);
    expect(second).toEqual([events[1]!.deliveryId]);
    // A date alone is midnight UTC.
    const day = iso(now + 2 * DAY).slice(0, 10);
    expect(await list(`from=${day}`)).toEqual([]);
  });

  it('refuses a bad id, an unknown type and an invalid or inverted range with problem+json naming the parameter', async () => {
    const cases: [string, string][] = [
      ['id=not-a-uuid', 'id'],
      ['event_type=order.exploded', 'event_type'],
      ['from=yesterday', 'from'],
      ['to=2026-13-01', 'to'],
      [`from=${iso(now)}&to=${iso(now - HOUR)}`, 'to'],
      [`from=${iso(now)}&to=${iso(now)}`, 'to'],
    ];
    for (const [query, param] of cases) {
      const res = await kit.t.app.inject({ url: `/admin/api/v1/webhooks/deliveries?${query}`, headers: kit.admin });
      expect(res.statusCode, query).toBe(400);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(
        res.json().errors.map((e: { param: string }) => e.param),
        query,
      ).toContain(param);
    }
  });

  it('computes success rate and latency p50/p95 over 24 hours and 7 days from the attempts', async () => {
    // A fresh endpoint whose attempts are all known.
    const id = (await kit.createEndpoint('http://127.0.0.1:9/stats', { enabled: false })).id;
    const eventId = await insertEvent('order.created', now - 10 * DAY);
    const recent = await insertDelivery(eventId, 'order.created', id, 'succeeded', now - 2 * HOUR);
    const older = await insertDelivery(eventId, 'order.created', id, 'dead', now - 3 * DAY);
    const ancient = await insertDelivery(eventId, 'order.created', id, 'dead', now - 9 * DAY);
    // Last 24 h: 20 responses (10, 20, … 200 ms), 18 successes and two HTTP 500s, and two
    // connection errors (no response, 1 ms: not latency, but failures).
    for (let i = 1; i <= 20; i++) await insertAttempt(recent, now - HOUR - i * 60_000, i * 10, i <= 18 ? 200 : 500, i <= 18 ? 'success' : 'http_error');
    await insertAttempt(recent, now - 30 * 60_000, 1, null, 'connection_error');
    await insertAttempt(recent, now - 20 * 60_000, 1, null, 'connection_error');
    // 3 days ago: 8 timeouts (no response) and two 4xx answers of 1000 and 3000 ms.
    for (let i = 0; i < 8; i++) await insertAttempt(older, now - 3 * DAY + i * 1000, 5000, null, 'timeout');
    await insertAttempt(older, now - 3 * DAY + 10_000, 1000, 400, 'http_error');
    await insertAttempt(older, now - 3 * DAY + 20_000, 3000, 404, 'http_error');
    // 9 days ago: outside both windows.
    await insertAttempt(ancient, now - 9 * DAY, 99_999, 200, 'success');
    // Another endpoint's attempts never count.
    await insertAttempt(events[5]!.deliveryId, now - HOUR, 77_777, 200, 'success');

    const res = await kit.api('GET', `/webhooks/endpoints/${id}/stats`);
    expect(res.status).toBe(200);
    expect(res.body.data.last_24h).toEqual({
      attempts: 22,
      succeeded: 18,
      success_rate: 18 / 22,
      responses: 20,
      latency_p50_ms: 100,
      latency_p95_ms: 190,
    });
    // 7 days: 32 attempts, 22 responses: 10…200 and 1000, 3000 ms.
    expect(res.body.data.last_7d).toEqual({
      attempts: 32,
      succeeded: 18,
      success_rate: 18 / 32,
      responses: 22,
      latency_p50_ms: 110,
      latency_p95_ms: 1000,
    });

    const empty = await kit.api('GET', `/webhooks/endpoints/${otherEndpointId}/stats`);
    expect(empty.body.data.last_7d).toMatchObject({ attempts: 1, success_rate: 1, latency_p50_ms: 77_777 });
    const none = (await kit.createEndpoint('http://127.0.0.1:9/none', { enabled: false })).id;
    expect((await kit.api('GET', `/webhooks/endpoints/${none}/stats`)).body.data.last_24h).toEqual({
      attempts: 0,
      succeeded: 0,
      success_rate: null,
      responses: 0,
      latency_p50_ms: null,
      latency_p95_ms: null,
    });
    expect((await kit.api('GET', `/webhooks/endpoints/${randomUUID()}/stats`)).status).toBe(404);
  });

  it('counts a replay before it runs (dry run), honours failed_only, and audits the count and the option', async () => {
    const from = iso(now - 11 * HOUR);
    const to = iso(now - 5 * HOUR - 1);
    const count = async (failedOnly: boolean) => {
      const res = await kit.api('GET', `/webhooks/endpoints/${endpointId}/replay-preview?from=${from}&to=${to}&failed_only=${failedOnly}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.data.queued;
    };
    const before = (await list(`endpoint_id=${endpointId}&limit=200`)).length;
    // Every event of the range this endpoint subscribes to (all types): the five of the range are
    // 10 h … 6 h ago; only the dead order.updated never got through (customer.created was
    // replayed and succeeded; the failed order.created is still being retried).
    expect(await count(false)).toBe(5);
    expect(await count(true)).toBe(1);
    expect((await list(`endpoint_id=${endpointId}&limit=200`)).length).toBe(before);

    const replayed = await kit.api('POST', `/webhooks/endpoints/${endpointId}/replay`, { from, to, failed_only: true });
    expect(replayed.status).toBe(202);
    expect(replayed.body.data).toEqual({ queued: 1 });
    const after = await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpointId}&status=pending`);
    expect(after.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([events[1]!.id]);
    // Now the dead one has a delivery on its way: nothing left to replay as failed.
    expect(await count(true)).toBe(0);

    const audit = await kit.api('GET', '/audit-log?action=endpoint.replayed');
    expect(audit.status).toBe(200);
    expect(audit.body.data[0]).toMatchObject({
      action: 'endpoint.replayed',
      target: { type: 'endpoint', id: endpointId },
      details: { from, to, failed_only: true, queued: 1 },
    });

    const bad = await kit.api('GET', `/webhooks/endpoints/${endpointId}/replay-preview?from=${to}&to=${from}`);
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0].param).toBe('to');
  });

  it('lets a viewer search, filter and read statistics, and refuses the viewer a replay with 403 problem+json', async () => {
    const as = (method: 'GET' | 'POST', url: string, payload?: object) =>
      kit.t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { cookie: viewer.cookie, 'x-csrf-token': viewer.csrf }, payload });
    expect((await as('GET', `/webhooks/deliveries?id=${events[0]!.id}&event_type=order.created`)).json().data).toHaveLength(1);
    expect((await as('GET', `/webhooks/endpoints/${endpointId}/stats`)).statusCode).toBe(200);
    const pending = (await list(`endpoint_id=${endpointId}&limit=200`)).length;
    const refused = await as('POST', `/webhooks/endpoints/${endpointId}/replay`, { from: iso(now - 11 * HOUR), to: iso(now) });
    expect(refused.statusCode).toBe(403);
    expect(refused.headers['content-type']).toMatch(/application\/problem\+json/);
    expect((await list(`endpoint_id=${endpointId}&limit=200`)).length).toBe(pending);
  });
});
