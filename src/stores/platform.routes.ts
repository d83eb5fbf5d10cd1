/**
 * The platform API, /platform/api/v1 (decision 0051): what `store-api stores …` does, over HTTP,
 * for a platform that provisions stores from its own sign-up flow. Its credential is the
 * deployment's PLATFORM_API_TOKEN, sent as `Authorization: Bearer …`: no store's key, and it reads
 * no store's data (the store API refuses it); a store's key is refused here. Unset, the API is off.
 * Every statement runs across stores (the platform scope) and names the store itself.
 *
 * Not in the store API's OpenAPI document (its readers are integrators of one store); the routes
 * and shapes are in docs/scaling.md.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { setScope, inStore, PLATFORM_SCOPE } from '../db/store-scope.ts';
import { ApiError } from '../shared/problem.ts';
import { SCOPES, TOKEN_PREFIX, createToken, type Scope } from '../tokens/token.service.ts';
import { createStore, deleteStore, getStore, listStores, setStoreStatus } from './store.service.ts';
import { presentsPlatformCredential } from './platform-credential.ts';
import { storeSetupUrl } from '../admin/sessions/setup-code.service.ts';
import { listPlatformAudit, recordPlatformAction, type PlatformActor } from './platform-audit.ts';

export const PLATFORM_PREFIX = '/platform/api/v1';

function authenticatePlatform(request: FastifyRequest): void {
  if (request.server.ctx.config.PLATFORM_API_TOKEN === undefined) {
    throw new ApiError('forbidden', 'The platform API is off on this deployment: its operator sets PLATFORM_API_TOKEN to turn it on.');
  }
  const header = request.headers.authorization;
  if (header === undefined) {
    throw new ApiError('unauthorized', 'Missing Authorization header. Send "Authorization: Bearer <platform credential>" (PLATFORM_API_TOKEN).', undefined, {
      'WWW-Authenticate': 'Bearer realm="store-api-platform"',
    });
  }
  if (!presentsPlatformCredential(request)) {
    const storeKey = /^Bearer[ ]+(\S+)/i.exec(header)?.[1]?.startsWith(TOKEN_PREFIX) === true;
    throw new ApiError(
      'unauthorized',
      storeKey
        ? "This is a store's API key: the platform API takes the platform credential (PLATFORM_API_TOKEN), which no store's key is."
        : 'The platform credential is not valid.',
      undefined,
      { 'WWW-Authenticate': 'Bearer realm="store-api-platform", error="invalid_token"' },
    );
  }
  setScope(PLATFORM_SCOPE);
}

const StoreSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    status: Type.Union([Type.Literal('active'), Type.Literal('suspended'), Type.Literal('deleting')]),
    created_at: Type.String(),
  },
  { additionalProperties: false },
);
const ScopeSchema = Type.Unsafe<Scope>({ type: 'string', enum: [...SCOPES] });
const CreateBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    key: Type.Optional(
      Type.Object(
        { name: Type.String({ minLength: 1, maxLength: 100 }), scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })) },
        { additionalProperties: false, description: 'A first API key of the new store, made with it (its secret is in this answer only)' },
      ),
    ),
  },
  { additionalProperties: false },
);
const Created = Type.Object({
  data: Type.Intersect([
    StoreSchema,
    Type.Object({
      setup_url: Type.String({ description: "The one-time link that makes the store's first owner (dashboard setup page); in this answer only" }),
      key: Type.Optional(Type.Object({ id: Type.String(), name: Type.String(), scopes: Type.Array(Type.String()), token: Type.String() })),
    }),
  ]),
});
const IdParam = Type.Object({ id: Type.String({ format: 'uuid' }) }, { additionalProperties: false });

const AuditQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'next_cursor of the previous page' })),
    store: Type.Optional(Type.String({ format: 'uuid', description: "only this store's entries" })),
  },
  { additionalProperties: false },
);
const AuditEntrySchema = Type.Object({
  id: Type.String(),
  at: Type.String(),
  actor: Type.Union([Type.Literal('platform_api'), Type.Literal('cli')]),
  actor_detail: Type.Union([Type.String(), Type.Null()]),
  action: Type.String(),
  store_id: Type.String(),
  store_name: Type.String(),
  details: Type.Record(Type.String(), Type.Unknown()),
});

/** The platform API as the audit log's actor, with the client's address. */
function apiActor(request: FastifyRequest): PlatformActor {
  return { actor: 'platform_api', detail: `client ${request.ip}` };
}

