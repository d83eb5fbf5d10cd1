/**
 * Store isolation (decision 0051), generated from the route table: every route of the read API
 * and the admin API, as Fastify registered it, asked by store A's credentials (an owner's
 * dashboard session and a key holding every scope) with the ids and cursors of store B's records,
 * endpoints, deliveries and keys. Every answer must be a refusal (never 2xx) and carry no byte of
 * B: none of its ids, names or key prefixes. Lists and exports asked with B's cursors may answer,
 * with A's records only. B's rows are the same after the matrix as before it.
 *
 * Isolation is enforced twice: by each statement's own store filter (`ownStoreIs`, db/store-scope.ts)
 * and by row-level security. The later cases take each away in turn: with row-level security off on
 * every store-owned table the filters alone hold; with every filter removed (this file replaces
 * `ownStoreIs` by `true`) row-level security alone holds; with both gone the matrix finds B's
 * bytes, so it can fail. And every statement the matrix ran over a store-owned table named its
 * store (test/helpers/statement-audit.ts).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { collectRoutes, type RouteSpec } from '../helpers/hostile-requests.ts';
import { aCustomer, aProductWithVariants, anOrder } from '../helpers/store-fixtures.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { SCOPES, createToken } from '../../src/tokens/token.service.ts';
import { createStore, homeStore } from '../../src/stores/store.service.ts';
import { asPlatform, inStore } from '../../src/db/store-scope.ts';
import { updateProduct } from '../../src/catalog/catalog.service.ts';
import { STORE_OWNED_TABLES } from '../../src/stores/store.service.ts';
import { startStatementAudit, type StatementAudit } from '../helpers/statement-audit.ts';

/** While `removed`, every statement's own store filter is `true`: row-level security alone isolates. */
const filters = vi.hoisted(() => ({ removed: false }));
vi.mock('../../src/db/store-scope.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/db/store-scope.ts')>();
  const { sql: raw } = await import('kysely');
  return { ...real, ownStoreIs: (column?: string) => (filters.removed ? raw<boolean>`true` : real.ownStoreIs(column)) };
});

const PASSWORD = 'correct horse battery';
const ADMIN_PREFIX = '/admin/api/v1/';
const READ_PREFIX = '/api/v1/';
const B_NAME = 'Bravo-only product';
const B_HOOK = 'http://127.0.0.1:9/bravo-only-hook';

