/**
 * Rate limits of the read API (spec §8, docs/contract/decisions.md): per token, two budgets counted separately —
 * `standard` (lists, single GETs) and `export` — chosen by the route's `rateLimitClass` config.
 * Limits: the token's own override (`rate_limit_standard` / `rate_limit_export`) or the deployment's
 * RATE_LIMIT_STANDARD / RATE_LIMIT_EXPORT per RATE_LIMIT_WINDOW_MS.
 *
 * Counting is @fastify/rate-limit's fixed window (the window starts with a token's first request in
 * it): in process memory by default; in Redis with REDIS_URL, so every API process of a deployment
 * shares one count per token (an atomic INCR + PEXPIRE script, keys `${REDIS_KEY_PREFIX}rate-limit:…`).
 *
 * Every counted response carries
 *   X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (Unix epoch seconds of the window's end)
 *   RateLimit-Policy: "standard";q=60;w=60   and   RateLimit: "standard";r=59;t=42
 *     (IETF draft-ietf-httpapi-ratelimit-headers: quota, window s, remaining, seconds to reset)
 * and a refused one is 429 problem+json `rate_limited` with Retry-After (seconds).
 *
 * A store (decision 0051) may also have a budget across all of its keys, STORE_RATE_LIMIT requests
 * per window, both classes together (off at 0, the default): a platform bounds what one store's
 * integrations can ask of the fleet however many keys it makes. Counted in the same store (memory or
 * Redis) under the key `store:<store id>`, after the key's own budget allowed the request (a
 * request the key's budget refuses is not counted against the store); refused 429 `rate_limited`
 * naming the store's limit, with Retry-After. The key's headers stay the key's.
 *
 * The check runs in a preParsing hook at the root: after every onRequest hook, so after bearer-auth
 * has set `request.token` (the key is the token id), and before validation, so a request with a bad
 * parameter still counts and still gets the headers. Unauthenticated requests (401) are not counted;
 * a valid token lacking the route's scope (403, refused in onRequest) is counted in onSend instead.
 * When Redis cannot be reached the request is served uncounted (counted in
 * `store_api_rate_limit_store_errors_total`): a limiter outage must neither take the API down nor
 * slow it. The client fails fast (REDIS_CLIENT_OPTIONS: no offline queue, short timeouts) and keeps
 * reconnecting in the background. A Redis that hangs (the connection open, no answers: a stopped
 * process, a partition dropping packets) would still cost every request the command timeout, so a
 * breaker (REDIS_BREAKER) stops asking it: after `failures` consecutive failed checks — or at once
 * when the connection drops — requests are served uncounted without touching Redis
 * (`store_api_rate_limit_uncounted_total`, gauge `store_api_rate_limit_store_out`), a PING probes for
 * its return every `probeIntervalMs`, and counting resumes on the first answer. The outage and the
 * recovery are logged once each (a message, no stack), never per request.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import rateLimit from '@fastify/rate-limit';
import type { Redis, RedisOptions } from 'ioredis';
import { ApiError } from '../../shared/problem.ts';
import type { SharedStore } from '../../stores/store-slots.ts';
import { rateLimitRejections, rateLimitStoreErrors, rateLimitStoreOut, rateLimitUncounted } from '../../ops/metrics.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The rate limit's Redis while REDIS_URL is set (the snapshot's fleet-wide slots share it). */
    sharedStore: SharedStore | undefined;
  }
}

export type RateLimitClass = 'standard' | 'export';

interface LimitState {
  isAllowed: boolean;
  max?: number;
  remaining?: number;
  ttl?: number;
  ttlInSeconds?: number;
  timeWindow?: number;
  isExceeded?: boolean;
}

/** Header values for a window of `max` requests over `windowMs`, `remaining` left, ending in `ttlMs`. */
export function rateLimitHeaders(
  rateClass: RateLimitClass,
  max: number,
  windowMs: number,
  remaining: number,
  ttlMs: number,
  now = Date.now(),
): Record<string, string> {
  const secondsLeft = Math.max(0, Math.ceil(ttlMs / 1000));
  return {
    'X-RateLimit-Limit': String(max),
    'X-RateLimit-Remaining': String(remaining),
    'X-RateLimit-Reset': String(Math.ceil((now + ttlMs) / 1000)),
    'RateLimit-Policy': `"${rateClass}";q=${max};w=${Math.ceil(windowMs / 1000)}`,
    RateLimit: `"${rateClass}";r=${remaining};t=${secondsLeft}`,
  };
}

