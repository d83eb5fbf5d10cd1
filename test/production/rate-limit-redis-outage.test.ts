/**
 * A Redis outage costs no latency. The test runs its own redis-server on a free
 * port, stops it and starts it again:
 *  - the client fails fast: no offline queue (a command while disconnected fails at once instead of
 *    waiting for a reconnect) and a short command and connect timeout;
 *  - while Redis is down every request is served (uncounted: no rate-limit headers), and counting
 *    resumes as soon as Redis is back (the headers return and count down);
 *  - the outage is logged once and the recovery once, not once per request;
 *  - a hung Redis (SIGSTOP: connection open, no answers) is asked only until REDIS_BREAKER.failures
 *    checks have timed out: then requests are served uncounted without asking it (the store-error
 *    counter stands still while the uncounted counter rises), one line is logged, a probe notices
 *    its return (SIGCONT) and counting resumes.
 * Skipped with a message when redis-server is not installed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { REDIS_BREAKER, REDIS_CLIENT_OPTIONS } from '../../src/api/plugins/rate-limit.ts';
import { rateLimitStoreErrors, rateLimitStoreOut, rateLimitUncounted } from '../../src/ops/metrics.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { backends, openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';

const haveRedisServer = spawnSync('redis-server', ['--version']).status === 0;
if (!haveRedisServer) console.warn('rate-limit Redis outage test skipped: redis-server is not installed');

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function until(what: string, condition: () => Promise<boolean> | boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A redis-server of this test only, on `port`, without persistence. */
class OwnRedis {
  #child: ChildProcess | undefined;
  #output = '';
  constructor(readonly port: number) {}

