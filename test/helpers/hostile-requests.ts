/**
 * Generated requests for every route, from the routes' own schemas (fast-check): mostly valid
 * values with hostile ones mixed in at any field — numbers that coerce to Infinity, timestamps
 * outside PostgreSQL's range, NUL and lone surrogates, money with too many decimals or whose
 * products overflow, SQL-looking and huge strings, unknown fields. Used by the property test
 * (test/api/generated-input.test.ts, in-process) and by the run script (bench/fuzz.ts, over HTTP).
 * `responseProblem` says what is wrong with a response: any 5xx, or a 4xx that is not a
 * problem+json naming the field.
 */
import { channel } from 'node:diagnostics_channel';
import fc from 'fast-check';
import type { FastifyInstance, RouteOptions } from 'fastify';

type Schema = Record<string, any>;

/** A route as registered, with the schemas its input is validated against. */
export interface RouteSpec {
  method: string;
  url: string;
  params?: Schema;
  querystring?: Schema;
  body?: Schema;
  /** The route's config: its authorization rule (`permission`, `scope`, `anyScope`) among others. */
  config?: Record<string, unknown>;
}

/** Ids of existing records, so generated requests reach the code behind a 404 too. */
export interface FuzzFixtures {
  ids: string[];
  readToken: string;
  adminToken: string;
}

/** One generated request. */
export interface GeneratedRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** Raw body text (JSON may hold tokens JSON.stringify cannot write, such as 1e400). */
  payload?: string;
}

/** Routes not exercised: documentation assets, metrics, the dashboard's static files. */
const SKIPPED = /^\/(docs|metrics|healthz|readyz|admin\/?$|admin\/assets|admin\/\*|admin\/(?!api|session))/;

/**
 * Builds an app with `build` and returns every route it registered (method, URL, schemas),
 * observed through Fastify's `fastify.initialization` diagnostics channel before any route exists.
 */
export async function collectRoutes<T>(build: () => Promise<T>): Promise<{ app: T; routes: RouteSpec[] }> {
  const routes: RouteSpec[] = [];
  const init = channel('fastify.initialization');
  const onInit = (message: unknown) => {
    const { fastify } = message as { fastify: FastifyInstance };
    fastify.addHook('onRoute', (route: RouteOptions) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        if (method === 'HEAD' || SKIPPED.test(route.url)) continue;
        const schema = (route.schema ?? {}) as Schema;
        routes.push({
          method,
          url: route.url,
          params: schema.params,
          querystring: schema.querystring,
          body: schema.body,
          config: route.config as Record<string, unknown> | undefined,
        });
      }
    });
  };
  init.subscribe(onInit);
  try {
    const app = await build();
    const seen = new Set<string>();
    return { app, routes: routes.filter((r) => !seen.has(`${r.method} ${r.url}`) && seen.add(`${r.method} ${r.url}`)) };
  } finally {
    init.unsubscribe(onInit);
  }
}

/** A JSON number written verbatim (1e400, -0, 1.0000000001), which JSON.stringify cannot produce. */
class RawNumber {
  constructor(readonly text: string) {}
}

export const HOSTILE_STRINGS = [
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\udbff\udbff',
  '0000-01-01T00:00:00Z',
  '0000-12-31',
  '0001-01-01T00:00:00+14:00',
  '9999-12-31T23:59:59-14:00',
  '10000-01-01T00:00:00Z',
  '-infinity',
  'infinity',
  'epoch',
  'allballs',
  'NaN',
  '1e400',
  '-1e400',
  '0000-01-01T00:00:00Z_00000000-0000-4000-8000-000000000000',
  "'; DROP TABLE products; --",
  '" OR 1=1 --',
  '%00',
  '../../etc/passwd',
  '',
  ' ',
  'x'.repeat(5000),
  '\u202e\u200b',
  '😀',
  'null',
  'true',
  '{}',
  '[]',
  'http://[::ffff:7f00:1]/',
  'https://[64:ff9b::a00:1]/x',
  'sku,stock\nA,1e400\n',
  'sku,stock\nA\u0000,1\n',
];
export const HOSTILE_NUMBERS = [
  '1e400',
  '-1e400',
  '1e308',
  '-0',
  '0.001',
  '1.0000000001',
  '12.345',
  '999999999999.99',
  '999999999999.995',
  '1000000000000',
  '9007199254740993',
  '2147483648',
  '-2147483649',
  '1e-7',
  '5e-324',
  '1E2',
  '0',
];

