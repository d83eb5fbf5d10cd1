/**
 * The contract test's own promises (test/helpers/contract-check.ts): it checks responses of the real
 * app against the served document, and a route that sends a status, header or body the document does
 * not declare is a violation (which buildTestApp's close() turns into a failed test file).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import { pino } from 'pino';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { assertContractKept, buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { attachContractCheck, type ContractCheck } from '../helpers/contract-check.ts';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { createAdminUser } from '../../src/admin/sessions/admin-user.service.ts';

describe.each(backends)('the contract check (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('checks the responses of documented operations and finds none breaking the document', async () => {
    const before = t.contract.checked();
    const auth = await t.auth(['products:read', 'admin']);
    expect((await t.app.inject({ url: '/api/v1/products', headers: auth })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/admin/api/v1/tokens', headers: auth })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/api/v1/products/export', headers: auth })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/api/v1/products', headers: { authorization: 'Bearer nope' } })).statusCode).toBe(401);
    expect(t.contract.checked() - before).toBe(4);
    expect(t.contract.violations).toEqual([]);
  });

  it("checks the dashboard's requests made with its session cookie, from the sign-in to the sign-out", async () => {
    await createAdminUser(t.database.db, { email: 'contract@example.com', password: 'correct horse battery', role: 'admin' });
    const before = t.contract.checked();
    const signIn = await t.app.inject({ method: 'POST', url: '/admin/session', payload: { email: 'contract@example.com', password: 'correct horse battery' } });
    expect(signIn.statusCode, signIn.body).toBe(200);
    const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
    const csrf = { cookie, 'x-csrf-token': signIn.json().data.csrf_token as string };
    expect((await t.app.inject({ url: '/admin/session', headers: { cookie } })).json().data.email).toBe('contract@example.com');
    // Read and session-only routes with the cookie; a change with its CSRF header too.
    expect((await t.app.inject({ url: '/admin/api/v1/tokens', headers: { cookie } })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/admin/api/v1/account/stores', headers: { cookie } })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'POST', url: '/admin/api/v1/alerts/seen', headers: csrf })).statusCode).toBe(204);
    expect((await t.app.inject({ method: 'DELETE', url: '/admin/session', headers: csrf })).statusCode).toBe(204);
    expect(t.contract.checked() - before).toBe(6);
    expect(t.contract.violations).toEqual([]);
  });
});

describe.each(backends)('a route that breaks the document (%s)', (backend) => {
  let database: TestDatabase;
  let app: App;
  let authorization: string;
  let contract: ContractCheck;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    const config = loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false' });
    app = await buildApp({ config, database, logger: pino({ level: 'silent' }) });
    // Declares 200 with a typed body; answers what each test asks for.
    app.get(
      '/admin/api/v1/contract-probe',
      {
        schema: {
          tags: ['Admin: contract probe'],
          querystring: Type.Object({ status: Type.Optional(Type.Integer()), body: Type.Optional(Type.String()) }),
          response: { 200: Type.Object({ data: Type.Object({ n: Type.Integer() }) }) },
        },
      },
      async (request, reply) => {
        const query = request.query as { status?: number; body?: string };
        return reply
          .code((query.status ?? 200) as 200)
          .type('application/json')
          .send(query.body ?? '{"data":{"n":1}}');
      },
    );
    // Declares NDJSON lines of `{ n: integer }`; streams the lines asked for.
    app.get(
      '/admin/api/v1/contract-probe/export',
      {
        schema: {
          tags: ['Admin: contract probe'],
          querystring: Type.Object({ lines: Type.String() }),
          produces: ['application/x-ndjson'],
          response: { 200: { description: 'NDJSON', content: { 'application/x-ndjson': { schema: Type.Object({ n: Type.Integer() }) } } } },
        },
      },
      async (request, reply) => {
        const lines = (request.query as { lines: string }).lines.split(',');
        reply.type('application/x-ndjson');
        return reply.send(Readable.from(lines.map((n) => `{"n":${n}}\n`)));
      },
    );
    // Declares that only a key is accepted, and accepts anything: a dashboard's cookie too.
    app.get(
      '/admin/api/v1/contract-probe/keys-only',
      {
        schema: {
          tags: ['Admin: contract probe'],
          security: [{ bearerAuth: ['admin'] }],
          response: { 200: Type.Object({ data: Type.Object({ n: Type.Integer() }) }) },
        },
      },
      async () => ({ data: { n: 1 } }),
    );
    contract = attachContractCheck(app);
    await app.ready();
    authorization = `Bearer ${(await createToken(database.db, { name: 'probe', scopes: ['admin'] })).token}`;
  });
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  it('is a violation when it sends a status the document does not declare, and fails the run', async () => {
    const ok = await app.inject({ url: '/admin/api/v1/contract-probe', headers: { authorization } });
    expect(ok.statusCode).toBe(200);
    expect(contract.violations).toEqual([]);
    await app.inject({ url: '/admin/api/v1/contract-probe?status=201', headers: { authorization } });
    expect(contract.violations).toEqual([expect.stringMatching(/^GET \/admin\/api\/v1\/contract-probe 201: status not declared/)]);
    expect(() => assertContractKept(contract)).toThrow(/broke the OpenAPI document/);
  });

  it('is a violation when its body does not match the declared schema', async () => {
    contract.violations.length = 0;
    await app.inject({ url: `/admin/api/v1/contract-probe?body=${encodeURIComponent('{"data":{"n":"one"}}')}`, headers: { authorization } });
    expect(contract.violations).toEqual([expect.stringMatching(/^GET \/admin\/api\/v1\/contract-probe 200: body .*must be integer/)]);
  });

  it('is a violation when it accepts a request whose credentials its declared security does not allow (a validating proxy would refuse it)', async () => {
    contract.violations.length = 0;
    expect((await app.inject({ url: '/admin/api/v1/contract-probe/keys-only', headers: { authorization } })).statusCode).toBe(200);
    expect(contract.violations).toEqual([]);
    expect((await app.inject({ url: '/admin/api/v1/contract-probe/keys-only', headers: { cookie: 'store_admin_session=abc' } })).statusCode).toBe(200);
    expect(contract.violations).toEqual([
      expect.stringMatching(
        /^GET \/admin\/api\/v1\/contract-probe\/keys-only 200: accepted with dashboardSession, which no security requirement of the document allows \(bearerAuth\)/,
      ),
    ]);
  });

  it('checks a streamed NDJSON answer line by line against x-ndjson-line-schema, passing it through unchanged', async () => {
    contract.violations.length = 0;
    const good = await app.inject({ url: '/admin/api/v1/contract-probe/export?lines=1,2,3', headers: { authorization } });
    expect(good.body).toBe('{"n":1}\n{"n":2}\n{"n":3}\n');
    expect(contract.violations).toEqual([]);
    const bad = await app.inject({ url: '/admin/api/v1/contract-probe/export?lines=1,"two",3', headers: { authorization } });
    expect(bad.body).toBe('{"n":1}\n{"n":"two"}\n{"n":3}\n');
    expect(contract.violations).toEqual([expect.stringMatching(/^GET \/admin\/api\/v1\/contract-probe\/export 200: NDJSON line 2: .*must be integer/)]);
  });
});
