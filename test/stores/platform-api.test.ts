/**
 * The platform API (decision 0051): a platform provisions a store and its first key in one call
 * with its own credential, which reads no store's data; a store's key is refused there, the
 * credential is refused on the store API, and bad input is a clear 4xx with nothing written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { listStores } from '../../src/stores/store.service.ts';

const CREDENTIAL = 'platform-credential-of-the-tests-0123456789abcdef';
const PLATFORM = { authorization: `Bearer ${CREDENTIAL}` };

describe.each(backends)('platform API (%s)', (backend) => {
  let t: TestApp;
  let off: TestApp;
  const call = (method: string, url: string, headers: Record<string, string>, payload?: object, app = t) =>
    app.app.inject({ method: method as 'GET', url, headers, ...(payload ? { payload } : {}) });

  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED, PLATFORM_API_TOKEN: CREDENTIAL });
    off = await buildTestApp(backend, UNLIMITED);
  });
  afterAll(async () => {
    await t?.close();
    await off?.close();
  });

  it('provisions a store with its first key in one call; the key reads that store only', async () => {
    const created = await call('POST', '/platform/api/v1/stores', PLATFORM, { name: 'Shop from sign-up', key: { name: 'erp', scopes: ['products:read'] } });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.headers['cache-control']).toBe('no-store');
    const store = created.json().data;
    expect(store).toMatchObject({ name: 'Shop from sign-up', status: 'active', key: { name: 'erp', scopes: ['products:read'] } });
    // The first owner's one-time link, the dashboard's setup page (decision 0051, "Administrators per store").
    expect(store.setup_url).toMatch(/^http:\/\/[^/]+\/admin#\/setup\?code=[A-Za-z0-9_-]{43}$/);
    const key = { authorization: `Bearer ${store.key.token}` };
    const products = await call('GET', '/api/v1/products', key);
    expect(products.statusCode).toBe(200);
    expect(products.json().data).toEqual([]);
    expect((await call('GET', `/platform/api/v1/stores/${store.id}`, PLATFORM)).json().data).toMatchObject({ id: store.id, status: 'active' });
    expect((await call('GET', '/platform/api/v1/stores', PLATFORM)).json().data.map((s: { id: string }) => s.id)).toContain(store.id);

    expect((await call('POST', `/platform/api/v1/stores/${store.id}/suspend`, PLATFORM)).json().data.status).toBe('suspended');
    const suspended = await call('GET', '/api/v1/products', key);
    expect(suspended.statusCode).toBe(403);
    expect(suspended.json().code).toBe('store_suspended');
    expect((await call('POST', `/platform/api/v1/stores/${store.id}/resume`, PLATFORM)).json().data.status).toBe('active');
    expect((await call('GET', '/api/v1/products', key)).statusCode).toBe(200);

    const deleted = await call('DELETE', `/platform/api/v1/stores/${store.id}`, PLATFORM);
    expect(deleted.statusCode, deleted.body).toBe(200);
    expect(deleted.json().data.deleted_rows).toBeGreaterThan(0);
    expect((await call('GET', '/api/v1/products', key)).statusCode).toBe(401);
    expect((await call('GET', `/platform/api/v1/stores/${store.id}`, PLATFORM)).statusCode).toBe(404);

    // Every action is in the platform audit log, newest first, with the API as its actor; a page
    // of one entry leads to the next; a store's key may not read it.
    const log = await call('GET', `/platform/api/v1/audit-log?store=${store.id}`, PLATFORM);
    expect(log.statusCode, log.body).toBe(200);
    expect(log.json().data.map((e: { action: string }) => e.action)).toEqual([
      'store.deleted',
      'store.deletion_started',
      'store.resumed',
      'store.suspended',
      'store.key_created',
      'store.created',
    ]);
    expect(log.json().data[0]).toMatchObject({
      actor: 'platform_api',
      store_name: 'Shop from sign-up',
      details: { deleted_rows: deleted.json().data.deleted_rows },
    });
    const first = await call('GET', `/platform/api/v1/audit-log?store=${store.id}&limit=1`, PLATFORM);
    expect(first.json().pagination.has_more).toBe(true);
    const second = await call(
      'GET',
      `/platform/api/v1/audit-log?store=${store.id}&limit=1&cursor=${encodeURIComponent(first.json().pagination.next_cursor)}`,
      PLATFORM,
    );
    expect(second.json().data[0].action).toBe('store.deletion_started');
    expect((await call('GET', '/platform/api/v1/audit-log?limit=0', PLATFORM)).statusCode).toBe(400);
    expect((await call('GET', '/platform/api/v1/audit-log', await t.auth(['products:read', 'admin']))).statusCode).toBe(401);
  });

  it('refuses the wrong credential each way, and bad input, naming what was wrong and writing nothing', async () => {
    const before = (await listStores(t.database.db)).length;
    const storeKey = await t.auth(['products:read', 'admin']);
    const withStoreKey = await call('GET', '/platform/api/v1/stores', storeKey);
    expect(withStoreKey.statusCode).toBe(401);
    expect(withStoreKey.json().detail).toContain("store's API key");
    const onStoreApi = await call('GET', '/api/v1/products', PLATFORM);
    expect(onStoreApi.statusCode).toBe(401);
    expect(onStoreApi.json().detail).toContain('platform credential');
    expect((await call('GET', '/admin/api/v1/tokens', PLATFORM)).statusCode).toBe(401);
    expect((await call('GET', '/platform/api/v1/stores', {})).statusCode).toBe(401);
    expect((await call('GET', '/platform/api/v1/stores', { authorization: 'Bearer not-the-platform-credential-at-all-0000' })).statusCode).toBe(401);
    const turnedOff = await call('GET', '/platform/api/v1/stores', PLATFORM, undefined, off);
    expect(turnedOff.statusCode).toBe(403);
    expect(turnedOff.json().detail).toContain('PLATFORM_API_TOKEN');

    const first = await call('POST', '/platform/api/v1/stores', PLATFORM, { name: 'Taken name' });
    expect(first.statusCode).toBe(201);
    const taken = await call('POST', '/platform/api/v1/stores', PLATFORM, { name: 'taken NAME' });
    expect(taken.statusCode).toBe(409);
    expect(taken.json().detail).toContain('exists already');
    for (const body of [
      {},
      { name: '' },
      { name: '   ' },
      { name: 'x'.repeat(201) },
      { name: 'ok', extra: 1 },
      { name: 'ok', key: { name: 'k', scopes: ['nope'] } },
    ]) {
      const res = await call('POST', '/platform/api/v1/stores', PLATFORM, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.headers['content-type']).toContain('application/problem+json');
    }
    expect((await call('GET', '/platform/api/v1/stores/not-a-uuid', PLATFORM)).statusCode).toBe(400);
    expect((await call('POST', '/platform/api/v1/stores/00000000-0000-4000-8000-000000000000/suspend', PLATFORM)).statusCode).toBe(404);
    expect((await listStores(t.database.db)).length).toBe(before + 1);
  });
});
