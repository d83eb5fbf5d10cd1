/**
 * Property: no generated request to any read, admin or session route gets a 5xx, and every 4xx is
 * problem+json (a 400 naming the field). Requests come from the routes' own schemas with hostile
 * values mixed in (test/helpers/hostile-requests.ts). GENERATED_INPUT_RUNS sets the count per
 * back end (default 500, kept modest for `npm test`); bench/fuzz.ts runs the same generator over
 * HTTP for 100k+ requests. A failure prints the shrunk request that broke it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aCustomer, anOrder, aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';
import { collectRoutes, requestArbitrary, responseProblem, type RouteSpec } from '../helpers/hostile-requests.ts';

const RUNS = Number(process.env.GENERATED_INPUT_RUNS ?? 500);

describe.each(backends)('generated input (%s)', (backend) => {
  let t: TestApp;
  let routes: RouteSpec[];
  let arbitrary: ReturnType<typeof requestArbitrary>;
  beforeAll(async () => {
    ({ app: t, routes } = await collectRoutes(() => buildTestApp(backend, { ...UNLIMITED, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' })));
    const db = t.ctx.database.db;
    const product = await aProduct(db);
    const withVariants = await aProductWithVariants(db);
    const customer = (await aCustomer(db)) as { id: string };
    const order = (await anOrder(db, [{ product_id: product.id, quantity: 1 }])) as { id: string };
    const adminToken = (await t.auth(['admin'])).authorization.slice('Bearer '.length);
    const readToken = (await t.auth()).authorization.slice('Bearer '.length);
    const endpoint = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/webhooks/endpoints',
      headers: { authorization: `Bearer ${adminToken}` },
      payload: { url: 'http://127.0.0.1:9/hook' },
    });
    const ids = [
      product.id,
      withVariants.id,
      withVariants.variants[0]!.id,
      product.images[0]?.id ?? product.id,
      customer.id,
      order.id,
      endpoint.json().data.id,
    ];
    arbitrary = requestArbitrary(routes, { ids, readToken, adminToken });
  });
  afterAll(async () => t?.close());

  it('covers the read API, the admin API and the sign-in route', () => {
    const urls = routes.map((r) => `${r.method} ${r.url}`);
    expect(urls).toEqual(
      expect.arrayContaining([
        'GET /api/v1/products',
        'GET /api/v1/orders',
        'POST /admin/api/v1/orders',
        'POST /admin/api/v1/tokens',
        'POST /admin/session',
        'POST /admin/api/v1/webhooks/endpoints/:id/replay',
      ]),
    );
    expect(routes.length).toBeGreaterThan(40);
  });

  it('answers every generated request below 500, with problem+json on 4xx', async () => {
    await fc.assert(
      fc.asyncProperty(arbitrary, async (request) => {
        const res = await t.app.inject({ method: request.method as 'GET', url: request.url, headers: request.headers, payload: request.payload });
        const problem = responseProblem(res.statusCode, res.headers['content-type'] as string | undefined, res.body);
        expect(problem, `${request.method} ${request.url} ${request.payload ?? ''}`).toBeUndefined();
      }),
      { numRuns: RUNS },
    );
  }, 120_000);
});