/** The classes that reached PostgreSQL, weighted up among the hostile values. */
const CORE_STRINGS = [
  '\u0000',
  'a\u0000b',
  'x\udfffy',
  '0000-01-01T00:00:00Z',
  '0000-01-01T00:00:00Z_00000000-0000-4000-8000-000000000000',
  '9999-12-31T23:59:59-14:00',
  '1e400',
];
const CORE_NUMBERS = ['1e400', '-1e400', '1.0000000001', '999999999999.99'];

const hostileString = fc.oneof(fc.constantFrom(...CORE_STRINGS), fc.constantFrom(...HOSTILE_STRINGS));
const hostileNumber = fc.oneof(fc.constantFrom(...CORE_NUMBERS), fc.constantFrom(...HOSTILE_NUMBERS)).map((text) => new RawNumber(text));
const anyHostile = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 4, arbitrary: hostileNumber },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, true, {}, []) },
);

/** A hostile value of the kind `schema` expects (numbers for numbers, text for text), or any. */
function hostileFor(schema: Schema | undefined): fc.Arbitrary<unknown> {
  const type = schema && (Array.isArray(schema.type) ? schema.type[0] : schema.type);
  if (type === 'number' || type === 'integer') return fc.oneof({ weight: 4, arbitrary: hostileNumber }, { weight: 1, arbitrary: anyHostile });
  if (type === 'string') return fc.oneof({ weight: 4, arbitrary: hostileString }, { weight: 1, arbitrary: anyHostile });
  return anyHostile;
}

const ISO = fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());

function stringFor(schema: Schema, fixtures: FuzzFixtures): fc.Arbitrary<string> {
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as string[]));
  if (schema.const !== undefined) return fc.constant(String(schema.const));
  const max = Math.min(schema.maxLength ?? 40, 60);
  const min = Math.min(schema.minLength ?? 0, max);
  switch (schema.format) {
    case 'uuid':
      return fc.oneof(fc.constantFrom(...fixtures.ids), fc.uuid());
    case 'date-time':
      return ISO;
    case 'email':
      return fc.emailAddress();
    case 'uri':
      return fc.constantFrom('https://example.com/a.png', 'http://93.184.216.34/x');
  }
  if (typeof schema.pattern === 'string' && schema.pattern.startsWith('^[a-z0-9]')) return fc.stringMatching(/^[a-z0-9]{1,10}(-[a-z0-9]{1,10}){0,2}$/);
  if (typeof schema.pattern === 'string' && schema.pattern.startsWith('^https?')) return fc.constantFrom('https://example.com/a.png', 'http://93.184.216.34/x');
  return fc.oneof(
    { weight: 3, arbitrary: fc.string({ minLength: min, maxLength: max }) },
    { weight: 2, arbitrary: fc.string({ minLength: min, maxLength: max, unit: 'binary' }) },
    { weight: 2, arbitrary: ISO },
    { weight: 1, arbitrary: fc.constantFrom(...fixtures.ids) },
  );
}

