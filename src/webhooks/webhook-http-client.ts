/**
 * Sends one signed webhook POST and tells what happened; never throws for anything the receiver
 * does. Connections are kept alive per origin (OriginPools: an undici Client per origin, a Pool
 * once it takes concurrent requests, at most ORIGINS_KEPT origins, the least recently used closed
 * beyond), every
 * connection goes through the private-address guard, and the whole exchange, response body
 * included, must finish within the timeout: a receiver that hangs, trickles, resets, redirects,
 * answers non-2xx or sends more than MAX_RESPONSE_BYTES is a failed attempt, never a stuck worker.
 *
 * Per request it costs no URL parse (origins and paths are cached per endpoint URL), no
 * AbortController and no timer of its own: every attempt has the same timeout, so deadlines fall in
 * the order requests start, and one timer (Deadlines) armed for the earliest unfinished one aborts
 * each request exactly when its own timeout passes (docs/decisions/0015-webhook-delivery-speed.md).
 */
import type { Agent, Client, Pool } from 'undici';
import type { EventEmitter } from 'node:events';
import { isIP } from 'node:net';
import { guardedLookup, isPrivateAddress } from './webhook-url-policy.ts';
import { parseRetryAfter } from './retry-policy.ts';

/** A response body longer than this (64 KiB) fails the attempt: an acknowledgement is small. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** Characters of the response body kept with the attempt (2 kB). */
export const RESPONSE_EXCERPT_CHARS = 2048;

export const ATTEMPT_OUTCOMES = [
  'success',
  'http_error',
  'timeout',
  'connection_error',
  'response_too_large',
  'blocked_address',
  'broker_rejected',
  'credentials_error',
  'abandoned',
] as const;
/**
 * How an attempt ended; `broker_rejected`: a broker refused or dropped the message (no such
 * exchange or stream, nothing bound or subscribed, a negative acknowledgement: decision 0031);
 * `credentials_error`: the endpoint's credentials could not be used (its OAuth token server
 * refused or failed, or they do not open with WEBHOOK_CREDENTIALS_KEY: decision 0058);
 * `abandoned`: the worker that made it stopped before recording it (lease expired).
 */
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

export interface HttpAttemptResult {
  readonly outcome: AttemptOutcome;
  readonly statusCode: number | null;
  readonly responseExcerpt: string | null;
  readonly error: string | null;
  /** The receiver's Retry-After, in ms, when it sent one. */
  readonly retryAfterMs: number | null;
  readonly durationMs: number;
  /** The headers sent, credential values redacted (set by the transport); absent: none recorded. */
  readonly requestHeaders?: Readonly<Record<string, string>> | null;
  /** The headers the receiver answered with, bounded (responseHeadersOf); absent: no answer. */
  readonly responseHeaders?: Readonly<Record<string, string>> | null;
}

export interface WebhookHttpClientOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  /** Connections kept per origin (match the per-endpoint concurrency). */
  connectionsPerOrigin: number;
  /** Origins whose pools (and idle connections) are kept; default ORIGINS_KEPT. */
  originsKept?: number;
  now?: () => number;
}

/** The headers every delivery request carries before its own (the signature's, an endpoint's extra ones). */
export const DELIVERY_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'application/json', 'user-agent': 'store-api-webhooks/1' };

/** Endpoint URLs whose origin and path are kept parsed (more are parsed again, never wrong). */
const TARGETS_KEPT = 1000;

/** What a request needs from an endpoint URL, parsed once. */
interface Target {
  readonly origin: string;
  readonly path: string;
  /** Set when the URL's host is a literal private address and those are refused. */
  readonly refused: string | null;
}

/** A client certificate and key (PEM) for mutual TLS, and an id naming the pair (its pool). */
export interface ClientTls {
  readonly id: string;
  readonly cert: string;
  readonly key: string;
}

/** Pools of distinct client certificates kept (more: the least recently made is closed). */
const CLIENT_TLS_POOLS = 100;