function classOf(request: FastifyRequest): RateLimitClass | undefined {
  return request.routeOptions.config?.rateLimitClass;
}

/**
 * ioredis options of the rate-limit store: a request never waits for Redis to come back. Commands
 * issued while disconnected fail at once (no offline queue, no retry of a command), a command on a
 * connection that hangs fails after 500 ms, and reconnects run in the background with a capped
 * backoff, forever, so counting resumes by itself.
 */
export const REDIS_CLIENT_OPTIONS = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  commandTimeout: 500,
  connectTimeout: 1000,
  enableAutoPipelining: true,
  retryStrategy: (attempt: number) => Math.min(100 * attempt, 2000),
} as const satisfies RedisOptions;

/**
 * The breaker in front of the rate-limit store: consecutive failed checks that open it, and how often
 * a PING asks whether Redis is back while it is open.
 */
export const REDIS_BREAKER = { failures: 3, probeIntervalMs: 1000, startupWaitMs: 3000 } as const;

/**
 * Open while Redis is out: requests skip it. Opened by `failures` consecutive failures or a dropped
 * connection, closed by the first PING that is answered; each change logged once.
 */
class RedisBreaker {
  #failures = 0;
  #open = false;
  #probe: NodeJS.Timeout | undefined;
  #probing = false;

  constructor(
    private readonly redis: Redis,
    private readonly log: FastifyInstance['log'],
  ) {
    rateLimitStoreOut.set(0);
  }

  get open(): boolean {
    return this.#open;
  }

  succeeded(): void {
    this.#failures = 0;
  }