function numberFor(schema: Schema, integer: boolean): fc.Arbitrary<number | RawNumber> {
  const min = schema.minimum ?? schema.exclusiveMinimum ?? -1e15;
  const max = schema.maximum ?? schema.exclusiveMaximum ?? 1e15;
  if (integer) return fc.integer({ min: Math.max(min, Number.MIN_SAFE_INTEGER), max: Math.min(max, Number.MAX_SAFE_INTEGER) });
  if (schema.multipleOf === 0.01) {
    // Exact amounts in cents, biased to the bounds (where the products overflow).
    return fc.oneof(
      fc.integer({ min: Math.ceil(min * 100), max: Math.floor(max * 100) }).map((c) => c / 100),
      fc.constantFrom(min, max, 0.01, 600_000_000_000),
    );
  }
  return fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
}

/**
 * Values valid for `schema` most of the time; at any depth, with probability ~1/10, a hostile value
 * of the kind the field expects (so it gets past the type check to what lies behind it).
 */
export function valueFor(schema: Schema | undefined, fixtures: FuzzFixtures, depth = 0): fc.Arbitrary<unknown> {
  if (!schema) return anyHostile;
  return fc.oneof({ weight: 9, arbitrary: validValueFor(schema, fixtures, depth) }, { weight: 1, arbitrary: hostileFor(schema) });
}

function validValueFor(schema: Schema, fixtures: FuzzFixtures, depth: number): fc.Arbitrary<unknown> {
  const branches = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  if (branches) return fc.oneof(...branches.map((b) => validValueFor(b, fixtures, depth)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return numberFor(schema, true);
    case 'number':
      return numberFor(schema, false);
    case 'string':
      return stringFor(schema, fixtures);
    case 'array': {
      const items = schema.items as Schema;
      const minLength = schema.minItems ?? 0;
      return fc.array(depth > 3 ? validValueFor(items, fixtures, depth + 1) : valueFor(items, fixtures, depth + 1), {
        minLength,
        maxLength: Math.max(minLength, Math.min(schema.maxItems ?? 3, 3)),
      });
    }
    case 'object':
      return objectFor(schema, fixtures, depth);
    default:
      return anyHostile;
  }
}

function objectFor(schema: Schema, fixtures: FuzzFixtures, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  const required = new Set<string>(schema.required ?? []);
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, property] of Object.entries(properties)) model[name] = valueFor(property, fixtures, depth + 1);
  const record = fc.record(model, { requiredKeys: [...required].filter((k) => k in model) });
  if (schema.patternProperties || (schema.additionalProperties && typeof schema.additionalProperties === 'object')) {
    const valueSchema = (
      schema.additionalProperties && typeof schema.additionalProperties === 'object' ? schema.additionalProperties : Object.values(schema.patternProperties)[0]
    ) as Schema;
    return fc.dictionary(fc.oneof(fc.string({ minLength: 1, maxLength: 10 }), hostileString), valueFor(valueSchema, fixtures, depth + 1), { maxKeys: 3 });
  }
  // Now and then a field no schema knows.
  return fc
    .tuple(record, fc.option(fc.tuple(fc.oneof(fc.constantFrom('hacker', 'id', '__proto__'), hostileString), anyHostile), { freq: 10 }))
    .map(([value, extra]) => (extra ? { ...value, [extra[0]]: extra[1] } : value));
}

/** JSON text of `value`, writing RawNumber tokens verbatim. */
export function toJsonText(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof RawNumber) {
      raws.push(v.text);
      return `\u0001RAW${raws.length - 1}\u0001`;
    }
    return v;
  });
  return (text ?? 'null').replace(/"\\u0001RAW(\d+)\\u0001"/g, (_m, i: string) => raws[Number(i)]!);
}

/** Percent-encodes text for a URL; a lone surrogate becomes the (invalid) UTF-8 bytes a client could send. */
function encode(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return [...text]
      .map((ch) => {
        try {
          return encodeURIComponent(ch);
        } catch {
          const code = ch.charCodeAt(0);
          return [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
        }
      })
      .join('');
  }
}

const textOf = (value: unknown): string => (value instanceof RawNumber ? value.text : typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));

