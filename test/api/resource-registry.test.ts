/**
 * What the resource declarations give the dashboard (GET /admin/api/v1/resources): the token scopes
 * with their hints and the event types grouped by resource, exactly the spec's (docs/contract/decisions.md), and
 * the same lists the token and webhook services accept.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { SCOPES } from '../../src/tokens/token.service.ts';
import { SUBSCRIBABLE_EVENT_TYPES } from '../../src/webhooks/webhook.service.ts';

describe.each(backends)('GET /admin/api/v1/resources (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('serves the scopes and event groups the dashboard forms offer', async () => {
    const res = await t.app.inject({ url: '/admin/api/v1/resources', headers: await t.auth(['admin']) });
    expect(res.statusCode).toBe(200);
    const { scopes, event_groups } = res.json().data;
    // The spec's (docs/contract/decisions.md), and those of any resource declared since.
    expect(scopes).toEqual(
      expect.arrayContaining([
        { value: 'products:read', label: 'Products', hint: 'read products, variants and images' },
        { value: 'orders:read', label: 'Orders', hint: 'read orders and their items' },
        { value: 'customers:read', label: 'Customers', hint: 'read registered customers' },
        { value: 'inventory:read', label: 'Inventory', hint: 'read stock levels and stock movements' },
        { value: 'admin', label: 'Admin', hint: 'full access to the admin API — only for automation you trust' },
      ]),
    );
    expect(event_groups).toEqual(
      expect.arrayContaining([
        { label: 'Products', types: ['product.created', 'product.updated'] },
        { label: 'Orders', types: ['order.created', 'order.updated'] },
        { label: 'Customers', types: ['customer.created', 'customer.updated'] },
        { label: 'Inventory', types: ['inventory.updated', 'stock_movement.created'] },
      ]),
    );
    expect(scopes.map((s: { value: string }) => s.value)).toEqual(SCOPES);
    expect(event_groups.flatMap((g: { types: string[] }) => g.types)).toEqual(SUBSCRIBABLE_EVENT_TYPES);
  });

  it('needs an admin session or token', async () => {
    expect((await t.app.inject({ url: '/admin/api/v1/resources' })).statusCode).toBe(401);
    expect((await t.app.inject({ url: '/admin/api/v1/resources', headers: await t.auth() })).statusCode).toBe(403);
  });
});
