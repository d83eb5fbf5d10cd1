/**
 * The event catalog (inject, every back end): GET /admin/api/v1/event-types lists exactly the
 * webhook event types of the resource registry (and ping), each with a description, a payload JSON
 * schema its example validates against, and the same schema and example as the OpenAPI document.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { LightMyRequestResponse } from 'fastify';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';
import { FEED_EVENT_TYPES } from '../../src/resources/registry.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function cookieOf(res: LightMyRequestResponse): string {
  const header = res.headers['set-cookie'];
  return (Array.isArray(header) ? header : [header]).find((c) => c?.startsWith('store_admin_session='))!.split(';')[0]!;
}

describe.each(backends)('event catalog (%s)', (backend) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('lists every event type of the registry with a description, a schema and an example that validates', async () => {
    const res = await t.app.inject({ url: '/admin/api/v1/event-types', headers: await t.auth(['admin']) });
    expect(res.statusCode).toBe(200);
    const catalog = res.json().data as { type: string; description: string; schema: object; example: { type: string } }[];
    expect(catalog.map((e) => e.type)).toEqual([...FEED_EVENT_TYPES, 'ping']);
    const ajv = addFormats(new Ajv({ allErrors: true, strict: false }));
    for (const entry of catalog) {
      expect(entry.description.length).toBeGreaterThan(10);
      expect(entry.example.type).toBe(entry.type);
      const validate = ajv.compile(entry.schema);
      expect(validate(entry.example), `${entry.type}: ${ajv.errorsText(validate.errors)}`).toBe(true);
      // A wrong example must fail: the schema constrains the body.
      expect(validate({ ...entry.example, type: 'nope' })).toBe(false);
    }
  });

  it('matches the OpenAPI document: same types, examples, and the route itself is documented', async () => {
    const doc = (await t.app.inject({ url: '/api/v1/openapi.json' })).json();
    const answer = (await t.app.inject({ url: '/admin/api/v1/event-types', headers: await t.auth(['admin']) })).json();
    const catalog = answer.data as { type: string; description: string; example: unknown }[];
    // Every event type, and the batch body of a FIFO endpoint (decision 0059) beside them.
    expect(Object.keys(doc.webhooks).sort()).toEqual([...catalog.map((e) => e.type), 'fifo.batch'].sort());
    for (const entry of [...catalog, { type: 'fifo.batch', ...answer.fifo_batch }]) {
      const post = doc.webhooks[entry.type].post;
      expect(post.requestBody.content['application/json'].example).toEqual(entry.example);
      expect(post.description).toContain(entry.description);
    }
    expect(doc.paths['/admin/api/v1/event-types'].get.responses['200']).toBeDefined();
  });

  it('is readable by a viewer', async () => {
    await createAdminUser(t.database.db, { email: 'viewer@example.com', password: 'correct horse battery', role: 'viewer' });
    const login = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: 'viewer@example.com', password: 'correct horse battery' } });
    const res = await t.app.inject({ url: '/admin/api/v1/event-types', headers: { cookie: cookieOf(login) } });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.length).toBe(FEED_EVENT_TYPES.length + 1);
  });
});
