/**
 * Turns every error into RFC 9457 problem+json: schema validation failures name the parameter,
 * framework errors keep their 4xx status, a database that cannot be reached is a 503 with
 * Retry-After, anything unexpected is a 500 whose body says nothing internal (the log has the detail).
 */
import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError, errorCodes, problemBody, type ErrorCode, type ParamError } from '../../shared/problem.ts';
import { DATABASE_RETRY_AFTER_SECONDS, databaseUnavailable, isDatabaseUnavailable } from '../../shared/db-errors.ts';
import { isOutOfSpace, StoreFailedError } from '../../db/storage-health.ts';
import { onRequestTimeout } from './client-timeouts.ts';

/** Sends a problem+json response. */
export function sendProblem(reply: FastifyReply, code: ErrorCode, detail: string, errors?: ParamError[], headers?: Record<string, string>) {
  const body = problemBody(code, detail, errors);
  if (headers) reply.headers(headers);
  return reply.code(body.status).type('application/problem+json').send(JSON.stringify(body));
}

interface AjvError {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
  /** Set by Ajv on the errors of a `propertyNames` schema: the name that failed it. */
  propertyName?: string;
}

function paramErrors(context: string | undefined, validation: AjvError[]): ParamError[] {
  // A bad name yields two errors: the bound it broke (with `propertyName`) and `propertyNames`'
  // summary ("property name must be valid"); the first says what was wrong, the second nothing more.
  const named = validation.some((v) => v.propertyName !== undefined && v.keyword !== 'propertyNames');
  const errors = named ? validation.filter((v) => v.keyword !== 'propertyNames') : validation;
  return errors.map((v) => {
    let path = v.instancePath.replace(/^\//, '').replace(/\//g, '.');
    let message = v.message ?? 'is invalid';
    if (v.keyword === 'additionalProperties') {
      path = [path, String(v.params.additionalProperty)].filter(Boolean).join('.');
      message = context === 'querystring' ? 'unknown query parameter' : 'unknown property';
    } else if (v.keyword === 'required') {
      path = [path, String(v.params.missingProperty)].filter(Boolean).join('.');
      message = 'is required';
    } else if (v.propertyName !== undefined) {
      const name = v.propertyName.length > 40 ? `${v.propertyName.slice(0, 40)}…` : v.propertyName;
      message = v.keyword === 'propertyNames' ? `has an invalid key "${name}"` : `key "${name}" ${message}`;
    } else if (v.keyword === 'enum' || v.keyword === 'anyOf') {
      const allowed = (v.params.allowedValues as unknown[] | undefined)?.join(', ');
      if (allowed) message = `must be one of: ${allowed}`;
    }
    const param = context === 'body' ? (path ? `body.${path}` : 'body') : path || context || 'request';
    return { param, message };
  });
}

/** Fastify error codes that are the client's fault, with our code for them. */
const frameworkCodes: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_parameter',
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_parameter',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_parameter',
  FST_ERR_BAD_URL: 'invalid_parameter',
  FST_ERR_ASYNC_CONSTRAINT: 'invalid_parameter',
};

function codeForStatus(status: number): ErrorCode {
  const match = (Object.keys(errorCodes) as ErrorCode[]).find((c) => errorCodes[c].status === status);
  return match ?? (status >= 500 ? 'internal_error' : 'invalid_parameter');
}

/**
 * Errors the router raises before any route runs (undecodable URL, a path parameter over
 * maxParamLength): passed to Fastify as `frameworkErrors` so they are problem+json too.
 */
export function frameworkErrorHandler(error: FastifyError, _request: unknown, reply: FastifyReply) {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return sendProblem(reply, 'uri_too_long', 'A path parameter is longer than 200 characters.', [{ param: 'path', message: 'is too long' }]);
  }
  return sendProblem(reply, 'invalid_parameter', 'The URL could not be decoded.', [{ param: 'url', message: error.message }]);
}

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (a malformed request line or header,
 * headers over the size limit, a request that took too long to arrive): passed to Fastify as
 * `clientErrorHandler`, so they are answered problem+json too, then the connection is destroyed
 * (the parser cannot continue on it).
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has nobody to answer; a socket that already sent a response must not get another.
  if (error.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  // Late by the server's clock only (this thread was busy, or has not read the body): no 408.
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT' && !(error as { measured?: boolean }).measured) {
    onRequestTimeout(socket, () => clientErrorHandler(Object.assign(error, { measured: true }), socket));
    return;
  }
  const [code, detail, param, message]: [ErrorCode, string, string, string] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? ['header_fields_too_large', 'The request headers are larger than the server accepts (16 KiB in all).', 'headers', 'are too large']
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ['request_timeout', 'The request (its head or its body) did not arrive in time.', 'request', 'did not arrive in time']
        : ['malformed_request', 'The request is not a well-formed HTTP/1.1 request.', 'request', 'is not well-formed'];
  const body = JSON.stringify(problemBody(code, detail, [{ param, message }]));
  const status = errorCodes[code].status;
  // A response to HEAD has no body (RFC 9110 §9.3.2): a client would read one as garbage after it.
  const head =
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/problem+json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  // Destroyed once the answer is written, not half-closed: a client that never reads nor closes
  // would otherwise keep the descriptor. If the answer cannot even be written (the
  // client reads nothing and the buffers are full), the socket goes after a second anyway.
  socket.end(requestMethod(error as { rawPacket?: unknown }, socket) === 'HEAD' ? head : head + body, () => socket.destroy());
  socket.setTimeout(1000, () => socket.destroy());
}

