/**
 * Rate limits of the read API (spec §8, DECISIONS.md): per token, two budgets counted separately —
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
 * The check runs in a preParsing hook at the root: after every onRequest hook, so after bearer-auth
 * has set `request.token` (the key is the token id), and before validation, so a request with a bad
 * parameter still counts and still gets the headers. Unauthenticated requests (401) are not counted;
 * a valid token lacking the route's scope (403, refused in onRequest) is counted in onSend instead.
 * When Redis cannot be reached the request is served uncounted at once (counted in
 * `store_api_rate_limit_store_errors_total`): a limiter outage must neither take the API down nor
 * slow it. The client fails fast (REDIS_CLIENT_OPTIONS: no offline queue, short timeouts) and keeps
 * reconnecting in the background, so counting resumes as soon as Redis is back; the outage and the
 * recovery are logged once each, not per request.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import rateLimit from '@fastify/rate-limit';
import { Redis, type RedisOptions } from 'ioredis';
import { ApiError } from '../../shared/problem.ts';
import { rateLimitRejections, rateLimitStoreErrors } from '../../ops/metrics.ts';

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
export function rateLimitHeaders(rateClass: RateLimitClass, max: number, windowMs: number, remaining: number, ttlMs: number, now = Date.now()): Record<string, string> {
  const secondsLeft = Math.max(0, Math.ceil(ttlMs / 1000));
  return {
    'X-RateLimit-Limit': String(max),
    'X-RateLimit-Remaining': String(remaining),
    'X-RateLimit-Reset': String(Math.ceil((now + ttlMs) / 1000)),
    'RateLimit-Policy': `"${rateClass}";q=${max};w=${Math.ceil(windowMs / 1000)}`,
    'RateLimit': `"${rateClass}";r=${remaining};t=${secondsLeft}`,
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

export const rateLimitPlugin = fp(async function rateLimiting(app: FastifyInstance) {
  const config = app.ctx.config;
  const redis = config.REDIS_URL ? new Redis(config.REDIS_URL, REDIS_CLIENT_OPTIONS) : undefined;
  // ioredis emits 'error' on every failed reconnect: log the change of state, once each way.
  let redisDown = false;
  redis?.on('error', (error) => {
    if (redisDown) return;
    redisDown = true;
    app.log.warn({ err: error }, 'rate-limit store (Redis) unreachable; serving requests uncounted until it is back');
  });
  redis?.on('ready', () => {
    if (!redisDown) return;
    redisDown = false;
    app.log.info('rate-limit store (Redis) is back; counting requests again');
  });

  await app.register(rateLimit, {
    global: false,
    hook: 'preParsing',
    timeWindow: config.RATE_LIMIT_WINDOW_MS,
    skipOnError: false,
    keyGenerator: (request: FastifyRequest) => `${classOf(request)}:${request.token!.id}`,
    max: (request: FastifyRequest) => {
      const token = request.token!;
      return classOf(request) === 'export'
        ? (token.rateLimitExport ?? config.RATE_LIMIT_EXPORT)
        : (token.rateLimitStandard ?? config.RATE_LIMIT_STANDARD);
    },
    ...(redis ? { redis, nameSpace: `${config.REDIS_KEY_PREFIX}rate-limit:` } : {}),
  });
  const check = app.createRateLimit() as (request: FastifyRequest) => Promise<LimitState>;

  const counted = new WeakSet<FastifyRequest>();

  /** Counts `request` and sets its headers; returns the refusal when the budget is spent. */
  const countRequest = async (request: FastifyRequest, reply: FastifyReply): Promise<ApiError | undefined> => {
    const rateClass = classOf(request);
    if (!rateClass || !request.token || counted.has(request)) return undefined;
    counted.add(request);
    let state: LimitState;
    try {
      state = await check(request);
    } catch (error) {
      rateLimitStoreErrors.inc();
      // An outage is logged once (above); an error while Redis is connected is unusual: log each.
      if (!redisDown && redis?.status === 'ready') request.log.warn({ err: error }, 'rate-limit check failed; serving the request uncounted');
      return undefined;
    }
    if (state.isAllowed || state.max === undefined) return undefined;
    const windowMs = state.timeWindow ?? config.RATE_LIMIT_WINDOW_MS;
    const headers = rateLimitHeaders(rateClass, state.max, windowMs, state.remaining ?? 0, state.ttl ?? 0);
    reply.headers(headers);
    if (!state.isExceeded) return undefined;
    const retryAfter = Math.max(1, state.ttlInSeconds ?? 1);
    return new ApiError(
      'rate_limited',
      `Rate limit of ${state.max} ${rateClass} requests per ${Math.ceil(windowMs / 1000)} s exceeded for this token; retry in ${retryAfter} s.`,
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
    if (redis) await redis.quit().catch(() => redis.disconnect());
  });
}, { name: 'store-api-rate-limit' });
