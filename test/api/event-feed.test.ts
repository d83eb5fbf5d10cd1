/**
 * The events feed (GET /api/v1/events and its export): every event exactly once while writers run
 * (late commits included, on PostgreSQL), the webhook payloads, scopes, filters and bad input.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ownStoreIs } from '../../src/db/store-scope.ts';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { expectSchema } from '../helpers/schema-check.ts';
import { aCustomer, aProduct, anOrder } from '../helpers/store-fixtures.ts';
import { Event, listOf } from '../../src/api/schemas.ts';
import { adjustStock } from '../../src/inventory/stock.service.ts';
import { updateCustomer } from '../../src/customers/customer.service.ts';
import { runWrite } from '../../src/db/write-clock.ts';
import { appendEvent } from '../../src/events/event-log.ts';
import { productsChanged } from '../../src/catalog/product-events.ts';
import { findEvent } from '../../src/webhooks/webhook-delivery.repository.ts';

type FeedEvent = { id: string; type: string; created_at: string; data: Record<string, unknown> };
type Page = { data: FeedEvent[]; pagination: { next_cursor: string | null; has_more: boolean; limit: number } };

describe.each(backends)('events feed (%s)', (backend) => {
  let t: TestApp;
  let headers: { authorization: string };
  beforeAll(async () => {
    t = await buildTestApp(backend, UNLIMITED);
    headers = await t.auth();
  });
  afterAll(async () => t?.close());

  const get = (url: string, h: Record<string, string> = headers) => t.app.inject({ url, headers: h });

  async function page(query: string, h = headers): Promise<Page> {
    const res = await get(`/api/v1/events?${query}`, h);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Page;
  }

  /** Walks from `cursor` until has_more is false; returns the ids seen and the cursor to resume from. */
  async function walk(query: string, cursor?: string, h = headers) {
    const seen: FeedEvent[] = [];
    for (let pages = 0; pages < 10_000; pages++) {
      const p = await page(`${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, h);
      seen.push(...p.data);
      cursor = p.pagination.next_cursor ?? cursor;
      if (!p.pagination.has_more) return { seen, cursor };
    }
    throw new Error('walk did not end');
  }

  const storeEventIds = async () =>
    (await sql<{ id: string }>`SELECT id::text FROM events WHERE type <> 'ping'`.execute(t.ctx.database.db)).rows.map((r) => r.id);

  it('lists every event exactly once while writers run, late commits included', async () => {
    const db = t.ctx.database.db;
    const base = await aProduct(db, { stock: 1000 });
    let writing = true;
    let pagesRead = 0;
    const pageRead: Array<() => void> = [];
    /** Resolves once the walker has read another page (the slow writer commits only after that). */
    const nextPage = () => new Promise<void>((resolve) => pageRead.push(resolve));

    const writers = Promise.all([
      (async () => {
        // Every third product waits for the walker, so reading and writing interleave on any back end.
        for (let i = 0; i < 15; i++) {
          await aProduct(db);
          if (i % 3 === 2) await nextPage();
        }
      })(),
      (async () => {
        for (let i = 0; i < 15; i++) await adjustStock(db, { product_id: base.id, quantity_change: -1 });
      })(),
      (async () => {
        for (let i = 0; i < 8; i++) {
          const c = await aCustomer(db);
          await updateCustomer(db, c.id, { city: 'Porto' });
        }
      })(),
      (async () => {
        // On PostgreSQL: a write that stamps its events, then stays open while the walker reads a
        // page and other writers commit after it. (PGlite has one connection: nobody could read.)
        if (backend !== 'postgres') return;
        for (let i = 0; i < 4; i++) {
          await runWrite(db, async (ctx) => {
            await productsChanged(ctx, [base.id]);
            await nextPage();
          });
        }
      })(),
    ]).finally(() => {
      writing = false;
    });

    const seen: FeedEvent[] = [];
    let cursor: string | undefined;
    while (writing) {
      const p = await page(`limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      pagesRead++;
      for (const release of pageRead.splice(0)) release();
      seen.push(...p.data);
      cursor = p.pagination.next_cursor ?? cursor;
    }
    await writers;
    const rest = await walk('limit=7', cursor);
    seen.push(...rest.seen);

    const ids = seen.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual((await storeEventIds()).sort());
    expect(pagesRead).toBeGreaterThan(1);
    // Oldest first, in (created_at, id) order.
    const keys = seen.map((e) => `${e.created_at}_${e.id}`);
    expect(keys).toEqual([...keys].sort());
  });

  it("serves the webhook payloads: id, type, created_at, data (and an update's previous) exactly as delivered", async () => {
    const all = (await walk('limit=200')).seen;
    expectSchema(listOf(Event), { data: all, pagination: { next_cursor: null, has_more: false, limit: 200 } });
    for (const event of all.slice(0, 20)) {
      const stored = await findEvent(t.ctx.database.db, event.id);
      const { rows } = await sql<{ previous: unknown }>`SELECT previous FROM events WHERE ${ownStoreIs('store_id')} AND id = ${event.id}::uuid`.execute(
        t.ctx.database.db,
      );
      const previous = rows[0]!.previous;
      // The worker POSTs { id, type, created_at, data } of this very row, and `previous` on an *.updated event (decision 0057).
      expect(previous === null).toBe(!event.type.endsWith('.updated'));
      expect(JSON.stringify(event)).toBe(
        JSON.stringify({ id: stored!.id, type: stored!.type, created_at: stored!.created_at, data: stored!.data, ...(previous === null ? {} : { previous }) }),
      );
    }
    // Pings (sent to one endpoint on demand) are not store events.
    await runWrite(t.ctx.database.db, (ctx) => appendEvent(ctx, 'ping', 'x', { endpoint_id: '00000000-0000-0000-0000-000000000000', message: 'ping' }));
    expect((await walk('limit=200')).seen.map((e) => e.type)).not.toContain('ping');
  });

  it('export streams the same events as NDJSON with X-Next-Cursor', async () => {
    const listed = (await walk('limit=200')).seen.map((e) => e.id);
    const exported: string[] = [];
    let cursor = '';
    for (let i = 0; i < 100; i++) {
      const res = await get(`/api/v1/events/export?limit=40${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/application\/x-ndjson/);
      exported.push(
        ...res.body
          .split('\n')
          .filter(Boolean)
          .map((line) => (JSON.parse(line) as FeedEvent).id),
      );
      cursor = String(res.headers['x-next-cursor']);
      if (res.headers['x-has-more'] === 'false') break;
    }
    expect(exported).toEqual(listed);
  });

  it('filters by type (repeated and/or comma-separated) and since', async () => {
    const db = t.ctx.database.db;
    const product = await aProduct(db);
    await anOrder(db, [{ product_id: product.id, quantity: 1 }]);
    const all = (await walk('limit=200')).seen;

    const orders = (await walk('limit=200&type=order.created')).seen;
    expect(orders.length).toBeGreaterThan(0);
    expect(orders.map((e) => e.id)).toEqual(all.filter((e) => e.type === 'order.created').map((e) => e.id));

    const wanted = ['customer.created', 'customer.updated', 'stock_movement.created'];
    const expected = all.filter((e) => wanted.includes(e.type)).map((e) => e.id);
    expect((await walk('limit=200&type=customer.created,customer.updated&type=stock_movement.created')).seen.map((e) => e.id)).toEqual(expected);
    expect((await walk('limit=200&type=customer.created&type=customer.updated,stock_movement.created')).seen.map((e) => e.id)).toEqual(expected);

    const pivot = all[Math.floor(all.length / 2)]!.created_at;
    const after = (await walk(`limit=200&since=${pivot}`)).seen;
    expect(after.map((e) => e.id)).toEqual(all.filter((e) => e.created_at > pivot).map((e) => e.id));
  });

  it('shows a token only the events of resources it has scopes for', async () => {
    const all = (await walk('limit=200')).seen;
    const ordersOnly = await t.auth(['orders:read']);
    const seen = (await walk('limit=200', undefined, ordersOnly)).seen;
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.map((e) => e.id)).toEqual(all.filter((e) => e.type.startsWith('order.')).map((e) => e.id));

    const inventory = await t.auth(['inventory:read']);
    const types = new Set((await walk('limit=200', undefined, inventory)).seen.map((e) => e.type));
    expect([...types].sort()).toEqual(['inventory.updated', 'stock_movement.created']);

    // Asking for a type it may not see is refused, not answered with a silently empty page.
    const refused = await get('/api/v1/events?type=order.created,product.updated', inventory);
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ code: 'forbidden' });
    expect(refused.json().detail).toContain('orders:read');
    expect(refused.json().detail).toContain('products:read');

    const adminOnly = await t.auth(['admin']);
    expect((await get('/api/v1/events', adminOnly)).statusCode).toBe(403);
    expect((await get('/api/v1/events/export', adminOnly)).statusCode).toBe(403);
    expect((await t.app.inject({ url: '/api/v1/events' })).statusCode).toBe(401);
  });

  it('answers bad input with a 400 naming the parameter', async () => {
    for (const [query, param] of [
      ['type=order.shipped', 'type'],
      ['type=ping', 'type'],
      ['type=,', 'type'],
      ['since=yesterday', 'since'],
      ['cursor=nope', 'cursor'],
      ['limit=0', 'limit'],
      ['colour=red', 'colour'],
    ] as const) {
      const res = await get(`/api/v1/events?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.json().errors[0].param, query).toBe(param);
    }
    const unknown = await get('/api/v1/events?type=order.created,order.shipped');
    expect(unknown.json().errors[0].message).toContain("'order.shipped'");
  });

  it('refuses a cursor from before the retention, naming the oldest available cursor', async () => {
    const db = t.ctx.database.db;
    const all = (await walk('limit=200')).seen;
    const kept = all[Math.floor(all.length / 2)]!;
    // As the pruner publishes it: events from this instant on are complete.
    await sql`INSERT INTO retention_watermarks (table_name, oldest_available, updated_at) VALUES ('events', ${kept.created_at}::timestamptz, now())
      ON CONFLICT (table_name) DO UPDATE SET oldest_available = excluded.oldest_available`.execute(db);
    try {
      const old = all[0]!;
      const cursor = `${old.created_at}_${old.id}`;
      for (const [query, param] of [
        [`cursor=${encodeURIComponent(cursor)}`, 'cursor'],
        [`since=${old.created_at}`, 'since'],
      ] as const) {
        const res = await get(`/api/v1/events?${query}`);
        expect(res.statusCode).toBe(400);
        expect(res.json().errors[0].param).toBe(param);
        const named = /oldest available cursor is (\S+)/.exec(res.json().errors[0].message)?.[1];
        expect(named).toBeDefined();
        // The cursor named is usable and yields exactly the retained suffix of the log.
        const rest = (await walk('limit=200', named)).seen;
        expect(rest.map((e) => e.id)).toEqual(all.filter((e) => e.created_at >= kept.created_at).map((e) => e.id));
      }
      // Without a cursor the feed starts at the oldest available event.
      expect((await walk('limit=200')).seen[0]!.created_at >= kept.created_at).toBe(true);
    } finally {
      await sql`DELETE FROM retention_watermarks`.execute(db);
    }
  });
});