  failed(error: unknown): void {
    this.#failures += 1;
    if (this.#failures >= REDIS_BREAKER.failures) this.trip(error);
  }

  /** Opens the breaker (once per outage) and starts probing. */
  trip(error: unknown): void {
    if (this.#open) return;
    this.#open = true;
    rateLimitStoreOut.set(1);
    this.log.warn(
      { error: error instanceof Error ? error.message : String(error), probeIntervalMs: REDIS_BREAKER.probeIntervalMs },
      'rate-limit store (Redis) unreachable; serving requests uncounted until it is back',
    );
    this.#probe = setInterval(() => void this.#ping(), REDIS_BREAKER.probeIntervalMs);
    this.#probe.unref();
  }

  async #ping(): Promise<void> {
    if (this.#probing || !this.#open) return;
    this.#probing = true;
    try {
      await this.redis.ping();
      this.close();
    } catch {
      // Still out; the next probe asks again.
    } finally {
      this.#probing = false;
    }
  }

  /** Closes the breaker (Redis answered: a probe's PING, or a connection that passed its ready check). */
  close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.#failures = 0;
    clearInterval(this.#probe);
    this.#probe = undefined;
    rateLimitStoreOut.set(0);
    this.log.info('rate-limit store (Redis) is back; counting requests again');
  }

  stop(): void {
    clearInterval(this.#probe);
  }
}

/** Resolves when `redis` is ready or after `ms`, whichever comes first. */
async function firstReady(redis: Redis, ms: number): Promise<void> {
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    redis.once('ready', done);
  });
}

export const rateLimitPlugin = fp(
  async function rateLimiting(app: FastifyInstance) {
    const config = app.ctx.config;
    // ioredis is loaded only with REDIS_URL: the embedded default never holds it (decision 0043).
    const redis = config.REDIS_URL ? new (await import('ioredis')).Redis(config.REDIS_URL, REDIS_CLIENT_OPTIONS) : undefined;
    const breaker = redis ? new RedisBreaker(redis, app.log) : undefined;
    // ioredis emits 'error' on every failed (re)connect: a connection that is not ready opens the
    // breaker at once (it logs once per outage). An error while the connection is ready (a command's
    // own failure) is left to the consecutive-failure count. A connection that passes its ready check
    // (Redis answered INFO) closes it, as does the probe's PING.
    redis?.on('error', (error) => {
      if (redis.status !== 'ready') breaker!.trip(error);
    });
    redis?.on('ready', () => breaker!.close());
    // A new process counts from its first request: it waits (at most startupWaitMs) for the first
    // connection before it serves; a Redis that is down at start leaves it serving uncounted.
    if (redis && redis.status !== 'ready') await firstReady(redis, REDIS_BREAKER.startupWaitMs);
    app.decorate('sharedStore', redis ? { redis, prefix: config.REDIS_KEY_PREFIX, usable: () => !breaker!.open } : undefined);

    await app.register(rateLimit, {
      global: false,
      hook: 'preParsing',
      timeWindow: config.RATE_LIMIT_WINDOW_MS,
      skipOnError: false,
      keyGenerator: (request: FastifyRequest) => `${classOf(request)}:${request.token!.id}`,
      max: (request: FastifyRequest) => {
        const token = request.token!;
        return classOf(request) === 'export' ? (token.rateLimitExport ?? config.RATE_LIMIT_EXPORT) : (token.rateLimitStandard ?? config.RATE_LIMIT_STANDARD);
      },
      ...(redis ? { redis, nameSpace: `${config.REDIS_KEY_PREFIX}rate-limit:` } : {}),
    });
    const check = app.createRateLimit() as (request: FastifyRequest) => Promise<LimitState>;
    const checkStore =
      config.STORE_RATE_LIMIT > 0
        ? (app.createRateLimit({
            keyGenerator: (request: FastifyRequest) => `store:${request.token!.storeId}`,
            max: config.STORE_RATE_LIMIT,
            timeWindow: config.RATE_LIMIT_WINDOW_MS,
          }) as (request: FastifyRequest) => Promise<LimitState>)
        : undefined;

    const counted = new WeakSet<FastifyRequest>();

    /** Counts `request` and sets its headers; returns the refusal when the budget is spent. */
    const countRequest = async (request: FastifyRequest, reply: FastifyReply): Promise<ApiError | undefined> => {
      const rateClass = classOf(request);
      if (!rateClass || !request.token || counted.has(request)) return undefined;
      counted.add(request);
      if (breaker?.open) {
        rateLimitUncounted.inc();
        return undefined;
      }
      let state: LimitState;
      let storeState: LimitState | undefined;
      try {
        state = await check(request);
        if (checkStore && (state.isAllowed || !state.isExceeded)) storeState = await checkStore(request);
        breaker?.succeeded();
      } catch (error) {
        rateLimitStoreErrors.inc();
        // No line per request: the breaker logs the outage once when it opens.
        request.log.debug({ error: error instanceof Error ? error.message : String(error) }, 'rate-limit check failed; serving the request uncounted');
        breaker?.failed(error);
        return undefined;
      }
      if (state.isAllowed || state.max === undefined) return undefined;
      const windowMs = state.timeWindow ?? config.RATE_LIMIT_WINDOW_MS;
      const headers = rateLimitHeaders(rateClass, state.max, windowMs, state.remaining ?? 0, state.ttl ?? 0);
      reply.headers(headers);
      if (!state.isExceeded) return storeRefusal(storeState, headers, windowMs);
      const retryAfter = Math.max(1, state.ttlInSeconds ?? 1);
      return new ApiError(
        'rate_limited',
        `Rate limit of ${state.max} ${rateClass} requests per ${Math.ceil(windowMs / 1000)} s exceeded for this token; retry in ${retryAfter} s.`,
        undefined,
        { ...headers, 'Retry-After': String(retryAfter) },
      );
    };

    /** The refusal when the store's budget across its keys is spent (its own Retry-After). */
    const storeRefusal = (state: LimitState | undefined, headers: Record<string, string>, windowMs: number): ApiError | undefined => {
      if (!state?.isExceeded || state.max === undefined) return undefined;
      const retryAfter = Math.max(1, state.ttlInSeconds ?? 1);
      return new ApiError(
        'rate_limited',
        `Rate limit of ${state.max} requests per ${Math.ceil(windowMs / 1000)} s across all of this store's API keys exceeded; retry in ${retryAfter} s.`,
        undefined,
        { ...headers, 'Retry-After': String(retryAfter) },
      );
    };

    app.addHook('preParsing', async (request: FastifyRequest, reply: FastifyReply) => {
      const refusal = await countRequest(request, reply);
      if (refusal) {
        rateLimitRejections.inc({ class: classOf(request)! });
        throw refusal;
      }
    });

    // A token that authenticated but lacks the route's scope is refused (403) in onRequest, before
    // preParsing: count it here so that response carries the headers too (it stays a 403).
    app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      if (reply.statusCode === 403) await countRequest(request, reply);
      return payload;
    });

    app.addHook('onClose', async () => {
      breaker?.stop();
      if (redis) await redis.quit().catch(() => redis.disconnect());
    });
  },
  { name: 'store-api-rate-limit' },
);
