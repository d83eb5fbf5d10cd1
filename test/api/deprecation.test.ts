/**
 * The /api/v1 deprecation mechanism (docs/api-versioning.md): a route configured as deprecated
 * answers with Deprecation (RFC 9745), Sunset (RFC 8594) and Link rel="deprecation"/"successor-version"
 * headers, keeps the Link header the route set itself, and is marked deprecated in the OpenAPI
 * document; routes that are not deprecated carry none of it; a malformed schedule stops the start.
 */
import Fastify from 'fastify';
import swagger from '@fastify/swagger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deprecationHeaders, deprecationPlugin } from '../../src/api/plugins/deprecation.ts';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';

describe('deprecation headers', () => {
  const app = Fastify();
  beforeAll(async () => {
    await app.register(swagger, { openapi: { info: { title: 't', version: '1' } } });
    await app.register(deprecationPlugin);
    app.get(
      '/old',
      { config: { deprecated: { since: '2026-12-01T00:00:00Z', sunset: '2027-06-30T00:00:00Z', successor: '/api/v2/things' } } },
      async (_request, reply) => {
        reply.header('Link', '</old?cursor=abc>; rel="next"');
        return { ok: true };
      },
    );
    app.get('/failing', { config: { deprecated: { since: '2026-12-01T00:00:00Z' } } }, async () => {
      throw Object.assign(new Error('nope'), { statusCode: 404 });
    });
    app.get('/current', async () => ({ ok: true }));
    await app.ready();
  });
  afterAll(() => app.close());

  it("announces the deprecation, the sunset and the successor, keeping the route's own links", async () => {
    const res = await app.inject({ url: '/old' });
    expect(res.statusCode).toBe(200);
    expect(res.headers.deprecation).toBe(`@${Date.parse('2026-12-01T00:00:00Z') / 1000}`);
    expect(res.headers.sunset).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
    expect(res.headers.link).toBe('</old?cursor=abc>; rel="next", </docs>; rel="deprecation"; type="text/html", </api/v2/things>; rel="successor-version"');
  });

  it('sends the headers on error responses too, and no Sunset when none is set', async () => {
    const res = await app.inject({ url: '/failing' });
    expect(res.statusCode).toBe(404);
    expect(res.headers.deprecation).toBe(`@${Date.parse('2026-12-01T00:00:00Z') / 1000}`);
    expect(res.headers.sunset).toBeUndefined();
  });

  it('leaves routes that are not deprecated alone', async () => {
    const res = await app.inject({ url: '/current' });
    expect(res.headers.deprecation).toBeUndefined();
    expect(res.headers.sunset).toBeUndefined();
    expect(res.headers.link).toBeUndefined();
  });

  it('marks the deprecated operations in the OpenAPI document', () => {
    const paths = (app.swagger() as { paths: Record<string, { get: { deprecated?: boolean } }> }).paths;
    expect(paths['/old']!.get.deprecated).toBe(true);
    expect(paths['/current']!.get.deprecated).toBeUndefined();
  });

  it('refuses a schedule that gives less than six months of notice or is not a date', async () => {
    expect(() => deprecationHeaders({ since: '2026-12-01T00:00:00Z', sunset: '2027-03-01T00:00:00Z' })).toThrow(/less than 6 months/);
    expect(() => deprecationHeaders({ since: 'soon' })).toThrow(/not a date/);
    const bad = Fastify();
    await bad.register(deprecationPlugin);
    expect(() => bad.get('/x', { config: { deprecated: { since: '2026-12-01T00:00:00Z', sunset: '2026-12-02T00:00:00Z' } } }, async () => ({}))).toThrow(
      /less than 6 months/,
    );
    await bad.close();
  });
});

describe.each(backends)('the application (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('has the deprecation mechanism in front of its routes', () => {
    expect(t.app.hasPlugin('api-deprecation')).toBe(true);
  });
});