/** Arbitrary requests over `routes`, with the token each part of the API needs. */
export function requestArbitrary(routes: RouteSpec[], fixtures: FuzzFixtures): fc.Arbitrary<GeneratedRequest> {
  return fc.oneof(...routes.map((route) => routeRequest(route, fixtures)));
}

function routeRequest(route: RouteSpec, fixtures: FuzzFixtures): fc.Arbitrary<GeneratedRequest> {
  const paramNames = [...route.url.matchAll(/:(\w+)/g)].map((m) => m[1]!);
  const paramSchemas = (route.params?.properties ?? {}) as Record<string, Schema>;
  const params = fc.tuple(...paramNames.map((name) => valueFor(paramSchemas[name] ?? { type: 'string', format: 'uuid' }, fixtures)));
  const queryProperties = (route.querystring?.properties ?? {}) as Record<string, Schema>;
  const query = fc
    .dictionary(
      fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom(...(Object.keys(queryProperties).length ? Object.keys(queryProperties) : ['limit'])) },
        { weight: 1, arbitrary: fc.constantFrom('colour', 'token', '__proto__') },
      ),
      fc.constant(undefined),
      { maxKeys: 4 },
    )
    .chain((chosen) => fc.record(Object.fromEntries(Object.keys(chosen).map((name) => [name, valueFor(queryProperties[name], fixtures)]))));
  const csv = route.url.endsWith('/inventory/import');
  const body: fc.Arbitrary<string | undefined> = csv
    ? fc.oneof(
        fc.constantFrom('sku,stock\nT-1,5\n', 'sku,quantity_change,note\nT-1,-1,x\n'),
        hostileString,
        fc.string({ unit: 'binary' }).map((s) => `sku,stock\n${s},1\n`),
      )
    : route.body
      ? fc.oneof(
          { weight: 9, arbitrary: valueFor(route.body, fixtures).map(toJsonText) },
          { weight: 1, arbitrary: fc.constantFrom('{"a":', 'null', '[]', '"x"', '{"price": 1e400}', `${'['.repeat(5000)}${']'.repeat(5000)}`) },
        )
      : fc.constant(undefined);
  return fc.tuple(params, query, body).map(([paramValues, queryValues, payload]) => {
    let path = route.url;
    paramNames.forEach((name, i) => {
      path = path.replace(`:${name}`, encode(textOf(paramValues[i])) || 'x');
    });
    const search = Object.entries(queryValues)
      .map(([k, v]) => `${encode(k)}=${encode(textOf(v))}`)
      .join('&');
    const headers: Record<string, string> = {};
    if (route.url.startsWith('/api/')) headers.authorization = `Bearer ${fixtures.readToken}`;
    if (route.url.startsWith('/admin/api/')) headers.authorization = `Bearer ${fixtures.adminToken}`;
    if (payload !== undefined) headers['content-type'] = csv ? 'text/csv' : 'application/json';
    return { method: route.method, url: search ? `${path}?${search}` : path, headers, payload };
  });
}

/** What is wrong with a response to generated input, or undefined when it is acceptable. */
export function responseProblem(status: number, contentType: string | undefined, body: string): string | undefined {
  if (status >= 500) return `status ${status}: ${body.slice(0, 300)}`;
  if (status < 400) return undefined;
  if (!String(contentType).startsWith('application/problem+json')) return `status ${status} with content-type ${contentType}`;
  let problem: { status?: number; errors?: { param?: unknown; message?: unknown }[] };
  try {
    problem = JSON.parse(body);
  } catch {
    return `status ${status} with a body that is not JSON`;
  }
  if (problem.status !== status) return `problem status ${problem.status} on a ${status} response`;
  if (status === 400 && !(problem.errors?.length && problem.errors.every((e) => typeof e.param === 'string' && e.param && typeof e.message === 'string'))) {
    return `400 without errors naming the field: ${body.slice(0, 300)}`;
  }
  return undefined;
}
