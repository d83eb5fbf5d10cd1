/**
 * An Idempotency-Key is a store's (decision 0051): the same key sent by two stores' credentials is
 * two requests, each answered and replayed in its own store, never refused or failed because the
 * other store used it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { createStore, homeStore } from '../../src/stores/store.service.ts';
import { inStore } from '../../src/db/store-scope.ts';

describe.each(backends)('idempotency keys per store (%s)', (backend) => {
  let t: TestApp;
  const keys: Record<string, Record<string, string>> = {};

  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    const db = t.database.db;
    const stores = { alpha: (await homeStore(db))!.id, bravo: (await createStore(db, { name: 'Bravo' })).id };
    for (const [name, store] of Object.entries(stores)) {
      keys[name] = { authorization: `Bearer ${(await inStore(store, () => createToken(db, { name, scopes: [...SCOPES] }))).token}` };
    }
  });
  afterAll(async () => t?.close());

  it('answers the same key in two stores as two requests, each replayed in its own store', async () => {
    const send = (name: string) =>
      t.app.inject({
        method: 'POST',
        url: '/admin/api/v1/tokens',
        headers: { ...keys[name]!, 'idempotency-key': 'order-sync-2026-11-29' },
        payload: { name: 'same request', scopes: ['products:read'] },
      });
    const alpha = await send('alpha');
    expect(alpha.statusCode, alpha.body).toBe(201);
    const bravo = await send('bravo');
    expect(bravo.statusCode, bravo.body).toBe(201);
    expect(bravo.headers['idempotent-replayed']).toBeUndefined();
    expect(bravo.json().data.id).not.toBe(alpha.json().data.id);
    for (const [name, first] of [
      ['alpha', alpha],
      ['bravo', bravo],
    ] as const) {
      const again = await send(name);
      expect(again.statusCode).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json().data.id).toBe(first.json().data.id);
    }
  });
});