export async function platformRoutes(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', async (request) => authenticatePlatform(request));
  const db = app.ctx.database.db;

  app.post('/stores', { config: { returnsSecret: true }, schema: { body: CreateBody, response: { 201: Created } } }, async (request, reply) => {
    const body = request.body as { name: string; key?: { name: string; scopes?: Scope[] } };
    const store = await createStore(db, { name: body.name });
    await recordPlatformAction(db, apiActor(request), 'store.created', store);
    let key: { id: string; name: string; scopes: string[]; token: string } | undefined;
    if (body.key) {
      const made = await inStore(store.id, () =>
        createToken(db, { name: body.key!.name, scopes: body.key!.scopes, maxKeysOfStore: app.ctx.config.STORE_MAX_API_KEYS }),
      );
      key = { id: made.summary.id, name: made.summary.name, scopes: made.summary.scopes, token: made.token };
      await recordPlatformAction(db, apiActor(request), 'store.key_created', store, { key_id: key.id, key_name: key.name, scopes: key.scopes });
    }
    // The first owner's one-time link (decision 0051, "Administrators per store"): in this answer only.
    const setup = await storeSetupUrl(db, app.ctx.config, store.id);
    return reply.code(201).send({ data: { ...store, setup_url: setup.url, ...(key ? { key } : {}) } });
  });

  app.get('/stores', { schema: { response: { 200: Type.Object({ data: Type.Array(StoreSchema) }) } } }, async () => ({ data: await listStores(db) }));

  app.get('/stores/:id', { schema: { params: IdParam, response: { 200: Type.Object({ data: StoreSchema }) } } }, async (request) => ({
    data: await getStore(db, (request.params as { id: string }).id),
  }));

  for (const [action, status] of [
    ['suspend', 'suspended'],
    ['resume', 'active'],
  ] as const) {
    app.post(`/stores/:id/${action}`, { schema: { params: IdParam, response: { 200: Type.Object({ data: StoreSchema }) } } }, async (request) => {
      const store = await setStoreStatus(db, (request.params as { id: string }).id, status);
      await recordPlatformAction(db, apiActor(request), status === 'active' ? 'store.resumed' : 'store.suspended', store);
      return { data: store };
    });
  }

  app.delete(
    '/stores/:id',
    { schema: { params: IdParam, response: { 200: Type.Object({ data: Type.Object({ id: Type.String(), deleted_rows: Type.Integer() }) }) } } },
    async (request) => {
      const { id } = request.params as { id: string };
      const store = await getStore(db, id);
      await recordPlatformAction(db, apiActor(request), 'store.deletion_started', store);
      const { deleted } = await deleteStore(db, id);
      await recordPlatformAction(db, apiActor(request), 'store.deleted', store, { deleted_rows: deleted });
      return { data: { id, deleted_rows: deleted } };
    },
  );

  app.get(
    '/audit-log',
    {
      schema: {
        querystring: AuditQuery,
        response: {
          200: Type.Object({
            data: Type.Array(AuditEntrySchema),
            pagination: Type.Object({ limit: Type.Integer(), has_more: Type.Boolean(), next_cursor: Type.Union([Type.String(), Type.Null()]) }),
          }),
        },
      },
    },
    async (request) => listPlatformAudit(db, request.query as { limit: number; cursor?: string; store?: string }),
  );
}
