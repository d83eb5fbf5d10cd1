import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

describe.each(backends)('smoke (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('lists products of an empty store', async () => {
    const res = await t.app.inject({ url: '/api/v1/products', headers: await t.auth() });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: [], pagination: { next_cursor: null, has_more: false, limit: 50 } });
  });
});
