/**
 * The contract check: every response the test suite gets from a test app (inject or real HTTP) is
 * checked against the OpenAPI document that app serves. `attachContractCheck(app)` adds one root
 * onSend hook (before `ready`, so it reaches every route); `buildTestApp` attaches it and its
 * `close()` fails the test file on any violation, so the whole suite is the contract test.
 *
 * For a documented operation (the route's path and method are in the document's `paths`) it checks:
 *  - a request the server accepted (any status below 400) carried the credentials one of the
 *    operation's security requirements names, as a validating proxy in front of the service checks
 *    them: a bearer token, the dashboard's session cookie, the CSRF header… (a dashboard request
 *    made with its cookie to an operation that lists only bearerAuth would be refused there);
 *  - the status is declared (exactly, or by a `2XX`-style range, or `default`);
 *  - the media type sent is one the response declares (when it declares content);
 *  - every header the response declares and sends matches its schema (integers and enums included);
 *  - the body matches the declared schema (Ajv, JSON Schema 2020-12, formats): JSON bodies whole,
 *    NDJSON bodies line by line against `x-ndjson-line-schema`.
 * Streamed NDJSON answers are checked line by line as they pass (the first 20,000 lines of each);
 * compressed bodies are not read (their status, type and headers are still checked).
 * Routes the document hides (the dashboard, /docs, the document itself) and HEAD are not checked.
 */
import { Readable, Transform, pipeline } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

type Json = Record<string, any>;
type Validator = ReturnType<Ajv2020['compile']>;

/** What the check found on one app. */
export interface ContractCheck {
  /** One line per violation: `METHOD path status: what`. */
  readonly violations: string[];
  /** How many responses were checked against a documented operation. */
  readonly checked: () => number;
}

/** OpenAPI path of a Fastify route url: `/products/:id` → `/products/{id}`. */
export const openApiPath = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

const escapePointer = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');

/** The response object declared for `status`: exact, then a range (`4XX`), then `default`. */
function declaredResponse(responses: Json, status: number): Json | undefined {
  return responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
}

class DocumentChecker {
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, Validator>();

  constructor(private readonly doc: Json) {
    this.ajv = addFormats(new Ajv2020({ allErrors: true, strict: false, validateFormats: true }));
    // The components alone form the root every `#/components/...` reference resolves against.
    this.ajv.addSchema({ $id: 'openapi.json', components: doc.components ?? {} });
  }

  private resolve(node: Json | undefined): Json | undefined {
    let current = node;
    for (let i = 0; current?.$ref && i < 5; i++) {
      const match = /^#\/components\/(\w+)\/(.+)$/.exec(current.$ref as string);
      current = match ? this.doc.components?.[match[1]!]?.[match[2]!] : undefined;
    }
    return current;
  }

