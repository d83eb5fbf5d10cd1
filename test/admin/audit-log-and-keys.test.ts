/**
 * The audit log and API keys through the admin API (inject), on every back end: every
 * administrative action recorded with who, when, from where and what changed (never a secret),
 * read back filtered and paged; pruned after AUDIT_LOG_RETENTION_MS; keys rolled with an overlap,
 * renamed, their rate limits changed, and an expiry in the past refused. Every statement these
 * routes and services run over a store-owned table names its store (decision 0051).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { pruneOnce } from '../../src/retention/retention-pruner.ts';
import { retentionPolicyOf } from '../../src/retention/retention-policy.ts';
import { homeStore } from '../../src/stores/store.service.ts';
import { asPlatform, inStore } from '../../src/db/store-scope.ts';
import { register as metricsRegistry } from 'prom-client';
import { createToken, listTokens, revokeToken } from '../../src/tokens/token.service.ts';
import { recordAudit } from '../../src/admin/audit/audit-log.ts';
import { startStatementAudit } from '../helpers/statement-audit.ts';

const OWNER = 'owner@example.com';
const PASSWORD = 'correct horse battery';

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  const line = (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='));
  if (!line) throw new Error(`no session cookie (${res.statusCode} ${res.body})`);
  return line.split(';')[0]!;
}

describe.each(backends)('audit log and API keys (%s)', (backend) => {
  let t: TestApp;
  let owner: { cookie: string; csrf: string };
  const CLIENT = '198.51.100.23';
  const as = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    t.app.inject({ method, url: `/admin/api/v1${url}`, headers: { cookie: owner.cookie, 'x-csrf-token': owner.csrf }, payload, remoteAddress: CLIENT });
  const audit = async (query = '') => (await as('GET', `/audit-log${query}`)).json();
  const readApi = (token: string) => t.app.inject({ url: '/api/v1/products?limit=1', headers: { authorization: `Bearer ${token}` } });

  beforeAll(async () => {
    t = await buildTestApp(backend, { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    await createAdminUser(t.database.db, { email: OWNER, password: PASSWORD });
    await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: OWNER, password: 'wrong password!' }, remoteAddress: CLIENT });
    const res = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: OWNER, password: PASSWORD }, remoteAddress: CLIENT });
    owner = { cookie: cookieOf(res), csrf: res.json().data.csrf_token };
  });
  afterAll(async () => t?.close());

  it('refuses an expiry in the past with a 400 naming expires_at; no key is created', async () => {
    const before = (await as('GET', '/tokens')).json().data.length;
    const res = await as('POST', '/tokens', { name: 'born expired', expires_at: '2020-01-01T00:00:00Z' });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json().errors).toEqual([{ param: 'body.expires_at', message: 'must be in the future' }]);
    expect((await as('POST', '/tokens', { name: '   ' })).json().errors[0].param).toBe('body.name');
    expect((await as('GET', '/tokens')).json().data.length).toBe(before);
    const future = await as('POST', '/tokens', { name: 'later', expires_at: new Date(Date.now() + 86_400_000).toISOString() });
    expect(future.statusCode).toBe(201);
  });

  it('rolls a key: the new secret works at once, the old one until the overlap picked ends', async () => {
    const created = (await as('POST', '/tokens', { name: 'erp' })).json().data;
    const rolled = await as('POST', `/tokens/${created.id}/roll`, { overlap_seconds: 3600 });
    expect(rolled.statusCode, rolled.body).toBe(200);
    const next = rolled.json().data;
    expect(next.token).not.toBe(created.token);
    expect(next.prefix).toBe(next.token.slice(0, 12));
    expect(Date.parse(next.previous_secret_expires_at) - Date.now()).toBeGreaterThan(3_500_000);
    expect((await readApi(next.token)).statusCode).toBe(200);
    expect((await readApi(created.token)).statusCode).toBe(200);
    // The overlap ends: the old secret is refused, the new one still works.
    await t.database.db
      .updateTable('api_tokens')
      .set({ previous_token_expires_at: sql<string>`now() - interval '1 second'` })
      .where('id', '=', created.id)
      .execute();
    expect((await readApi(created.token)).statusCode).toBe(401);
    expect((await readApi(next.token)).statusCode).toBe(200);
    // overlap 0: the old secret ends at once.
    const again = (await as('POST', `/tokens/${created.id}/roll`, { overlap_seconds: 0 })).json().data;
    expect((await readApi(next.token)).statusCode).toBe(401);
    expect((await readApi(again.token)).statusCode).toBe(200);
    expect((await as('POST', `/tokens/${created.id}/roll`, { overlap_seconds: 604_801 })).statusCode).toBe(400);
    await as('POST', `/tokens/${created.id}/revoke`);
    expect((await as('POST', `/tokens/${created.id}/roll`, {})).statusCode).toBe(409);
  });

  it('renames a key and changes its rate limits; blank names are refused', async () => {
    const created = (await as('POST', '/tokens', { name: 'pos' })).json().data;
    const res = await as('PATCH', `/tokens/${created.id}`, { name: 'Point of sale', rate_limit_standard: 500, rate_limit_export: null });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ name: 'Point of sale', rate_limit_standard: 500, rate_limit_export: null });
    expect((await as('PATCH', `/tokens/${created.id}`, { name: '  ' })).statusCode).toBe(400);
    expect((await as('PATCH', `/tokens/${created.id}`, {})).statusCode).toBe(400);
  });

  it('records every administrative action with who, when, from where and what changed — never a secret', async () => {
    const endpoint = (await as('POST', '/webhooks/endpoints', { url: 'http://127.0.0.1:9/hook', description: 'ERP' })).json().data;
    await as('PATCH', `/webhooks/endpoints/${endpoint.id}`, { description: 'ERP (prod)' });
    await as('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    await as('POST', `/webhooks/endpoints/${endpoint.id}/rotate-secret`);
    await as('POST', '/admins/invitations', { email: 'new@example.com', role: 'viewer' });
    const { data } = await audit('?limit=200');
    const actions = data.map((e: { action: string }) => e.action);
    for (const action of [
      'session.sign_in_failed',
      'session.signed_in',
      'key.created',
      'key.rolled',
      'key.revoked',
      'key.updated',
      'endpoint.created',
      'endpoint.updated',
      'endpoint.disabled',
      'endpoint.secret_rotated',
      'admin.invited',
    ]) {
      expect(actions, action).toContain(action);
    }
    const rename = data.find((e: { action: string }) => e.action === 'key.updated');
    expect(rename).toMatchObject({ actor: { kind: 'session', name: OWNER }, client_ip: CLIENT, target: { type: 'key' } });
    expect(rename.details.changes.name).toEqual({ from: 'pos', to: 'Point of sale' });
    const changed = data.find((e: { action: string }) => e.action === 'endpoint.updated');
    expect(changed.details.changes).toEqual({ description: { from: 'ERP', to: 'ERP (prod)' } });
    expect(changed.target).toEqual({ type: 'endpoint', id: endpoint.id });
    expect(Date.now() - Date.parse(changed.at)).toBeLessThan(3_600_000);
    // No secret anywhere: API keys, the endpoint's signing secret, the invitation's link.
    const stored = JSON.stringify(await t.database.db.selectFrom('admin_audit_log').selectAll().execute());
    expect(stored).not.toMatch(/sia_[A-Za-z0-9_-]{20}|whsec_|code=|correct horse|wrong password/);
  });

  it('filters by actor, action and time range, and pages with next_cursor (no entry lost or repeated)', async () => {
    const all = (await audit('?limit=200')).data;
    const byAction = (await audit('?action=key.created')).data;
    expect(byAction.length).toBe(all.filter((e: { action: string }) => e.action === 'key.created').length);
    expect(byAction.every((e: { action: string }) => e.action === 'key.created')).toBe(true);
    expect((await audit(`?actor=${encodeURIComponent('OWNER@example.com')}&limit=200`)).data.length).toBe(
      all.filter((e: { actor: { name: string } }) => e.actor.name === OWNER).length,
    );
    expect((await audit('?to=2000-01-01')).data).toEqual([]);
    expect((await audit('?from=2000-01-01&limit=200')).data.length).toBe(all.length);
    const seen: string[] = [];
    let cursor = '';
    for (let i = 0; i < 50; i++) {
      const page = await audit(`?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      seen.push(...page.data.map((e: { id: string }) => e.id));
      if (!page.pagination.has_more) break;
      cursor = page.pagination.next_cursor;
    }
    expect(seen).toEqual(all.map((e: { id: string }) => e.id));
    const bad = await as('GET', '/audit-log?from=yesterday');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().errors[0].param).toBe('from');
    expect((await as('GET', '/audit-log?action=nonsense')).statusCode).toBe(400);
  });

  it('prunes entries older than AUDIT_LOG_RETENTION_MS (default 365 days) with the other logs', async () => {
    expect(t.ctx.config.AUDIT_LOG_RETENTION_MS).toBe(365 * 86_400_000);
    await t.database.db
      .updateTable('admin_audit_log')
      .set({ at: sql<string>`now() - interval '366 days'` })
      .where('action', '=', 'session.sign_in_failed')
      .execute();
    await t.database.db
      .updateTable('admin_audit_log')
      .set({ at: sql<string>`now() - interval '364 days'` })
      .where('action', '=', 'session.signed_in')
      .execute();
    const report = await pruneOnce(t.database.db, retentionPolicyOf(t.ctx.config), Date.now());
    expect(report.auditEntries).toBe(1);
    const actions = (await audit('?limit=200')).data.map((e: { action: string }) => e.action);
    expect(actions).not.toContain('session.sign_in_failed');
    expect(actions).toContain('session.signed_in');
  });

  it('every statement of the key, audit-log, overview and alerts routes (and of the key services the CLI calls) names its store', async () => {
    const store = (await homeStore(t.database.db))!.id;
    const audited = startStatementAudit();
    try {
      await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: OWNER, password: 'wrong password!' }, remoteAddress: CLIENT });
      const signedIn = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: OWNER, password: PASSWORD }, remoteAddress: CLIENT });
      expect(signedIn.statusCode).toBe(200);
      // An idempotent create (claimed and stored), then its replay.
      const create = () =>
        t.app.inject({
          method: 'POST',
          url: '/admin/api/v1/tokens',
          headers: { cookie: owner.cookie, 'x-csrf-token': owner.csrf, 'idempotency-key': 'audit-key-1' },
          payload: { name: 'audited', scopes: ['products:read', 'admin'] },
        });
      const created = await create();
      expect(created.statusCode, created.body).toBe(201);
      expect((await create()).headers['idempotent-replayed']).toBe('true');
      const key = created.json().data;
      expect((await as('GET', '/tokens')).statusCode).toBe(200);
      expect((await as('GET', `/tokens/${key.id}`)).statusCode).toBe(200);
      expect((await as('PATCH', `/tokens/${key.id}`, { name: 'audited, renamed' })).statusCode).toBe(200);
      const rolled = (await as('POST', `/tokens/${key.id}/roll`, { overlap_seconds: 60 })).json().data;
      // The key itself, looked up across stores by its secret (and its use recorded).
      const byKey = await t.app.inject({ url: '/admin/api/v1/tokens', headers: { authorization: `Bearer ${rolled.token}` } });
      expect(byKey.statusCode).toBe(200);
      expect((await as('POST', `/tokens/${key.id}/revoke`)).statusCode).toBe(200);
      const page = (await audit('?limit=2&action=key.created')).pagination;
      expect((await audit(`?limit=2&actor=${encodeURIComponent(OWNER)}&from=2000-01-01&cursor=${encodeURIComponent(page.next_cursor)}`)).data.length).toBe(2);
      expect((await as('GET', '/overview')).statusCode).toBe(200);
      expect((await as('GET', '/alerts')).statusCode).toBe(200);
      expect((await as('POST', '/alerts/seen')).statusCode).toBeLessThan(300);
      // The alert gauges, read across stores as a scrape of /metrics reads them (its other gauges are the webhooks').
      for (const gauge of ['store_api_webhook_endpoints', 'store_api_webhook_dead_letters']) {
        expect(await asPlatform(() => metricsRegistry.getSingleMetricAsString(gauge))).toContain(gauge);
      }
      // What `store-api tokens …` calls, in the command's store (cli/run-command.ts withContext).
      await inStore(store, async () => {
        const cli = await createToken(t.database.db, { name: 'from the cli', maxKeysOfStore: 1000 });
        expect((await listTokens(t.database.db)).map((k) => k.id)).toContain(cli.summary.id);
        await revokeToken(t.database.db, cli.summary.prefix);
        await recordAudit(t.database.db, { actor: { kind: 'anonymous', id: null, name: 'cli' }, action: 'key.revoked' });
      });
    } finally {
      const wrong = audited.stop();
      expect(audited.checked()).toBeGreaterThan(20);
      expect(wrong).toEqual([]);
    }
  });
});