/**
 * Origins whose connections are kept (more: the least recently used is closed, once its
 * requests in flight have finished); WEBHOOK_ORIGINS_KEPT sets it for a worker. An origin's
 * kept-alive socket costs a few KiB, a pool tens: a worker delivering to thousands of stores' receivers, each
 * its own origin, holds at most this many. Fewer than the origins a worker serves in turn costs
 * far more than their memory: the claims go round the stores with due work, so each origin's pool
 * was closed before its next delivery, which then opened a new connection (decision 0071: with 256
 * kept, deliveries spread over 1,000 origins went at half the rate of one).
 */
export const ORIGINS_KEPT = 1024;

/** What serves one origin: an undici Client (one connection) or Pool (several). */
type OriginDispatcher = Client | Pool;

/**
 * What serves each origin, at most `kept` origins, the least recently used closed beyond (a
 * graceful close: its requests in flight finish; the origin's next request makes a new one). An
 * origin starts with an undici Client, one connection, and gets a Pool of `connections` only when
 * a request finds its Client busy (decision 0072): a Pool allocates a 2,048-slot queue (16 KiB) when
 * made, and a worker delivering one at a time to each of a thousand stores' receivers held a
 * thousand of them. An Agent keeps a pool per origin for as long as it has a connection, so a
 * worker that delivered to 10,000 origins within a keep-alive timeout held 10,000 pools.
 */
export class OriginPools {
  readonly #pools = new Map<string, { readonly dispatcher: OriginDispatcher; readonly pooled: boolean }>();
  readonly #make: (origin: string, pooled: boolean) => OriginDispatcher;
  readonly #kept: number;
  readonly #connections: number;

  /** `connections`: per origin at most (1: a Client each, never a Pool). */
  constructor(make: (origin: string, pooled: boolean) => OriginDispatcher, kept: number, connections: number) {
    this.#make = make;
    this.#kept = Math.max(1, kept);
    this.#connections = connections;
  }

  /** Origins held now. */
  get size(): number {
    return this.#pools.size;
  }

  /** Of the origins held, those served by a Pool (the others by a Client). */
  get pooled(): number {
    let n = 0;
    for (const held of this.#pools.values()) if (held.pooled) n++;
    return n;
  }

  /** What serves `origin`, made the most recently used; a busy Client is replaced by a Pool. */
  of(origin: string): OriginDispatcher {
    let held = this.#pools.get(origin);
    if (held && (held.dispatcher.closed || held.dispatcher.destroyed)) held = undefined;
    let made = false;
    if (!held) {
      held = { dispatcher: this.#make(origin, false), pooled: false };
      made = true;
    } else if (!held.pooled && this.#connections > 1 && held.dispatcher.stats.size > 0) {
      // A request while the Client has one in flight or queued: the origin takes concurrent
      // requests, so it gets a Pool; the Client finishes what it holds, then closes.
      held.dispatcher.close().catch(() => {});
      held = { dispatcher: this.#make(origin, true), pooled: true };
      made = true;
    }
    this.#pools.delete(origin);
    this.#pools.set(origin, held);
    while (made && this.#pools.size > this.#kept) {
      const [oldest, evicted] = this.#pools.entries().next().value!;
      this.#pools.delete(oldest);
      evicted.dispatcher.close().catch(() => {});
    }
    return held.dispatcher;
  }

  /** Requests `options` from what serves its origin. */
  request(options: Parameters<Pool['request']>[0] & { origin: string }): ReturnType<Pool['request']> {
    return this.of(options.origin).request(options);
  }

  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((held) => held.dispatcher.close()));
  }
}

export class WebhookHttpClient {
  #agent: OriginPools | undefined;
  /** One pool per client certificate (mutual TLS): a connection's certificate is chosen when it opens. */
  readonly #tlsAgents = new Map<string, Agent>();
  readonly #options: WebhookHttpClientOptions;
  readonly #now: () => number;
  readonly #deadlines: Deadlines;
  readonly #targets = new Map<string, Target>();

