/**
 * Every read method of @store-api/client against a real listening server, on each back end: single
 * GETs, list pages, iterators that walk every page and every export line, the cursor they expose,
 * and that what they return matches the API's own schemas.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { readFileSync } from 'node:fs';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { aCustomer, aProduct, aProductWithVariants, anOrder } from '../helpers/store-fixtures.ts';
import { expectSchema } from '../helpers/schema-check.ts';
import { Product } from '../../src/catalog/product.resource.ts';
import { Customer } from '../../src/customers/customer.resource.ts';
import { InventoryRecord, StockMovement } from '../../src/inventory/inventory.resource.ts';
import { Order } from '../../src/orders/order.resource.ts';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { Attribute as AttributeSchema } from '../../src/api/schemas.ts';
import { StoreApiError, cursorAfter, type PageProgress, type StoreApiClient } from '../../packages/client/src/index.ts';
import { startClientTestServer, type ClientTestServer } from './client-test-kit.ts';

describe.each(backends)('StoreApiClient read methods (%s)', (backend) => {
  let server: ClientTestServer;
  let client: StoreApiClient;
  let ids: { products: string[]; orders: string[]; customers: string[]; inventory: string[]; movements: string[]; events: string[] };

  beforeAll(async () => {
    server = await startClientTestServer(backend, UNLIMITED);
    client = server.client();
    const db = server.t.ctx.database.db;
    await generateDemoStore(db, { products: 120, customers: 30, orders: 40, batchSize: 120 });
    const withVariants = await aProductWithVariants(db);
    const simple = await aProduct(db);
    await aCustomer(db);
    await anOrder(db, [
      { product_id: simple.id, quantity: 2 },
      { product_id: withVariants.id, variant_id: withVariants.variants[0]!.id, quantity: 1 },
    ]);
    const all = async (q: string) => (await sql<{ id: string }>`${sql.raw(q)}`.execute(db)).rows.map((r) => r.id).sort();
    ids = {
      products: await all('SELECT id::text AS id FROM products WHERE is_active'),
      orders: await all('SELECT id::text AS id FROM orders'),
      customers: await all('SELECT id::text AS id FROM customers'),
      inventory: (await client.inventory.export().toArray()).map((r) => r.product_id).sort(),
      movements: await all('SELECT id::text AS id FROM stock_movements'),
      events: await all(`SELECT id::text AS id FROM events WHERE type <> 'ping'`),
    };
  }, 300_000);
  afterAll(async () => server?.close());
  const key = (r: { id?: string; product_id?: string }) => r.id ?? r.product_id!;

  it('gets one product, order and customer by id, typed as the API serves them', async () => {
    const [productId, orderId, customerId] = [ids.products[0]!, ids.orders[0]!, ids.customers[0]!];
    const product = await client.getProduct(productId);
    expect(product.id).toBe(productId);
    expectSchema(Product, product);
    const order = await client.getOrder(orderId);
    expect(order.id).toBe(orderId);
    expectSchema(Order, order);
    const customer = await client.customers.get(customerId);
    expect(customer.id).toBe(customerId);
    expectSchema(Customer, customer);
  });

  it("sends the token and a User-Agent naming the package version (or the caller's own)", async () => {
    const sent: Record<string, string>[] = [];
    const spy: typeof fetch = (input, init) => {
      sent.push(init?.headers as Record<string, string>);
      return fetch(input, init);
    };
    const { version } = JSON.parse(readFileSync(new URL('../../packages/client/package.json', import.meta.url), 'utf8')) as { version: string };
    await server.client({ fetch: spy }).listCustomers({ limit: 1 });
    await server.client({ fetch: spy, userAgent: 'acme-erp/2.1' }).listCustomers({ limit: 1 });
    expect(sent.map((h) => h['user-agent'])).toEqual([`store-api-client/${version}`, 'acme-erp/2.1']);
    expect(sent[0]!.authorization).toBe(`Bearer ${server.token}`);
  });

  it('answers an unknown id with a typed 404 StoreApiError carrying the problem', async () => {
    const error = await client.getProduct('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreApiError);
    const e = error as StoreApiError;
    expect(e.status).toBe(404);
    expect(e.code).toBe('not_found');
    expect(e.problem?.title).toBe('Not Found');
    expect(e.message).not.toContain('\n');
  });

  it('reports a bad parameter as a 400 naming it, without retrying', async () => {
    let retries = 0;
    const strict = server.client({ onRetry: () => retries++ });
    const error = (await strict.listOrders({ since: 'yesterday' }).catch((e: unknown) => e)) as StoreApiError;
    expect(error.status).toBe(400);
    expect(error.errors.map((e) => e.param)).toContain('since');
    expect(error.message).toContain('since');
    expect(retries).toBe(0);
  });

  it("walks the attributes list by key, resumable from the cursor it exposes, equal to the API's pages", async () => {
    const all = (await server.t.app.inject({ url: '/api/v1/attributes?limit=200', headers: await server.t.auth() })).json() as { data: { key: string }[] };
    expect(all.data.length).toBeGreaterThan(2);
    const iterator = client.iterateAttributes({ limit: 2 });
    const seen: string[] = [];
    for await (const attribute of iterator) {
      expectSchema(AttributeSchema, attribute);
      seen.push(attribute.key);
      if (seen.length === 1) break;
    }
    expect(iterator.cursor).toBe(null);
    const first = await client.listAttributes({ limit: 1 });
    const rest = await client.iterateAttributes({ limit: 2, cursor: first.pagination.next_cursor! }).toArray();
    expect([...first.data, ...rest]).toEqual(all.data);
  });

  it('lists one page of each resource with its pagination', async () => {
    const pages = [
      await client.listProducts({ limit: 5 }),
      await client.listOrders({ limit: 5 }),
      await client.listCustomers({ limit: 5 }),
      await client.listInventory({ limit: 5 }),
      await client.listStockMovements({ limit: 5 }),
      await client.listEvents({ limit: 5 }),
    ];
    for (const page of pages) {
      expect(page.data).toHaveLength(5);
      expect(page.pagination.has_more).toBe(true);
      expect(page.pagination.next_cursor).toBe(cursorAfter(page.data[4]!));
    }
    expectSchema(InventoryRecord, pages[3]!.data[0]);
    expectSchema(StockMovement, pages[4]!.data[0]);
    const next = await client.listProducts({ limit: 5, cursor: pages[0]!.pagination.next_cursor! });
    expect(next.data.map((p) => p.id)).not.toContain(key(pages[0]!.data[0]!));
  });

  const resources = ['products', 'orders', 'customers', 'inventory', 'movements', 'events'] as const;

  it.each(resources)('iterates every page of %s: each record exactly once, cursor at the end', async (resource) => {
    const pages: PageProgress[] = [];
    const iterator = client[resource].iterate(
      { limit: 17 },
      {
        onPage: (p) => {
          pages.push(p);
        },
      },
    );
    const seen: string[] = [];
    for await (const record of iterator) seen.push(key(record));
    expect(seen.sort()).toEqual(ids[resource]);
    expect(iterator.count).toBe(ids[resource].length);
    expect(pages.length).toBe(Math.ceil(ids[resource].length / 17));
    expect(pages.at(-1)!.hasMore).toBe(false);
    expect(pages.reduce((n, p) => n + p.count, 0)).toBe(ids[resource].length);
    // Resuming from the final cursor finds nothing new.
    const rest = await client[resource].list({ cursor: iterator.cursor! });
    expect(rest.data).toEqual([]);
  });

  it.each(resources)('exports every line of %s, request after request, each record exactly once', async (resource) => {
    const iterator = client[resource].export({ limit: 40 });
    const seen: string[] = [];
    for await (const record of iterator) seen.push(key(record));
    expect(seen.sort()).toEqual(ids[resource]);
    expect(iterator.pages).toBe(Math.max(1, Math.ceil(ids[resource].length / 40)));
    const rest = await client[resource].list({ cursor: iterator.cursor! });
    expect(rest.data).toEqual([]);
  });

  it('resumes an interrupted walk from the cursor it exposed, without a gap or a repeat', async () => {
    const first = client.products.iterate({ limit: 10 });
    const seen: string[] = [];
    for await (const product of first) {
      seen.push(product.id);
      if (seen.length === 25) break;
    }
    // The 25th was consumed (the loop body ran) but the iterator was not asked for more.
    const resumed = client.iterateProducts({ limit: 10, cursor: first.cursor! });
    for await (const product of resumed) seen.push(product.id);
    expect(seen.length).toBe(ids.products.length + 1);
    expect([...new Set(seen)].sort()).toEqual(ids.products);
  });

  it('filters the events feed by one or several types, typed by `type`', async () => {
    const orders = await client.events.iterate({ type: 'order.created' }).toArray();
    expect(orders.length).toBe(ids.orders.length);
    const ordersAndCustomers = await client.exportEvents({ type: ['order.created', 'customer.created'] }).toArray();
    expect(ordersAndCustomers.length).toBe(ids.orders.length + ids.customers.length);
    for (const event of ordersAndCustomers) {
      if (event.type === 'order.created') expect(ids.orders).toContain(event.data.id);
      else if (event.type === 'customer.created') expect(ids.customers).toContain(event.data.id);
      else throw new Error(`unexpected ${event.type}`);
    }
    const e = (await client.listEvents({ type: 'nope' as never }).catch((error: unknown) => error)) as StoreApiError;
    expect(e.status).toBe(400);
    expect(e.errors[0]!.param).toBe('type');
  });

  it('stops an iteration or an export through an AbortSignal with an "aborted" StoreApiError', async () => {
    for (const walk of [
      (signal: AbortSignal) => client.products.iterate({ limit: 5 }, { signal }),
      (signal: AbortSignal) => client.products.export({}, { signal }),
    ]) {
      const controller = new AbortController();
      const iterator = walk(controller.signal);
      const error = (await (async () => {
        for await (const _ of iterator) controller.abort();
      })().then(
        () => undefined,
        (e: unknown) => e,
      )) as StoreApiError;
      expect(error).toBeInstanceOf(StoreApiError);
      expect(error.code).toBe('aborted');
      expect(iterator.count).toBeLessThan(ids.products.length);
    }
  });

  it('passes filters through: include_inactive, order status, movements of one product', async () => {
    const db = server.t.ctx.database.db;
    await sql`UPDATE products SET is_active = false WHERE id = ${ids.products[0]!}::uuid`.execute(db);
    const active = await client.products.export().toArray();
    const everything = await client.products.export({ include_inactive: true }).toArray();
    const total = await sql<{ n: number }>`SELECT count(*)::int AS n FROM products`.execute(db);
    expect(everything.length).toBe(total.rows[0]!.n);
    expect(active.map((p) => p.id)).not.toContain(ids.products[0]);
    expect(active.every((p) => p.is_active)).toBe(true);
    expect(everything.find((p) => p.id === ids.products[0])!.is_active).toBe(false);
    const pending = await client.orders.iterate({ status: 'pending' }).toArray();
    expect(pending.every((o) => o.status === 'pending')).toBe(true);
    const productId = ids.inventory[0]!;
    const moves = await client.movements.iterate({ product_id: productId }).toArray();
    expect(moves.length).toBeGreaterThan(0);
    expect(moves.every((m) => m.product_id === productId)).toBe(true);
  });
});
