/**
 * Test events and deleting endpoints (decision 0020), against a real receiver on every back end:
 * a test event is the catalog's example, signed like any delivery, marked `"test": true` in the
 * envelope and by the `webhook-test` header, shown as a test delivery, absent from the events feed,
 * and its failures never pause the endpoint (the breaker threshold here is 1); deleting an endpoint
 * takes its deliveries along; viewers may do neither; bad input changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { verifyWebhook } from '@store-api/client';
import { backends } from '../helpers/test-database.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  return (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='))!.split(';')[0]!;
}

describe.each(backends)('test events and endpoint deletion (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  let viewer: { cookie: string; 'x-csrf-token': string };
  const asViewer = (method: 'POST' | 'DELETE', url: string, payload?: object) =>
    kit.t.app.inject({ method, url: `/admin/api/v1${url}`, headers: viewer, ...(payload ? { payload } : {}) });
  const del = (url: string) => kit.t.app.inject({ method: 'DELETE', url: `/admin/api/v1${url}`, headers: kit.admin });
  const deliveryCount = async () =>
    Number(
      (await kit.t.database.db
        .selectFrom('webhook_deliveries')
        .select((e) => e.fn.countAll().as('n'))
        .executeTakeFirst())!.n,
    );
  const auditActions = async () =>
    (await kit.api('GET', '/audit-log?limit=200')).body.data.map((e: { action: string; target_id?: string; details: unknown }) => e);

  beforeAll(async () => {
    kit = await webhookTestKit(backend, {
      WEBHOOK_BREAKER_THRESHOLD: '1',
      WEBHOOK_ENDPOINT_CONCURRENCY: '1',
      WEBHOOK_RETRY_SCHEDULE_MS: '600000,600000',
    });
    receiver = await new WebhookReceiver().start();
    await createAdminUser(kit.t.database.db, { email: 'viewer@example.com', password: 'correct horse battery', role: 'viewer' });
    const res = await kit.t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: 'viewer@example.com', password: 'correct horse battery' } });
    viewer = { cookie: cookieOf(res), 'x-csrf-token': res.json().data.csrf_token };
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('delivers the catalog example signed like a real event, marked as a test, to that endpoint only and never in the feed', async () => {
    receiver.respond = ok;
    const endpoint = await kit.createEndpoint(receiver.url);
    const other = await kit.createEndpoint(`${receiver.url}/other`);
    const catalog = (await kit.api('GET', '/event-types')).body.data as { type: string; schema: object; example: { data: unknown } }[];
    const example = catalog.find((e) => e.type === 'order.created')!;

    const sent = await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/test-events`, { type: 'order.created' });
    expect(sent.status).toBe(202);
    expect(sent.body.data).toMatchObject({ type: 'order.created' });
    const [request] = await receiver.waitFor((r) => r.json.id === sent.body.data.event_id);
    expect(request!.path).toBe('/hooks');
    expect(request!.headers['webhook-test']).toBe('true');
    expect(verifyWebhook(request!.body, request!.headers, endpoint.secret).id).toBe(sent.body.data.event_id);
    expect(JSON.parse(request!.body)).toMatchObject({ id: sent.body.data.event_id, type: 'order.created', test: true, data: example.example.data });
    expect(Object.keys(JSON.parse(request!.body))).toEqual(['id', 'type', 'created_at', 'data', 'test']);
    // The body a receiver gets is valid against the catalog's (and the OpenAPI document's) schema of its type.
    const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
    const validate = addFormats(new Ajv({ strict: false, allErrors: true })).compile(example.schema);
    expect(validate(JSON.parse(request!.body)), JSON.stringify(validate.errors)).toBe(true);

    const delivery = (await kit.api('GET', `/webhooks/deliveries/${sent.body.data.delivery_id}`)).body.data;
    expect(delivery).toMatchObject({ test: true, event_type: 'order.created', endpoint_id: endpoint.id });
    const list = (await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint.id}`)).body.data;
    expect(list.find((d: { id: string }) => d.id === sent.body.data.delivery_id)).toMatchObject({ test: true });
    expect((await kit.api('GET', `/webhooks/deliveries?endpoint_id=${other.id}`)).body.data).toEqual([]);

    const token = await kit.t.auth(['orders:read']);
    const feed = await kit.t.app.inject({ url: '/api/v1/events?limit=200', headers: token });
    expect(feed.json().data.map((e: { id: string }) => e.id)).not.toContain(sent.body.data.event_id);
    const replay = await kit.api('POST', `/webhooks/endpoints/${other.id}/replay`, { from: '2000-01-01', to: '2100-01-01' });
    expect(replay.body.data).toEqual({ queued: 0 });

    const audit = (await auditActions()).find((e: { action: string }) => e.action === 'endpoint.test_event_sent');
    expect(audit).toMatchObject({ details: { type: 'order.created', delivery_id: sent.body.data.delivery_id } });
  });

  it('a failed test delivery does not pause the endpoint; a real one does (threshold 1)', async () => {
    const failing = new WebhookReceiver();
    failing.respond = (_req, _n, res) => res.writeHead(500).end('down');
    await failing.start();
    try {
      const endpoint = await kit.createEndpoint(failing.url);
      const attempt = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
      await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/test-events`, { type: 'product.updated' });
      expect((await attempt)[0]!.settlement?.status).toBe('failed');
      expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data).toMatchObject({ state: 'active', consecutive_failures: 0 });

      const real = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id && r.eventType === 'ping');
      await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
      await real;
      expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data).toMatchObject({ state: 'paused', consecutive_failures: 1 });
    } finally {
      await failing.close();
    }
  });

  it('refuses an unknown type, a disabled endpoint, an unknown endpoint and a viewer, changing nothing', async () => {
    const endpoint = await kit.createEndpoint(`${receiver.url}/refusals`);
    const before = await deliveryCount();

    const unknown = await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/test-events`, { type: 'order.exploded' });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body)).toMatch(/type/);
    const missing = await kit.api('POST', '/webhooks/endpoints/00000000-0000-4000-8000-000000000000/test-events', { type: 'order.created' });
    expect(missing.status).toBe(404);
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    const disabled = await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/test-events`, { type: 'order.created' });
    expect(disabled.status).toBe(409);
    expect(disabled.body.detail).toMatch(/disabled/);

    const viewerSend = await asViewer('POST', `/webhooks/endpoints/${endpoint.id}/test-events`, { type: 'order.created' });
    expect(viewerSend.statusCode).toBe(403);
    expect(viewerSend.headers['content-type']).toMatch(/application\/problem\+json/);
    const viewerDelete = await asViewer('DELETE', `/webhooks/endpoints/${endpoint.id}`);
    expect(viewerDelete.statusCode).toBe(403);
    expect(viewerDelete.headers['content-type']).toMatch(/application\/problem\+json/);

    expect(await deliveryCount()).toBe(before);
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).status).toBe(200);
  });

  it('deletes an endpoint with its deliveries and attempts; deleting it again or a bad id is 404', async () => {
    receiver.respond = ok;
    const endpoint = await kit.createEndpoint(`${receiver.url}/doomed`);
    const keep = await kit.createEndpoint(`${receiver.url}/kept`);
    const sent = await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    await receiver.waitFor((r) => r.json.id === sent.body.data.event_id);
    await kit.api('POST', `/webhooks/endpoints/${keep.id}/ping`);
    // One still queued: the worker is not told (direct insert through the API would wake it), so stop it first.
    await kit.worker.stop();
    await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/test-events`, { type: 'customer.created' });
    const keptBefore = (await kit.api('GET', `/webhooks/deliveries?endpoint_id=${keep.id}`)).body.data.length;

    const res = await del(`/webhooks/endpoints/${endpoint.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: endpoint.id, url: `${receiver.url}/doomed` });
    expect(res.json().data.deliveries_deleted).toMatchObject({ succeeded: 1, pending: 1 });
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).status).toBe(404);
    expect((await kit.api('GET', `/webhooks/deliveries/${sent.body.data.delivery_id}`)).status).toBe(404);
    const attempts = await kit.t.database.db.selectFrom('webhook_attempts').select('id').where('delivery_id', '=', sent.body.data.delivery_id).execute();
    expect(attempts).toEqual([]);
    expect((await kit.api('GET', `/webhooks/deliveries?endpoint_id=${keep.id}`)).body.data.length).toBe(keptBefore);

    const again = await del(`/webhooks/endpoints/${endpoint.id}`);
    expect(again.statusCode).toBe(404);
    expect(again.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(again.json().detail).toMatch(endpoint.id);
    expect((await del('/webhooks/endpoints/not-a-uuid')).statusCode).toBe(400);

    const audit = (await auditActions()).filter((e: { action: string }) => e.action === 'endpoint.deleted');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ details: { url: `${receiver.url}/doomed` } });
  });
});