/** The method of the request the parser refused, when it got that far. */
function requestMethod(error: { rawPacket?: unknown }, socket: Socket): string | undefined {
  const incoming = (socket as Socket & { parser?: { incoming?: { method?: string } } }).parser?.incoming;
  if (incoming?.method) return incoming.method;
  const packet = error.rawPacket;
  if (!Buffer.isBuffer(packet)) return undefined;
  return /^\s*([A-Z]+) /.exec(packet.subarray(0, 16).toString('latin1'))?.[1];
}

export const errorHandlerPlugin = fp(async function errorHandler(app: FastifyInstance) {
  app.setErrorHandler((error: FastifyError & { validationContext?: string; headers?: Record<string, string> }, request, reply) => {
    if (error instanceof ApiError) {
      return sendProblem(reply, error.code, error.detail, error.errors, error.headers);
    }
    if (error.validation) {
      const errors = paramErrors(error.validationContext, error.validation as AjvError[]);
      const first = errors[0]!;
      return sendProblem(reply, 'invalid_parameter', `Invalid value for '${first.param}': ${first.message}`, errors);
    }
    const frameworkCode = error.code ? frameworkCodes[error.code] : undefined;
    if (frameworkCode === 'payload_too_large') {
      // Named, so a client splitting a large import knows the size to aim under.
      const limit = request.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit ?? 0;
      return sendProblem(reply, frameworkCode, `The request body is larger than the limit of ${limit} bytes (${(limit / 1024 / 1024).toFixed(1)} MiB).`, [
        { param: 'body', message: `is larger than the limit of ${limit} bytes` },
      ]);
    }
    if (frameworkCode) {
      const param = error.code === 'FST_ERR_BAD_URL' ? 'url' : 'body';
      return sendProblem(reply, frameworkCode, error.message, frameworkCode === 'invalid_parameter' ? [{ param, message: error.message }] : undefined);
    }
    if (error instanceof SyntaxError || (error.statusCode && error.statusCode >= 400 && error.statusCode < 500)) {
      const status = error.statusCode ?? 400;
      const code = codeForStatus(status);
      return sendProblem(reply, code, error.message, code === 'invalid_parameter' ? [{ param: 'body', message: error.message }] : undefined, error.headers);
    }
    if (error instanceof StoreFailedError) {
      // The embedded database failed for good (its log could not be written); the process is exiting.
      return sendProblem(reply, 'service_unavailable', error.message, undefined, { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) });
    }
    if (isOutOfSpace(error)) {
      // The disk under the database is full: the write was not made; say so (507) and tell /readyz.
      request.server.ctx.database.storage.noteOutOfSpace(error);
      request.log.error({ err: error }, 'the store cannot write: no space left on the database disk; answered 507');
      return sendProblem(
        reply,
        'insufficient_storage',
        "The store cannot write: no space left on the database's disk. Nothing was written; retry once space has been freed.",
        undefined,
        { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) },
      );
    }
    if (isDatabaseUnavailable(error)) {
      // Not a bug of ours and not the client's: the database is restarting or failing over.
      request.log.warn({ err: error }, 'database unavailable; answered 503');
      const unavailable = databaseUnavailable();
      return sendProblem(reply, unavailable.code, unavailable.detail, undefined, unavailable.headers);
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, 'internal_error', 'The server could not complete the request. It has been logged.');
  });

  // HTTP/1.1 requires Host (RFC 9112 §3.2). Node would answer its absence with an empty 400 of its
  // own; the app is built with `requireHostHeader: false` so the refusal is problem+json here.
  app.addHook('onRequest', async (request) => {
    const raw = request.raw;
    if (raw.httpVersion === '1.1' && raw.headers.host === undefined) {
      throw new ApiError('malformed_request', 'An HTTP/1.1 request must carry a Host header.', [{ param: 'host', message: 'header is required' }]);
    }
  });

  app.setNotFoundHandler((request, reply) => {
    return sendProblem(reply, 'not_found', `No route ${request.method} ${request.url.split('?')[0]!.slice(0, 200)}.`);
  });
});
