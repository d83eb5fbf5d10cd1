/**
 * A client generated from the OpenAPI document (openapi-typescript + openapi-fetch, no hand-written
 * types) compiles under `tsc --strict`, refuses wrong types at compile time, and walks every list
 * and every export of a running service on each back end, seeing every record.
 */
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { startClientTestServer, type ClientTestServer } from './client-test-kit.ts';
import { firstPages, walkEverything } from './openapi-fetch/walk.ts';
import { strictTsc } from './strict-tsc.ts';

const HERE = fileURLToPath(new URL('./openapi-fetch/', import.meta.url));
const tsc = (file: string) => strictTsc([join(HERE, file)]);

describe('the client generated with openapi-typescript + openapi-fetch: compile time', () => {
  it('compiles under tsc --strict, calling every list with no parameter at all', async () => {
    const result = await tsc('walk.ts');
    expect(result.out).toBe('');
    expect(result.code).toBe(0);
  });

  it('refuses wrong types: a string limit, an unknown status, a missing path id, an unknown path', async () => {
    const result = await tsc('wrong-types.ts');
    expect(result.code).not.toBe(0);
    const lines = (await import('node:fs')).readFileSync(join(HERE, 'wrong-types.ts'), 'utf8').split('\n');
    const wrongLines = lines.flatMap((line, i) => (/^\/\/ WRONG-\d/.test(line) ? [i + 2] : []));
    const errorLines = [...result.out.matchAll(/wrong-types\.ts\((\d+),\d+\): error TS\d+/g)].map((m) => Number(m[1]));
    expect([...new Set(errorLines)].sort((a, b) => a - b)).toEqual(wrongLines);
  });
});

describe.each(backends)('the client generated with openapi-typescript + openapi-fetch against the service (%s)', (backend) => {
  let server: ClientTestServer;
  beforeAll(async () => {
    server = await startClientTestServer(backend, UNLIMITED);
    await generateDemoStore(server.t.ctx.database.db, { products: 45, customers: 12, orders: 20, batchSize: 45 });
  });
  afterAll(async () => server?.close());

  it('calls every list with only the required parameters', async () => {
    expect(await firstPages(server.baseUrl, server.token)).toEqual([200, 200, 200, 200, 200, 200]);
  });

  it('walks every page of every list and every export, seeing each record once', async () => {
    const db = server.t.ctx.database.db;
    const ids = async (query: string) => (await sql<{ id: string }>`${sql.raw(query)}`.execute(db)).rows.map((r) => r.id).sort();
    const expected: Record<string, string[]> = {
      products: await ids('SELECT id::text AS id FROM products WHERE is_active'),
      orders: await ids('SELECT id::text AS id FROM orders'),
      customers: await ids('SELECT id::text AS id FROM customers'),
      movements: await ids('SELECT id::text AS id FROM stock_movements'),
      events: await ids(`SELECT id::text AS id FROM events WHERE type <> 'ping'`),
    };
    // Inventory: the stock-tracked products, deactivated ones included (its default).
    expected.inventory = await ids(`SELECT id::text AS id FROM products WHERE product_type IN ('physical','food','digital_card')`);
    const walked = await walkEverything(server.baseUrl, server.token, 7);
    for (const [name, seen] of Object.entries(walked)) {
      const resource = name.replace('/export', '');
      expect(seen.ids.slice().sort(), name).toEqual(expected[resource]);
      expect(seen.pages, name).toBeGreaterThan(1);
    }
  });
});
