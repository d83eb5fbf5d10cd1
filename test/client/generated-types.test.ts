/**
 * Drift check: the committed packages/client/src/generated/api-types.ts is exactly what
 * `npm run generate -w @store-api/client` produces from the application's OpenAPI document now. A
 * schema change without a regeneration fails here.
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_OPERATIONS_FILE,
  API_TYPES_FILE,
  RESOURCE_CLIENTS_FILE,
  RESOURCES_FILE,
  buildOpenApiDocument,
  renderAdminOperations,
  renderApiTypes,
  renderResourceClients,
  renderResources,
} from '../../packages/client/scripts/generate-api-types.ts';
import { RESOURCES } from '../../src/resources/registry.ts';

describe("the client's generated API types", () => {
  let document: Record<string, unknown>;
  beforeAll(async () => {
    document = await buildOpenApiDocument();
  });

  it('match the OpenAPI document the service serves (run `npm run generate -w @store-api/client` if not)', async () => {
    const generated = await renderApiTypes(document);
    const committed = readFileSync(API_TYPES_FILE, 'utf8');
    expect(committed === generated, 'packages/client/src/generated/api-types.ts is stale: run `npm run generate -w @store-api/client` and commit it').toBe(
      true,
    );
  });

  it('list every resource the service declares (run `npm run generate -w @store-api/client` if not)', () => {
    const committed = readFileSync(RESOURCES_FILE, 'utf8');
    expect(
      committed === renderResources(document),
      'packages/client/src/generated/resources.ts is stale: run `npm run generate -w @store-api/client` and commit it',
    ).toBe(true);
    expect((document['x-resources'] as { name: string }[]).map((r) => r.name)).toEqual(RESOURCES.map((r) => r.name));
  });

  it('give the client a typed member per resource (run `npm run generate -w @store-api/client` if not)', () => {
    expect(
      readFileSync(RESOURCE_CLIENTS_FILE, 'utf8') === renderResourceClients(document),
      'packages/client/src/generated/resource-clients.ts is stale: run `npm run generate -w @store-api/client` and commit it',
    ).toBe(true);
  });

  it("list the admin API's operations a key may call (run `npm run generate -w @store-api/client` if not)", () => {
    expect(
      readFileSync(ADMIN_OPERATIONS_FILE, 'utf8') === renderAdminOperations(document),
      'packages/client/src/generated/admin-operations.ts is stale: run `npm run generate -w @store-api/client` and commit it',
    ).toBe(true);
  });

  it('cover every event type of the webhooks section and every read operation', () => {
    const { webhooks, paths } = document as { webhooks: Record<string, unknown>; paths: Record<string, unknown> };
    const committed = readFileSync(API_TYPES_FILE, 'utf8');
    // Each event type's body by its `type`; the FIFO batch (an array of them) by its entry.
    for (const type of Object.keys(webhooks)) expect(committed).toContain(type === 'fifo.batch' ? '"fifo.batch": {' : `type: "${type}"`);
    for (const path of Object.keys(paths).filter((p) => p.startsWith('/api/v1/'))) expect(committed).toContain(`"${path}": {`);
  });
});
