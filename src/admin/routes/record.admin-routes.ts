/**
 * Admin writes derived from the resource declarations: for each resource with `adminWrites`,
 * POST /admin/api/v1/{path} (201) and PATCH /admin/api/v1/{path}/{id}, answering `{ "data": <record> }`
 * in the read API's shape (resources/record-writes.ts stamps and appends the events).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { RESOURCES } from '../../resources/registry.ts';
import { createRecord, updateRecord } from '../../records/record-writes.ts';
import type { ResourceDeclaration } from '../../records/resource.ts';
import { dataOf } from '../admin-responses.ts';

/** `stock movement` → `StockMovement`, for operation ids. */
const pascal = (words: string) => words.replace(/(?:^|[\s_-]+)(\w)/g, (_m, c: string) => c.toUpperCase());
const IdParam = Type.Object({ id: Type.String({ format: 'uuid' }) }, { additionalProperties: false });

export async function recordAdminRoutes(app: FastifyInstance): Promise<void> {
  const db = app.ctx.database.db;
  const declared: readonly ResourceDeclaration[] = RESOURCES;
  for (const resource of declared) {
    const writes = resource.adminWrites;
    if (!writes) continue;
    const kinds: readonly string[] = resource.events?.kinds ?? [];
    if (!kinds.includes('created') || !kinds.includes('updated')) {
      throw new Error(`resource ${resource.name}: adminWrites needs the events created and updated`);
    }
    const writable = resource as ResourceDeclaration<string, string, string, 'created' | 'updated'>;
    const tags = [`Admin: ${resource.label.toLowerCase()}`];
    app.post(
      `/${resource.path}`,
      {
        config: { permission: 'write' },
        schema: {
          tags,
          operationId: `create${pascal(resource.noun)}`,
          summary: writes.summary?.create ?? `Create a ${resource.noun}`,
          body: writes.create,
          response: { 201: dataOf(resource.record) },
        },
      },
      async (req, reply) => reply.code(201).send({ data: await createRecord(db, writable, req.body as Record<string, unknown>) }),
    );
    app.patch(
      `/${resource.path}/:id`,
      {
        config: { permission: 'write' },
        schema: {
          tags,
          operationId: `update${pascal(resource.noun)}`,
          summary: writes.summary?.update ?? `Update a ${resource.noun}`,
          params: IdParam,
          body: writes.update,
          response: { 200: dataOf(resource.record) },
        },
      },
      async (req) => ({
        data: await updateRecord(db, writable, (req.params as { id: string }).id, req.body as Record<string, unknown>),
      }),
    );
  }
}
