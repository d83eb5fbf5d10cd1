/**
 * Alerts (inject, every back end): endpoints paused by the breaker or disabled, and dead letters —
 * new ones counted since the administrator last looked — through the admin API and as Prometheus
 * gauges.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  return (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='))!.split(';')[0]!;
}

describe.each(backends)('alerts (%s)', (backend) => {
  let t: TestApp;
  let s: { cookie: string; csrf: string };
  const as = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { cookie: s.cookie, 'x-csrf-token': s.csrf }, payload });
  const alerts = async () => (await as('GET', '/alerts')).json().data;
  const metric = async (line: RegExp) => {
    const text = (await t.app.inject({ url: '/metrics' })).body;
    return Number(line.exec(text)?.[1]);
  };

  beforeAll(async () => {
    t = await buildTestApp(backend, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    await createAdminUser(t.database.db, { email: 'owner@example.com', password: 'correct horse battery', role: 'viewer' });
    const res = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: 'owner@example.com', password: 'correct horse battery' } });
    s = { cookie: cookieOf(res), csrf: res.json().data.csrf_token };
  });
  afterAll(async () => t?.close());

  it('says nothing needs attention on a quiet store', async () => {
    expect(await alerts()).toMatchObject({ endpoints: [], dead_letters: { total: 0, since_seen: 0 }, seen_at: null, attention: false });
  });

  it('shows paused and disabled endpoints and new dead letters, in the API and the metrics; seen ones stop counting as new', async () => {
    const token = await t.auth(['admin']);
    const create = (url: string) => t.app.inject({ method: 'POST', url: '/admin/api/v1/webhooks/endpoints', headers: token, payload: { url } });
    const paused = (await create('http://127.0.0.1:9/paused')).json().data;
    const disabled = (await create('http://127.0.0.1:9/disabled')).json().data;
    await create('http://127.0.0.1:9/fine');
    await t.app.inject({ method: 'PATCH', url: `/admin/api/v1/webhooks/endpoints/${disabled.id}`, headers: token, payload: { enabled: false } });
    await t.database.db
      .updateTable('webhook_endpoints')
      .set({ paused_until: sql<string>`now() + interval '10 minutes'`, consecutive_failures: 10 })
      .where('id', '=', paused.id)
      .execute();
    const ping = (await t.app.inject({ method: 'POST', url: `/admin/api/v1/webhooks/endpoints/${paused.id}/ping`, headers: token })).json().data;
    await t.database.db
      .updateTable('webhook_deliveries')
      .set({ status: 'dead', next_attempt_at: null, dead_at: sql<string>`now()` })
      .where('id', '=', ping.delivery_id)
      .execute();

    const before = await alerts();
    expect(before.attention).toBe(true);
    expect(before.endpoints.map((e: { url: string; state: string }) => `${e.state} ${e.url}`)).toEqual([
      'disabled http://127.0.0.1:9/disabled',
      'paused http://127.0.0.1:9/paused',
    ]);
    expect(before.dead_letters).toEqual({ total: 1, since_seen: 1 });
    expect(await metric(/^store_api_webhook_endpoints\{state="paused"\} (\d+)$/m)).toBe(1);
    expect(await metric(/^store_api_webhook_endpoints\{state="disabled"\} (\d+)$/m)).toBe(1);
    expect(await metric(/^store_api_webhook_endpoints\{state="active"\} (\d+)$/m)).toBe(1);
    expect(await metric(/^store_api_webhook_dead_letters (\d+)$/m)).toBe(1);

    // A viewer may mark them seen (it changes nothing of the store, and is not audited).
    expect((await as('POST', '/alerts/seen')).statusCode).toBe(204);
    const after = await alerts();
    expect(after.dead_letters).toEqual({ total: 1, since_seen: 0 });
    expect(after.seen_at).not.toBeNull();
    expect(after.attention).toBe(true); // the endpoints are still paused / disabled
    const audit = (await as('GET', '/audit-log?limit=200')).json().data.map((e: { action: string }) => e.action);
    expect(audit).not.toContain('store.written');
  });

  it("never shows a broker endpoint's password (decision 0031), not even to a viewer", async () => {
    const token = await t.auth(['admin']);
    const password = 'alert-s3cret-pw';
    const created = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/webhooks/endpoints',
      headers: token,
      payload: { url: `amqp://guest:${password}@127.0.0.1:5672/%2F?exchange=alerts-test`, enabled: false },
    });
    expect(created.statusCode).toBe(201);
    const res = await as('GET', '/alerts');
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(password);
    const shown = res.json().data.endpoints.find((e: { id: string }) => e.id === created.json().data.id);
    expect(shown).toMatchObject({ state: 'disabled', url: 'amqp://guest:****@127.0.0.1:5672/%2F?exchange=alerts-test' });
  });
});
