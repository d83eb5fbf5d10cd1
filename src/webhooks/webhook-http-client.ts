/**
 * Sends one signed webhook POST and tells what happened; never throws for anything the receiver
 * does. Connections are pooled and kept alive per origin (one undici Agent per worker), every
 * connection goes through the private-address guard, and the whole exchange, response body
 * included, must finish within the timeout: a receiver that hangs, trickles, resets, redirects,
 * answers non-2xx or sends more than MAX_RESPONSE_BYTES is a failed attempt, never a stuck worker.
 */
import { Agent, request, errors as undiciErrors } from 'undici';
import { isIP } from 'node:net';
import { guardedLookup, isPrivateAddress } from './webhook-url-policy.ts';
import { parseRetryAfter } from './retry-policy.ts';

/** A response body longer than this (64 KiB) fails the attempt: an acknowledgement is small. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** Characters of the response body kept with the attempt (2 kB). */
export const RESPONSE_EXCERPT_CHARS = 2048;

export const ATTEMPT_OUTCOMES = ['success', 'http_error', 'timeout', 'connection_error', 'response_too_large', 'blocked_address', 'abandoned'] as const;
/** How an attempt ended; `abandoned`: the worker that made it stopped before recording it (lease expired). */
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

export interface HttpAttemptResult {
  readonly outcome: AttemptOutcome;
  readonly statusCode: number | null;
  readonly responseExcerpt: string | null;
  readonly error: string | null;
  /** The receiver's Retry-After, in ms, when it sent one. */
  readonly retryAfterMs: number | null;
  readonly durationMs: number;
}

export interface WebhookHttpClientOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  /** Connections kept per origin (match the per-endpoint concurrency). */
  connectionsPerOrigin: number;
  now?: () => number;
}

export class WebhookHttpClient {
  readonly #agent: Agent;
  readonly #options: WebhookHttpClientOptions;
  readonly #now: () => number;

  constructor(options: WebhookHttpClientOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#agent = new Agent({
      connections: options.connectionsPerOrigin,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 120_000,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: { timeout: options.timeoutMs, lookup: guardedLookup(options.allowPrivate) },
    });
  }

  /** POSTs `body` to `url` with `headers` (plus Content-Type and User-Agent). */
  async post(url: string, body: string, headers: Record<string, string>): Promise<HttpAttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const failed = (outcome: AttemptOutcome, error: string, statusCode: number | null = null, responseExcerpt: string | null = null): HttpAttemptResult => ({
      outcome,
      statusCode,
      responseExcerpt,
      error,
      retryAfterMs: null,
      durationMs: elapsed(),
    });

    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    // Literal IPs never reach the lookup guard.
    if (!this.#options.allowPrivate && isIP(host) && isPrivateAddress(host)) {
      return failed('blocked_address', `refused: ${host} is a private address`);
    }
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new TimeoutError()), this.#options.timeoutMs);
    try {
      const response = await request(url, {
        method: 'POST',
        dispatcher: this.#agent,
        signal: controller.signal,
        headers: { 'content-type': 'application/json', 'user-agent': 'store-api-webhooks/1', ...headers },
        body,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      let tooLarge = false;
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_RESPONSE_BYTES) {
          tooLarge = true;
          response.body.destroy();
          break;
        }
        chunks.push(chunk as Buffer);
      }
      const excerpt = excerptOf(Buffer.concat(chunks));
      const statusCode = response.statusCode;
      if (tooLarge) return failed('response_too_large', `response body over ${MAX_RESPONSE_BYTES} bytes`, statusCode, excerpt);
      if (statusCode >= 200 && statusCode < 300) {
        return { outcome: 'success', statusCode, responseExcerpt: excerpt, error: null, retryAfterMs: null, durationMs: elapsed() };
      }
      return {
        outcome: 'http_error',
        statusCode,
        responseExcerpt: excerpt,
        error: `HTTP ${statusCode}`,
        retryAfterMs: parseRetryAfter(response.headers['retry-after'], this.#now()) ?? null,
        durationMs: elapsed(),
      };
    } catch (error) {
      return classify(error, controller.signal, this.#options.timeoutMs, elapsed());
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes pooled connections (waits for none: call after in-flight attempts finished). */
  async close(): Promise<void> {
    await this.#agent.close();
  }
}

class TimeoutError extends Error {
  constructor() {
    super('timeout');
    this.name = 'TimeoutError';
  }
}

function excerptOf(buffer: Buffer): string | null {
  if (buffer.length === 0) return null;
  const text = buffer.subarray(0, RESPONSE_EXCERPT_CHARS * 4).toString('utf8');
  return text.length > RESPONSE_EXCERPT_CHARS ? text.slice(0, RESPONSE_EXCERPT_CHARS) : text;
}

function classify(error: unknown, signal: AbortSignal, timeoutMs: number, durationMs: number): HttpAttemptResult {
  const base = { statusCode: null, responseExcerpt: null, retryAfterMs: null, durationMs };
  if (
    signal.aborted ||
    error instanceof undiciErrors.HeadersTimeoutError ||
    error instanceof undiciErrors.BodyTimeoutError ||
    error instanceof undiciErrors.ConnectTimeoutError
  ) {
    return { ...base, outcome: 'timeout', error: `no complete response within ${timeoutMs} ms` };
  }
  const err = error as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
  const code = err.code ?? err.cause?.code;
  if (code === 'EWEBHOOKPRIVATE' || err.cause?.code === 'EWEBHOOKPRIVATE') {
    return { ...base, outcome: 'blocked_address', error: (err.cause ?? err).message };
  }
  const message = [code, err.message].filter(Boolean).join(': ');
  return { ...base, outcome: 'connection_error', error: message.slice(0, 500) || 'connection error' };
}