  constructor(options: WebhookHttpClientOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#deadlines = new Deadlines(options.timeoutMs);
  }

  /** Whether the pool is made (undici loaded). */
  get loaded(): boolean {
    return this.#agent !== undefined;
  }

  /**
   * Loads undici and makes the pool now, so the first delivery does not wait for it: called when
   * the store has an HTTP endpoint (the worker's start, an endpoint created or changed here).
   * Resolves true once the pool was made by this call, false if it existed or the load failed (the
   * first request then fails the same way and reports it).
   */
  async warm(): Promise<boolean> {
    if (this.#agent) return false;
    try {
      await this.#pool();
      return true;
    } catch {
      return false;
    }
  }

  /** The connection pool, made by `warm` or else at the first request (undici is loaded then: decision 0048). */
  async #pool(): Promise<OriginPools> {
    if (this.#agent) return this.#agent;
    const { Client, Pool } = await loadUndici();
    const options = this.#agentOptions();
    const { connections, ...oneConnection } = options;
    this.#agent ??= new OriginPools(
      (origin, pooled) => (pooled ? new Pool(origin, options) : new Client(origin, oneConnection)),
      this.#options.originsKept ?? ORIGINS_KEPT,
      connections ?? 1,
    );
    return this.#agent;
  }

  #agentOptions(tls?: ClientTls): import('undici').Agent.Options {
    const options = this.#options;
    return {
      connections: options.connectionsPerOrigin,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 120_000,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: { timeout: options.timeoutMs, lookup: guardedLookup(options.allowPrivate), ...(tls && { cert: tls.cert, key: tls.key }) },
    };
  }