  async start(): Promise<void> {
    this.#output = '';
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    child.stdout!.on('data', (c: Buffer) => (this.#output += c.toString()));
    await until('redis-server to accept connections', () => /Ready to accept connections/.test(this.#output) || child.exitCode !== null, 20_000);
    if (child.exitCode !== null) throw new Error(`redis-server exited:\n${this.#output}`);
  }

  /** SIGSTOP: the connection stays open and nothing answers, as in a partition that drops packets. */
  pause(): void {
    this.#child?.kill('SIGSTOP');
  }

  resume(): void {
    this.#child?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

describe('Redis client options of the rate limiter', () => {
  it('fail fast: no offline queue, short connect and command timeouts', () => {
    expect(REDIS_CLIENT_OPTIONS.enableOfflineQueue).toBe(false);
    expect(REDIS_CLIENT_OPTIONS.maxRetriesPerRequest).toBe(0);
    expect(REDIS_CLIENT_OPTIONS.commandTimeout).toBeLessThanOrEqual(1000);
    expect(REDIS_CLIENT_OPTIONS.connectTimeout).toBeLessThanOrEqual(2000);
  });
});

describe.skipIf(!haveRedisServer).each(backends)('rate limits through a Redis outage (%s)', (backend) => {
  let database: TestDatabase;
  let redis: OwnRedis;
  let app: App;
  const lines: { level: number; msg: string }[] = [];

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    redis = new OwnRedis(await freePort());
    await redis.start();
    const capture = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as { level: number; msg: string });
        done();
      },
    });
    const config = loadConfig({ LOG_LEVEL: 'info', SEED_DEMO: 'false', REDIS_URL: `redis://127.0.0.1:${redis.port}`, REDIS_KEY_PREFIX: `outage-${backend}:` });
    app = await buildApp({ config, database, logger: pino({ level: 'info' }, capture) });
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await redis?.stop();
    await database?.close();
  });

  it('serves uncounted while Redis is down, counts again once it is back, and logs each change once', async () => {
    const { token } = await createToken(database.db, { name: 'outage', rateLimitStandard: 1000 });
    const headers = { authorization: `Bearer ${token}` };
    const get = () => app.inject({ url: '/api/v1/products?limit=1', headers });
    const outageLines = () => lines.filter((l) => /rate-limit store \(Redis\) unreachable/.test(l.msg));
    const recoveryLines = () => lines.filter((l) => /rate-limit store \(Redis\) is back/.test(l.msg));
    const perRequestLines = () => lines.filter((l) => /rate-limit check failed/.test(l.msg));

    await until('counted requests', async () => (await get()).headers['x-ratelimit-remaining'] !== undefined);
    const before = Number((await get()).headers['x-ratelimit-remaining']);
    expect(Number((await get()).headers['x-ratelimit-remaining'])).toBe(before - 1);

    await redis.stop();
    await until('the outage to be noticed', () => outageLines().length > 0);
    for (let i = 0; i < 20; i++) {
      const res = await get();
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBeUndefined();
    }
    expect(outageLines()).toHaveLength(1);
    expect(perRequestLines()).toHaveLength(0);

    await redis.start();
    // Counting resumes on its own (the client reconnects); the fresh Redis starts a fresh window.
    await until('counting to resume', async () => (await get()).headers['x-ratelimit-remaining'] !== undefined);
    const resumed = Number((await get()).headers['x-ratelimit-remaining']);
    expect(Number((await get()).headers['x-ratelimit-remaining'])).toBe(resumed - 1);
    expect(outageLines()).toHaveLength(1);
    expect(recoveryLines()).toHaveLength(1);
  }, 90_000);

  it('a hung Redis trips the breaker: not asked again, one line, counting resumes when it answers', async () => {
    const { token } = await createToken(database.db, { name: 'hung', rateLimitStandard: 1000 });
    const headers = { authorization: `Bearer ${token}` };
    const get = () => app.inject({ url: '/api/v1/products?limit=1', headers });
    const outageLines = () => lines.filter((l) => /rate-limit store \(Redis\) unreachable/.test(l.msg));
    const recoveryLines = () => lines.filter((l) => /rate-limit store \(Redis\) is back/.test(l.msg));
    const warnings = () => lines.filter((l) => l.level >= 40);
    const value = async (metric: { get(): Promise<{ values: { value: number }[] }> }) => (await metric.get()).values[0]?.value ?? 0;

    await until('counted requests', async () => (await get()).headers['x-ratelimit-remaining'] !== undefined);
    const outagesBefore = outageLines().length,
      recoveriesBefore = recoveryLines().length,
      warningsBefore = warnings().length;
    const errorsBefore = await value(rateLimitStoreErrors);

    redis.pause();
    try {
      // Each of these waits for the command timeout, until the breaker opens.
      await until('the breaker to open', async () => {
        const res = await get();
        expect(res.statusCode).toBe(200);
        return outageLines().length > outagesBefore;
      });
      expect((await value(rateLimitStoreErrors)) - errorsBefore).toBe(REDIS_BREAKER.failures);
      expect(await value(rateLimitStoreOut)).toBe(1);
      const uncountedBefore = await value(rateLimitUncounted);
      for (let i = 0; i < 20; i++) {
        const res = await get();
        expect(res.statusCode).toBe(200);
        expect(res.headers['x-ratelimit-remaining']).toBeUndefined();
      }
      // Served without asking Redis: no more failed checks, 20 more uncounted requests.
      expect((await value(rateLimitStoreErrors)) - errorsBefore).toBe(REDIS_BREAKER.failures);
      expect((await value(rateLimitUncounted)) - uncountedBefore).toBe(20);
      expect(outageLines()).toHaveLength(outagesBefore + 1);
      expect(warnings()).toHaveLength(warningsBefore + 1);
      expect(JSON.stringify(outageLines().at(-1))).not.toMatch(/stack/);
    } finally {
      redis.resume();
    }

    await until('counting to resume', async () => (await get()).headers['x-ratelimit-remaining'] !== undefined);
    const resumed = Number((await get()).headers['x-ratelimit-remaining']);
    expect(Number((await get()).headers['x-ratelimit-remaining'])).toBe(resumed - 1);
    expect(recoveryLines()).toHaveLength(recoveriesBefore + 1);
    expect(outageLines()).toHaveLength(outagesBefore + 1);
    expect(await value(rateLimitStoreOut)).toBe(0);
  }, 90_000);
});

describe.skipIf(!haveRedisServer).each(backends)('a process starting while Redis is slow to answer (%s)', (backend) => {
  let database: TestDatabase;
  let redis: OwnRedis;
  let app: App | undefined;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    redis = new OwnRedis(await freePort());
    await redis.start();
  });
  afterAll(async () => {
    await app?.close();
    redis?.resume();
    await redis?.stop();
    await database?.close();
  });

  it('waits for its first Redis connection, so it counts from its first request', async () => {
    const { token } = await createToken(database.db, { name: 'slow-start', rateLimitStandard: 100 });
    // Redis accepts the connection but answers nothing until it is resumed: the ready check waits.
    redis.pause();
    const config = loadConfig({
      LOG_LEVEL: 'silent',
      SEED_DEMO: 'false',
      REDIS_URL: `redis://127.0.0.1:${redis.port}`,
      REDIS_KEY_PREFIX: `slow-start-${backend}:`,
    });
    const built = buildApp({ config, database, logger: pino({ level: 'silent' }) }).then(async (a) => {
      await a.ready();
      return a;
    });
    setTimeout(() => redis.resume(), 300).unref();
    app = await built;
    const res = await app.inject({ url: '/api/v1/products?limit=1', headers: { authorization: `Bearer ${token}` } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-remaining']).toBe('99');
  });
});