/** A pass sends over a thousand requests: on a busy machine that takes longer than a test's default minute. */
const MATRIX_TIMEOUT_MS = 300_000;
describe.each(backends)('cross-store matrix from the route table (%s)', (backend) => {
  let t: TestApp;
  let routes: RouteSpec[];
  let storeA: string;
  let storeB: string;
  /** Every id of store B, by kind. */
  const b: Record<string, string> = {};
  /** Strings no answer to A may hold. */
  let markers: string[] = [];
  let cursorsOfB: string[] = [];
  const callers: Record<string, Record<string, string>> = {};
  let headersB: Record<string, string>;
  let audit: StatementAudit | undefined;

  const inject = (method: string, url: string, headers: Record<string, string>, payload?: unknown) =>
    t.app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });

  /** Fingerprint of B's rows in every store-owned table (count and newest change), read across stores. */
  async function rowsOfB(): Promise<Record<string, string>> {
    const db = t.database.db;
    const out: Record<string, string> = {};
    for (const table of ['products', 'variants', 'images', 'customers', 'orders', 'order_items', 'stock_movements', 'api_tokens', 'webhook_endpoints']) {
      const { rows } = await asPlatform(() =>
        sql<{
          n: number;
          h: string;
        }>`SELECT count(*)::int AS n, coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') AS h FROM ${sql.table(table)} t WHERE store_id = ${storeB}::uuid`.execute(
          db,
        ),
      );
      out[table] = `${rows[0]!.n}:${rows[0]!.h}`;
    }
    return out;
  }

  /** Runs every route with B's ids as A's callers; returns what leaked or was allowed. */
  async function matrix(selected: RouteSpec[]): Promise<string[]> {
    const wrong: string[] = [];
    const ids = Object.entries(b);
    for (const route of selected) {
      const hasParams = /:[A-Za-z]+/.test(route.url);
      const requests: { url: string; what: string }[] = [];
      if (hasParams) {
        for (const [kind, id] of ids) requests.push({ url: route.url.replace(/:[A-Za-z]+/g, id), what: `B's ${kind}` });
      } else if (route.method === 'GET') {
        requests.push({ url: route.url, what: 'no id' });
        for (const cursor of cursorsOfB) requests.push({ url: `${route.url}?cursor=${encodeURIComponent(cursor)}`, what: "B's cursor" });
      } else {
        continue; // a write without an id acts in A's own store
      }
      for (const { url, what } of requests) {
        // B asks first: whatever a cache keeps of its answer must not reach A.
        if (route.method === 'GET') await inject('GET', url, headersB);
        for (const [caller, headers] of Object.entries(callers)) {
          const res = await inject(route.method, url, headers, route.method === 'GET' ? undefined : {});
          // A 404 may name the id it was asked for; anything else of B must not be there.
          const leaked = markers.filter((m) => res.body.includes(m) && !url.includes(m));
          if (leaked.length > 0) wrong.push(`${route.method} ${url} (${what}) as ${caller}: ${res.statusCode} carries B's ${leaked.join(', ')}`);
          else if (hasParams && res.statusCode < 300) wrong.push(`${route.method} ${url} (${what}) as ${caller}: ${res.statusCode}, acting on B's record`);
          else if (res.statusCode >= 500) wrong.push(`${route.method} ${url} (${what}) as ${caller}: ${res.statusCode} ${res.body.slice(0, 120)}`);
        }
      }
    }
    return wrong;
  }

  beforeAll(async () => {
    let app: TestApp;
    ({ app, routes } = await collectRoutes(() =>
      buildTestApp(backend, { ...UNLIMITED, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', ADMIN_SIGN_IN_MAX_FAILURES: '1000' }),
    ));
    t = app;
    audit = startStatementAudit({ paused: () => filters.removed });
    routes = routes
      .filter((r) => r.url.startsWith(ADMIN_PREFIX) || r.url.startsWith(READ_PREFIX))
      .sort((x, y) => (x.url === y.url ? x.method.localeCompare(y.method) : x.url.localeCompare(y.url)));
    const db = t.database.db;
    storeA = (await homeStore(db))!.id;
    storeB = (await createStore(db, { name: 'Bravo' })).id;

    // Store A: an owner (dashboard sessions act in the deployment's first store), a key, a product.
    await createAdminUser(db, { email: 'owner-a@example.com', password: PASSWORD, role: 'owner' });
    const signIn = await inject('POST', '/admin/session', {}, { email: 'owner-a@example.com', password: PASSWORD });
    expect(signIn.statusCode, signIn.body).toBe(200);
    callers.sessionOfA = { cookie: String(signIn.headers['set-cookie']).split(';')[0]!, 'x-csrf-token': signIn.json().data.csrf_token };
    callers.keyOfA = { authorization: `Bearer ${(await inStore(storeA, () => createToken(db, { name: 'a', scopes: [...SCOPES] }))).token}` };
    await inStore(storeA, () => aProductWithVariants(db, [1, 2]));

    // Store B: records of every resource, a key, an endpoint, an event and a delivery.
    const keyOfB = await inStore(storeB, () => createToken(db, { name: 'b', scopes: [...SCOPES] }));
    headersB = { authorization: `Bearer ${keyOfB.token}` };
    await inStore(storeB, async () => {
      const product = await aProductWithVariants(db, [3, 4]);
      await updateProduct(db, product.id, { name: B_NAME });
      const customer = await aCustomer(db);
      const order = await anOrder(db, [{ product_id: product.id, variant_id: product.variants[0]!.id, quantity: 1 }]);
      Object.assign(b, { product: product.id, variant: product.variants[0]!.id, customer: customer.id, order: order.id, token: keyOfB.summary.id });
    });
    const endpoint = await inject('POST', `${ADMIN_PREFIX}webhooks/endpoints`, headersB, { url: B_HOOK });
    expect(endpoint.statusCode, endpoint.body).toBe(201);
    b.endpoint = endpoint.json().data.id;
    expect((await inject('POST', `${ADMIN_PREFIX}webhooks/endpoints/${b.endpoint}/ping`, headersB, {})).statusCode).toBeLessThan(300);
    const deliveries = await inject('GET', `${ADMIN_PREFIX}webhooks/deliveries`, headersB);
    expect(deliveries.statusCode, deliveries.body).toBe(200);
    b.delivery = deliveries.json().data[0].id;
    const movements = await inject('GET', '/api/v1/inventory/movements?limit=1', headersB);
    b.movement = movements.json().data[0].id;
    const events = await inject('GET', '/api/v1/events?limit=1', headersB);
    b.event = events.json().data[0].id;
    // B sees its own: the matrix's markers are what B's key reads.
    const ownProduct = await inject('GET', `/api/v1/products/${b.product}`, headersB);
    expect(ownProduct.json().data.name).toBe(B_NAME);
    markers = [...Object.values(b), B_NAME, B_HOOK, keyOfB.summary.prefix];
    cursorsOfB = [];
    for (const list of ['products', 'orders', 'customers', 'inventory', 'inventory/movements', 'events']) {
      const page = await inject('GET', `/api/v1/${list}?limit=1`, headersB);
      const cursor = page.json().pagination?.next_cursor;
      if (typeof cursor === 'string') cursorsOfB.push(cursor);
    }
    expect(cursorsOfB.length).toBeGreaterThan(3);
  });
  afterAll(async () => {
    audit?.stop();
    await t?.close();
  });

  /** Turns row-level security of every store-owned table off (`on` false) or back on. */
  async function rowLevelSecurity(on: boolean): Promise<void> {
    for (const table of STORE_OWNED_TABLES) {
      await (on
        ? sql`ALTER TABLE ${sql.table(table)} ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY`
        : sql`ALTER TABLE ${sql.table(table)} NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY`
      ).execute(t.database.db);
    }
  }

  it(
    "no route answers A's credentials with B's records, ids or cursors, and B's rows stay as they were",
    async () => {
      expect(routes.filter((r) => /:[A-Za-z]+/.test(r.url)).length).toBeGreaterThan(20);
      const before = await rowsOfB();
      expect(await matrix(routes)).toEqual([]);
      expect(await rowsOfB()).toEqual(before);
      // And A still reads its own.
      const own = await inject('GET', '/api/v1/products', callers.keyOfA!);
      expect(own.statusCode).toBe(200);
      expect(own.json().data).toHaveLength(1);
    },
    MATRIX_TIMEOUT_MS,
  );

  it(
    "holds with every statement's store filter removed: row-level security isolates",
    async () => {
      filters.removed = true;
      try {
        expect(await matrix(routes)).toEqual([]);
      } finally {
        filters.removed = false;
      }
    },
    MATRIX_TIMEOUT_MS,
  );

  it(
    "holds with row-level security off on every store-owned table: each statement's own store filter isolates",
    async () => {
      await rowLevelSecurity(false);
      try {
        expect(await matrix(routes)).toEqual([]);
      } finally {
        await rowLevelSecurity(true);
      }
    },
    MATRIX_TIMEOUT_MS,
  );

  it('fails with both taken away (filters removed, row-level security off): the matrix can see a leak', async () => {
    const products = routes.filter((r) => r.url.startsWith('/api/v1/products'));
    filters.removed = true;
    await rowLevelSecurity(false);
    try {
      const wrong = await matrix(products);
      expect(wrong.length).toBeGreaterThan(0);
      expect(wrong.join('\n')).toContain(B_NAME);
    } finally {
      filters.removed = false;
      await rowLevelSecurity(true);
    }
    expect(await matrix(products)).toEqual([]);
  });

  it('every statement the matrix ran over a store-owned table named its store', () => {
    const checked = audit!.checked();
    const wrong = audit!.stop();
    audit = undefined;
    expect(checked).toBeGreaterThan(100);
    expect(wrong).toEqual([]);
  });
});