  private validator(key: string, schema: Json): Validator {
    let validate = this.validators.get(key);
    if (!validate) {
      // References inside point at the document's components: resolve them against openapi.json.
      const rebased = JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, '"openapi.json#/components/'));
      validate = this.ajv.compile(rebased);
      this.validators.set(key, validate);
    }
    return validate;
  }

  /** Checks one line of an NDJSON answer against `x-ndjson-line-schema` (undefined: not NDJSON). */
  lineChecker(method: string, path: string, status: number): ((line: string, n: number) => string | undefined) | undefined {
    const response = this.resolve(declaredResponse(this.operation(method, path)?.responses ?? {}, status));
    const line = response?.content?.['application/x-ndjson']?.['x-ndjson-line-schema'] as Json | undefined;
    if (!line) return undefined;
    const where = `${method.toUpperCase()} ${path} ${status}`;
    const validate = this.validator(`${where} NDJSON line`, line);
    return (text, n) => {
      let record: unknown;
      try {
        record = JSON.parse(text);
      } catch {
        return `${where}: NDJSON line ${n} is not JSON: ${text.slice(0, 200)}`;
      }
      return validate(record) ? undefined : `${where}: NDJSON line ${n}: ${this.ajv.errorsText(validate.errors)}`;
    };
  }

  operation(method: string, path: string): Json | undefined {
    return this.doc.paths?.[path]?.[method];
  }

  /** Whether `request` presents what the security scheme `name` says (its value is the server's to judge). */
  private presents(name: string, request: FastifyRequest): boolean {
    const scheme = this.doc.components?.securitySchemes?.[name] as Json | undefined;
    if (scheme?.type === 'http' && String(scheme.scheme).toLowerCase() === 'bearer') return /^Bearer[ ]+\S/i.test(request.headers.authorization ?? '');
    if (scheme?.type !== 'apiKey') return false;
    const key = String(scheme.name);
    if (scheme.in === 'header') return !!request.headers[key.toLowerCase()];
    if (scheme.in === 'query') return (request.query as Record<string, unknown> | undefined)?.[key] !== undefined;
    if (scheme.in === 'cookie')
      return String(request.headers.cookie ?? '')
        .split(';')
        .some((pair) => pair.trim().startsWith(`${key}=`) && pair.trim().length > key.length + 1);
    return false;
  }

  /** A violation when the server accepted a request whose credentials no security requirement of the operation allows. */
  checkCredentials(method: string, path: string, status: number, request: FastifyRequest): string | undefined {
    const operation = this.operation(method, path);
    if (!operation || status >= 400) return undefined;
    const security = (operation.security ?? this.doc.security ?? []) as Json[];
    if (security.length === 0 || security.some((requirement) => Object.keys(requirement).every((name) => this.presents(name, request)))) return undefined;
    const schemes = Object.keys(this.doc.components?.securitySchemes ?? {});
    const sent = schemes.filter((name) => this.presents(name, request));
    return `${method.toUpperCase()} ${path} ${status}: accepted with ${sent.length > 0 ? sent.join(' + ') : 'no credential'}, which no security requirement of the document allows (${security.map((r) => Object.keys(r).join(' + ')).join(' | ')}): a validating proxy would refuse it`;
  }

  /** Violations of one response (empty when it keeps the contract). */
  check(method: string, path: string, status: number, headers: Record<string, unknown>, payload: unknown): string[] {
    const operation = this.operation(method, path);
    if (!operation) return [];
    const where = `${method.toUpperCase()} ${path} ${status}`;
    const response = this.resolve(declaredResponse(operation.responses ?? {}, status));
    if (!response) return [`${where}: status not declared (declared: ${Object.keys(operation.responses ?? {}).join(', ')})`];
    const violations: string[] = [];

    for (const [name, declared] of Object.entries((response.headers ?? {}) as Json)) {
      const header = this.resolve(declared);
      const value = headers[name.toLowerCase()];
      if (value === undefined) {
        if (header?.required) violations.push(`${where}: required header ${name} missing`);
        continue;
      }
      if (!header?.schema) continue;
      const schema = this.resolve(header.schema) ?? {};
      const text = String(value);
      const typed = schema.type === 'integer' || schema.type === 'number' ? (/^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text) : text;
      const validate = this.validator(`header ${where} ${name}`, schema);
      if (!validate(typed)) violations.push(`${where}: header ${name}: ${JSON.stringify(text)} ${this.ajv.errorsText(validate.errors)}`);
    }

    const content = response.content as Json | undefined;
    const sentType = String(headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    if (!content) {
      // No content declared: nothing may be sent but an empty body.
      if (typeof payload === 'string' && payload.length > 0 && status !== 304)
        violations.push(`${where}: body sent (${sentType || 'no type'}) but none declared`);
      return violations;
    }
    if (!sentType) return violations;
    const media = content[sentType];
    if (!media) return [...violations, `${where}: content type ${sentType} not declared (declared: ${Object.keys(content).join(', ')})`];
    if (sentType === 'application/x-ndjson' && !media['x-ndjson-line-schema']) return [...violations, `${where}: NDJSON without x-ndjson-line-schema`];
    if (headers['content-encoding'] || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) return violations;
    const text = payload.toString();
    const pointer = `#/paths/${escapePointer(path)}/${method}/responses/${status}/content/${escapePointer(sentType)}`;
    if (sentType === 'application/x-ndjson') {
      const checkLine = this.lineChecker(method, path, status)!;
      for (const [i, record] of text.split('\n').entries()) {
        const problem = record === '' ? undefined : checkLine(record, i + 1);
        if (problem) {
          violations.push(problem);
          break;
        }
      }
      return violations;
    }
    if (!media.schema || !/json$/.test(sentType)) return violations;
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return [...violations, `${where}: body is not JSON`];
    }
    const validate = this.validator(pointer, media.schema);
    if (!validate(body)) violations.push(`${where}: body ${this.ajv.errorsText(validate.errors)} — ${text.slice(0, 300)}`);
    return violations;
  }
}

/** Most lines of one streamed answer checked (the rest pass unchecked): a bound on the cost for the large-store tests. */
const MAX_STREAMED_LINES = 20_000;

/** `source` passed through unchanged, each complete line checked by `checkLine` (first violation recorded). */
function checkedLines(source: Readable, checkLine: (line: string, n: number) => string | undefined, violations: string[]): Readable {
  const decoder = new StringDecoder('utf8');
  let rest = '';
  let n = 0;
  let failed = false;
  const take = (text: string, final: boolean) => {
    if (failed || n >= MAX_STREAMED_LINES) return;
    const lines = (rest + text).split('\n');
    rest = final ? '' : lines.pop()!;
    for (const line of lines) {
      if (line === '' || n >= MAX_STREAMED_LINES) continue;
      const problem = checkLine(line, ++n);
      if (problem) {
        violations.push(problem);
        failed = true;
        return;
      }
    }
  };
  const through = new Transform({
    transform(chunk: Buffer | string, _encoding, done) {
      take(typeof chunk === 'string' ? chunk : decoder.write(chunk), false);
      done(null, chunk);
    },
    flush(done) {
      take(decoder.end(), true);
      done();
    },
  });
  // A client gone (the answer destroyed) ends the source too, as it would without the check.
  pipeline(source, through, () => {});
  return through;
}

/** Checks every response of `app` against its own OpenAPI document (call before `app.ready()`). */
export function attachContractCheck(app: FastifyInstance): ContractCheck {
  const violations: string[] = [];
  let checked = 0;
  let checker: DocumentChecker | undefined;
  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const url = request.routeOptions.url;
    if (!url || request.method === 'HEAD') return payload;
    checker ??= new DocumentChecker(JSON.parse(JSON.stringify(app.swagger())) as Json);
    const path = openApiPath(url);
    const method = request.method.toLowerCase();
    if (!checker.operation(method, path)) return payload;
    checked++;
    try {
      const credentials = checker.checkCredentials(method, path, reply.statusCode, request);
      if (credentials) violations.push(credentials);
      violations.push(...checker.check(method, path, reply.statusCode, reply.getHeaders(), payload));
    } catch (error) {
      violations.push(`${request.method} ${path} ${reply.statusCode}: the check failed: ${(error as Error).message}`);
    }
    // A streamed NDJSON answer: its lines are checked as they pass, unchanged and with backpressure.
    const checkLine = checker.lineChecker(method, path, reply.statusCode);
    if (checkLine && payload instanceof Readable && !reply.getHeader('content-encoding')) return checkedLines(payload, checkLine, violations);
    return payload;
  });
  return { violations, checked: () => checked };
}
