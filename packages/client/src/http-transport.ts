/**
 * Requests carried out under the retry policy (retry-policy.ts) and the client's timeouts, and the
 * one-line StoreApiError of every way a request can fail.
 */
import { decideRetry, type RetrySettings } from './retry-policy.ts';
import { StoreApiError } from './store-api.error.ts';
import { responseMetadata, type ResponseMetadata } from './response-metadata.ts';
import type { Problem, ProblemCode } from './resource-types.ts';

/** Why a request is about to be retried, for logging (`onRetry`). */
export interface RetryInfo {
  /** 1 for the first retry. */
  attempt: number;
  /** How long the client waits before it, in milliseconds. */
  delayMs: number;
  /** HTTP status that caused it (429, 5xx), or undefined for a network error. */
  status: number | undefined;
  /** The network error or the error the status would have been. */
  error: StoreApiError;
}

/** Retry settings and the hook called before each retry. */
export interface RetryPolicy extends RetrySettings {
  onRetry?: (info: RetryInfo) => void;
}

function causeCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current && typeof current === 'object'; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * The client's own clock on one attempt: armed for timeoutMs until the answer's headers (and, for a
 * JSON body, the body) arrive, then, for a streamed export, re-armed for idleTimeoutMs at each line.
 * When it fires it aborts the attempt's fetch; `fired` says the abort was a timeout.
 */
export class AttemptTimer {
  readonly #controller = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The limit that fired (ms) and what it limited, once it has. */
  fired: { ms: number; what: 'answer' | 'idle' } | undefined;
  /** Aborts on the caller's signal or on this timer. */
  readonly signal: AbortSignal;

  constructor(callerSignal?: AbortSignal) {
    this.signal = callerSignal ? AbortSignal.any([callerSignal, this.#controller.signal]) : this.#controller.signal;
  }

  /** (Re)starts the clock: `ms` from now the attempt is aborted (0 = no limit). */
  arm(ms: number, what: 'answer' | 'idle'): void {
    this.clear();
    if (ms <= 0) return;
    this.#timer = setTimeout(() => {
      this.fired = { ms, what };
      this.#controller.abort(new DOMException(`No answer within ${ms} ms`, 'TimeoutError'));
    }, ms);
  }

  clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/** The typed error of a timeout of `timer` on `request`. */
export function timeoutError(timer: AttemptTimer, url: URL, method: string, cause: unknown): StoreApiError {
  const request = `${method} ${url.pathname}${url.search}`;
  const { ms, what } = timer.fired!;
  const message =
    what === 'idle'
      ? `The Store API at ${url.origin} stopped sending the export for ${ms} ms (idleTimeoutMs) on ${request}: the service or the network is hung`
      : `No answer from the Store API at ${url.origin} within ${ms} ms (timeoutMs) on ${request}: the service is hung or overloaded, or the base URL points at something that never answers`;
  return new StoreApiError(message, { code: 'timeout', request, cause });
}

/** The one-line StoreApiError for a failed fetch (no answer at all). */
export function networkError(error: unknown, url: URL, signal?: AbortSignal, method = 'GET', timer?: AttemptTimer): StoreApiError {
  const request = `${method} ${url.pathname}${url.search}`;
  if (timer?.fired) return timeoutError(timer, url, method, error);
  // Whatever fetch threw once the caller's signal fired (AbortError, a TimeoutError, its reason) is an abort.
  if (signal?.aborted) return new StoreApiError(`Request aborted: ${request}`, { code: 'aborted', request, cause: error });
  const code = causeCode(error);
  const lost = code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE' || code === 'UND_ERR_CLOSED';
  const at = lost ? `Lost the connection to the Store API at ${url.origin}` : `Cannot reach the Store API at ${url.origin}`;
  const reason =
    code === 'ENOTFOUND'
      ? `host "${url.hostname}" not found (ENOTFOUND); check the base URL`
      : code === 'ECONNREFUSED'
        ? 'connection refused (ECONNREFUSED); check the base URL and that the service is running'
        : lost
          ? `it closed before the answer was complete (${code})`
          : code?.includes('TIMEOUT') || code === 'ETIMEDOUT'
            ? `no answer in time (${code})`
            : code?.startsWith('ERR_TLS') || code?.includes('CERT')
              ? `TLS failed (${code}); check the base URL's scheme and certificate`
              : `${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}${code ? ` (${code})` : ''}`;
  return new StoreApiError(`${at}: ${reason}`, { code: 'network_error', request, cause: error });
}

/** The error code of a failed fetch (from its cause chain), e.g. ECONNREFUSED. */
export function networkCode(error: StoreApiError): string | undefined {
  return causeCode(error.cause);
}

/** The StoreApiError for a non-2xx answer, reading its problem+json body; `lastResponse` is its metadata. */
export async function errorFromResponse(response: Response, url: URL, lastResponse: ResponseMetadata): Promise<StoreApiError> {
  const { request, requestId } = lastResponse;
  const type = response.headers.get('content-type') ?? '';
  const text = await response.text().catch(() => '');
  let problem: Problem | undefined;
  if (/json/i.test(type)) {
    try {
      const body = JSON.parse(text) as Problem;
      if (body && typeof body === 'object' && typeof body.code === 'string' && typeof body.title === 'string') problem = body;
    } catch {
      /* not JSON after all: treated as not the Store API below */
    }
  }
  if (!problem) {
    if (response.status >= 500) {
      return new StoreApiError(`The Store API at ${url.origin} failed: HTTP ${response.status} on ${request}`, {
        status: response.status,
        code: 'server_error',
        request,
        requestId,
        lastResponse,
      });
    }
    return new StoreApiError(
      `${url.origin} did not answer like the Store Integration API (HTTP ${response.status}${type ? `, ${type.split(';')[0]}` : ''} on ${request}); check the base URL`,
      { status: response.status, code: 'not_store_api', request, requestId, lastResponse },
    );
  }
  const detail = problem.detail ?? problem.title;
  const params = problem.errors?.length ? ` [${problem.errors.map((e) => `${e.param}: ${e.message}`).join('; ')}]` : '';
  const message =
    response.status === 401
      ? `The Store API rejected the token (401 ${problem.code}): ${detail}`
      : response.status === 403
        ? `The token lacks the scope for ${request} (403 ${problem.code}): ${detail}`
        : `${response.status} ${problem.title} on ${request}: ${detail}${params}`;
  return new StoreApiError(message, { status: response.status, code: problem.code as ProblemCode, problem, request, requestId, lastResponse });
}

/** Waits `ms`, or rejects when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** One request of the client. */
export interface RequestSpec {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  url: URL;
  headers: Record<string, string>;
  /** JSON text of the body. */
  body?: string;
  /** Safe to repeat: a GET, or a POST with an Idempotency-Key. */
  idempotent: boolean;
  /** Limit until the answer's headers arrive (ms, 0 = none). */
  timeoutMs: number;
}

/** A 2xx answer, body unread, and the timer still running on it (clear it, or re-arm it per line). */
export interface Answer {
  response: Response;
  timer: AttemptTimer;
  /** The answer's metadata (status, request id, rate limit, attempts …). */
  lastResponse: ResponseMetadata;
}

/**
 * Sends `spec` until it answers 2xx, retrying per `policy`; throws the StoreApiError of the last
 * failure. The answer's timer keeps running (timeoutMs) until the caller clears or re-arms it.
 */
export async function requestWithRetries(fetchImpl: typeof fetch, spec: RequestSpec, policy: RetryPolicy, signal?: AbortSignal): Promise<Answer> {
  const { method, url, headers, body, idempotent } = spec;
  const request = `${method} ${url.pathname}${url.search}`;
  const idempotencyKey = headers['idempotency-key'];
  for (let attempt = 1; ; attempt++) {
    let error: StoreApiError;
    let decision;
    const timer = new AttemptTimer(signal);
    timer.arm(spec.timeoutMs, 'answer');
    try {
      const response = await fetchImpl(url, { method, headers, body, signal: timer.signal });
      const lastResponse = responseMetadata(response, request, { attempts: attempt, idempotencyKey });
      if (response.ok) return { response, timer, lastResponse };
      error = await errorFromResponse(response, url, lastResponse);
      timer.clear();
      decision = decideRetry({ kind: 'status', status: response.status, retryAfter: response.headers.get('retry-after'), code: error.code }, attempt, policy, {
        idempotent,
      });
    } catch (cause) {
      timer.clear();
      if (cause instanceof StoreApiError) throw cause;
      error = networkError(cause, url, signal, method, timer);
      if (error.code === 'aborted') throw error;
      decision =
        error.code === 'timeout'
          ? decideRetry({ kind: 'timeout' }, attempt, policy, { idempotent })
          : decideRetry({ kind: 'network', code: networkCode(error) }, attempt, policy, { idempotent });
    }
    if (!decision.retry) throw error;
    policy.onRetry?.({ attempt, delayMs: decision.delayMs, status: error.status, error });
    await sleep(decision.delayMs, signal).catch((reason) => {
      throw networkError(reason, url, signal, method);
    });
  }
}