  /** The pool whose connections present `tls` (made at its first request). */
  async #tlsPool(tls: ClientTls): Promise<Agent> {
    const found = this.#tlsAgents.get(tls.id);
    if (found) return found;
    const { Agent } = await loadUndici();
    if (this.#tlsAgents.size >= CLIENT_TLS_POOLS) {
      const [oldest, agent] = this.#tlsAgents.entries().next().value!;
      this.#tlsAgents.delete(oldest);
      void agent.close();
    }
    const agent = this.#tlsAgents.get(tls.id) ?? new Agent(this.#agentOptions(tls));
    this.#tlsAgents.set(tls.id, agent);
    return agent;
  }

  /**
   * POSTs a form to an OAuth token server (through the same address guard and timeout as a
   * delivery) and answers its status and body (at most MAX_RESPONSE_BYTES). Throws with a reason
   * for anything else: refused address, connection failure, timeout, an oversized answer.
   */
  async requestToken(url: string, form: string, headers: Record<string, string>): Promise<{ statusCode: number; body: string }> {
    const target = this.#target(url);
    if (target.refused) throw new Error(target.refused);
    const deadline = this.#deadlines.start();
    try {
      const response = await (this.#agent ?? (await this.#pool())).request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        signal: deadline as unknown as EventEmitter,
        headers: { 'user-agent': 'store-api-webhooks/1', ...headers },
        body: form,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_RESPONSE_BYTES) {
          response.body.destroy();
          throw new Error(`answer over ${MAX_RESPONSE_BYTES} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
      return { statusCode: response.statusCode, body: Buffer.concat(chunks).toString('utf8') };
    } catch (error) {
      const classified = classify(error, deadline.expired, this.#options.timeoutMs, 0);
      throw new Error(classified.error ?? 'connection error');
    } finally {
      this.#deadlines.finish(deadline);
    }
  }

  /**
   * POSTs `body` (text, or its UTF-8 bytes: sent as they are) to `url` with `headers` (plus
   * Content-Type and User-Agent); `tls`: the client certificate to present (mutual TLS).
   */
  async post(url: string, body: string | Buffer, headers: Record<string, string>, tls?: ClientTls): Promise<HttpAttemptResult> {
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

    const target = this.#target(url);
    if (target.refused) return failed('blocked_address', target.refused);
    const deadline = this.#deadlines.start();
    try {
      const pool = tls ? await this.#tlsPool(tls) : (this.#agent ?? (await this.#pool()));
      const response = await pool.request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        // The type wants a whole EventEmitter; undici itself uses only on/once/removeListener and reason.
        signal: deadline as unknown as EventEmitter,
        headers: { ...DELIVERY_HEADERS, ...headers },
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
      const responseHeaders = responseHeadersOf(response.headers);
      if (tooLarge) return { ...failed('response_too_large', `response body over ${MAX_RESPONSE_BYTES} bytes`, statusCode, excerpt), responseHeaders };
      if (statusCode >= 200 && statusCode < 300) {
        return { outcome: 'success', statusCode, responseExcerpt: excerpt, error: null, retryAfterMs: null, durationMs: elapsed(), responseHeaders };
      }
      return {
        outcome: 'http_error',
        statusCode,
        responseExcerpt: excerpt,
        error: `HTTP ${statusCode}`,
        retryAfterMs: parseRetryAfter(response.headers['retry-after'], this.#now()) ?? null,
        durationMs: elapsed(),
        responseHeaders,
      };
    } catch (error) {
      return classify(error, deadline.expired, this.#options.timeoutMs, elapsed());
    } finally {
      this.#deadlines.finish(deadline);
    }
  }

  #target(url: string): Target {
    let target = this.#targets.get(url);
    if (!target) {
      const parsed = new URL(url);
      const host = parsed.hostname.replace(/^\[|\]$/g, '');
      // Literal IPs never reach the lookup guard.
      const refused = !this.#options.allowPrivate && isIP(host) && isPrivateAddress(host) ? `refused: ${host} is a private address` : null;
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}`, refused };
      if (this.#targets.size >= TARGETS_KEPT) this.#targets.clear();
      this.#targets.set(url, target);
    }
    return target;
  }

  /** Closes pooled connections (waits for none: call after in-flight attempts finished). */
  async close(): Promise<void> {
    const tlsAgents = [...this.#tlsAgents.values()];
    this.#tlsAgents.clear();
    await Promise.all([this.#agent?.close(), ...tlsAgents.map((agent) => agent.close())]);
  }
}

class TimeoutError extends Error {
  constructor() {
    super('timeout');
    this.name = 'TimeoutError';
  }
}

/**
 * One request's deadline, and the abort signal undici is given for it: undici accepts an
 * EventEmitter-like signal (`on`/`once`/`removeListener`, no `aborted` property) and takes
 * `reason` as the abort's error, so no AbortController (an EventTarget) is made per request.
 */
export class Deadline {
  readonly at: number;
  /** The request finished (its entry can leave the queue). */
  done = false;
  /** The timeout passed before the request finished: it was aborted. */
  expired = false;
  reason: Error | undefined;
  #listener: (() => void) | undefined;

  constructor(at: number) {
    this.at = at;
  }

  on(_event: 'abort', listener: () => void): this {
    return this.once(_event, listener);
  }

  once(_event: 'abort', listener: () => void): this {
    this.#listener = listener;
    return this;
  }

  removeListener(): this {
    this.#listener = undefined;
    return this;
  }

  expire(): void {
    this.expired = true;
    this.reason = new TimeoutError();
    const listener = this.#listener;
    this.#listener = undefined;
    listener?.();
  }
}

/**
 * The deadlines of the requests in flight, in the order they started, which is the order they
 * fall due (one timeout for all, a monotonic clock): finished ones leave from the front at once,
 * and one timer, armed for the earliest unfinished deadline, expires every request whose time is up
 * and re-arms for the next. Exact per request, one timer for all of them.
 */
export class Deadlines {
  readonly #timeoutMs: number;
  readonly #now: () => number;
  #queue: Deadline[] = [];
  #head = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(timeoutMs: number, now: () => number = () => performance.now()) {
    this.#timeoutMs = timeoutMs;
    this.#now = now;
  }

  /** Requests started and not finished (expired ones included until they finish). */
  get size(): number {
    return this.#queue.length - this.#head;
  }

  start(): Deadline {
    const deadline = new Deadline(this.#now() + this.#timeoutMs);
    this.#queue.push(deadline);
    if (this.#timer === undefined) this.#arm(deadline.at);
    return deadline;
  }

  finish(deadline: Deadline): void {
    deadline.done = true;
    this.#dropFinished();
  }

  #dropFinished(): void {
    while (this.#head < this.#queue.length && this.#queue[this.#head]!.done) this.#head++;
    if (this.#head === this.#queue.length) {
      this.#queue = [];
      this.#head = 0;
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = undefined;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
  }

  #arm(at: number): void {
    this.#timer = setTimeout(this.#fire, Math.max(1, Math.ceil(at - this.#now())));
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    const now = this.#now();
    // Expired ones stay queued until their request finishes (the abort ends it at once).
    for (let i = this.#head; i < this.#queue.length; i++) {
      const deadline = this.#queue[i]!;
      if (deadline.at > now) {
        this.#arm(deadline.at);
        break;
      }
      if (!deadline.done && !deadline.expired) deadline.expire();
    }
    this.#dropFinished();
  };
}

/** Most response headers kept with an attempt, and most characters of each value. */
const RESPONSE_HEADERS_KEPT = 40;
const HEADER_VALUE_CHARS = 300;
/** Response headers whose values are kept redacted: a receiver's session cookie is no one's business here. */
const REDACTED_RESPONSE_HEADERS = new Set(['set-cookie', 'authorization', 'proxy-authenticate', 'www-authenticate']);
/** What the attempt records of a value it does not show. */
export const REDACTED = '[redacted]';

/**
 * A receiver's response headers as an attempt keeps them (the dashboard shows what came
 * back): names lower-cased as undici gives them, repeated ones joined with ", ", the first
 * RESPONSE_HEADERS_KEPT names, each value cut at HEADER_VALUE_CHARS, cookies redacted.
 */
export function responseHeadersOf(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const kept: Record<string, string> = {};
  let count = 0;
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (count++ >= RESPONSE_HEADERS_KEPT) break;
    const text = Array.isArray(value) ? value.join(', ') : value;
    kept[name] = REDACTED_RESPONSE_HEADERS.has(name) ? REDACTED : text.length > HEADER_VALUE_CHARS ? `${text.slice(0, HEADER_VALUE_CHARS)}…` : text;
  }
  return kept;
}

function excerptOf(buffer: Buffer): string | null {
  if (buffer.length === 0) return null;
  const text = buffer.subarray(0, RESPONSE_EXCERPT_CHARS * 4).toString('utf8');
  return text.length > RESPONSE_EXCERPT_CHARS ? text.slice(0, RESPONSE_EXCERPT_CHARS) : text;
}

/**
 * undici, loaded when the pool is first made (`warm`, or the first delivery): its ~5 MiB of code
 * and heap stay out of a process whose store has no HTTP webhook endpoint (decision 0048).
 */
let undici: typeof import('undici') | undefined;
async function loadUndici(): Promise<typeof import('undici')> {
  undici ??= await import('undici');
  return undici;
}

function classify(error: unknown, timedOut: boolean, timeoutMs: number, durationMs: number): HttpAttemptResult {
  // A request was made, so undici is loaded (#pool); anything thrown before it is no timeout of its.
  const undiciErrors = undici?.errors;
  const base = { statusCode: null, responseExcerpt: null, retryAfterMs: null, durationMs };
  if (
    timedOut ||
    (undiciErrors !== undefined &&
      (error instanceof undiciErrors.HeadersTimeoutError ||
        error instanceof undiciErrors.BodyTimeoutError ||
        error instanceof undiciErrors.ConnectTimeoutError))
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
