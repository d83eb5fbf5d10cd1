/**
 * Database faults never kill a process, on real PostgreSQL, in every role
 * spawned as in production (`serve`, `worker`, `all`):
 *  - under a few concurrent requests (reads, streaming exports, admin writes, /readyz) every backend
 *    of the test database is terminated (`pg_terminate_backend`, what a failover, a restart or an
 *    idle-session killer does), three times while queries are running: the process stays up, no
 *    answer is a 500 (those that met the dead connection are 503 problem+json with Retry-After), and
 *    later requests succeed on fresh connections;
 *  - the worker keeps delivering: its LISTEN connection comes back and a change made after the fault
 *    reaches the receiver;
 *  - with the database unreachable (a TCP relay in front of PostgreSQL is closed), /readyz and the API
 *    answer 503 with Retry-After, and both recover when it is back.
 * PostgreSQL only (PGlite runs in the process and has no connections to lose); skipped with a
 * message when TEST_DATABASE_URL is unset.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, connect, type Server as TcpServer, type Socket } from 'node:net';
import { request } from 'undici';
import { sql } from 'kysely';
import { generateDemoStore } from '../../src/demo/demo-store.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';
import { listeningUrl, startStoreApi, type StoreApiProcess } from './process-helpers.ts';

const DATABASE_URL = process.env.TEST_DATABASE_URL;
if (!DATABASE_URL) console.warn('database-faults test skipped: TEST_DATABASE_URL is not set (the faults are PostgreSQL connection faults)');

const ROLES = ['serve', 'worker', 'all'] as const;

/** Polls `condition` every 50 ms until it holds (bounded; never a guess). */
async function until<T>(what: string, condition: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Answer {
  kind: string;
  status: number | 'aborted';
  type?: string;
  code?: string;
  retryAfter?: string;
}

/** A TCP relay in front of PostgreSQL that can be closed (connection refused) and opened again. */
class Relay {
  #server: TcpServer | undefined;
  readonly #sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    this.#server = createTcpServer((socket) => {
      const upstream = connect(this.target.port, this.target.host);
      for (const s of [socket, upstream]) {
        this.#sockets.add(s);
        s.on('error', () => {});
        s.on('close', () => {
          this.#sockets.delete(s);
          socket.destroy();
          upstream.destroy();
        });
      }
      socket.pipe(upstream).pipe(socket);
    });
    await new Promise<void>((resolve) => this.#server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.#server.address() as { port: number }).port;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
    this.#server = undefined;
  }
}

describe.skipIf(!DATABASE_URL)('database faults never kill a process (postgres)', () => {
  let t: TestApp;
  let read: { authorization: string };
  let admin: { authorization: string };
  let receiver: Server;
  const received: string[] = [];
  const started: StoreApiProcess[] = [];
  const env = () => ({
    DATABASE_URL: t.database.url!,
    WEBHOOK_POLL_INTERVAL_MS: '100',
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    LOG_LEVEL: 'warn',
    ...UNLIMITED,
  });

  beforeAll(async () => {
    t = await buildTestApp('postgres', { ...UNLIMITED, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    await generateDemoStore(t.database.db, { products: 300, customers: 20, orders: 30 });
    read = await t.auth();
    admin = await t.auth(['admin']);
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(body);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
    const endpoint = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v1/webhooks/endpoints',
      headers: { ...admin, 'content-type': 'application/json' },
      payload: JSON.stringify({ url, event_types: ['customer.created'] }),
    });
    expect(endpoint.statusCode).toBe(201);
  });
  afterAll(async () => {
    for (const proc of started) await proc.stop('SIGKILL');
    await new Promise((resolve) => receiver?.close(resolve));
    await t?.close();
  });

  const start = (role: string, extra: Record<string, string> = {}) => {
    const proc = startStoreApi([role], { ...env(), ...(role === 'worker' ? { METRICS_PORT: '0' } : {}), ...extra }, { name: `${role} (faults)` });
    started.push(proc);
    return proc;
  };

  /** Terminates every other backend of the test database; returns how many. */
  const terminateBackends = async () => {
    const { rows } = await sql<{ n: number }>`
      SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid()
    `.execute(t.database.db);
    return rows[0]!.n;
  };
  const backendsOf = async (applicationName: string, busyOnly = false) => {
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = ${applicationName} AND (NOT ${busyOnly} OR state <> 'idle')
    `.execute(t.database.db);
    return rows[0]!.n;
  };

  /** One request of `kind`; the body is read to the end (an export cut mid-stream is 'aborted'). */
  const call = async (base: string, kind: string, i: number): Promise<Answer> => {
    const target = {
      list: { method: 'GET', path: '/api/v1/products?limit=200', headers: read },
      export: { method: 'GET', path: '/api/v1/products/export?limit=300', headers: read },
      write: {
        method: 'POST',
        path: '/admin/api/v1/customers',
        headers: { ...admin, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `Fault ${i}` }),
      },
      ready: { method: 'GET', path: '/readyz', headers: {} },
    }[kind]!;
    const res = await request(`${base}${target.path}`, {
      method: target.method as 'GET',
      headers: target.headers,
      body: 'body' in target ? target.body : undefined,
    });
    let text: string;
    try {
      text = await res.body.text();
    } catch {
      return { kind, status: 'aborted' };
    }
    const answer: Answer = {
      kind,
      status: res.statusCode,
      type: String(res.headers['content-type'] ?? ''),
      retryAfter: res.headers['retry-after'] as string | undefined,
    };
    if (res.statusCode >= 400) answer.code = (JSON.parse(text) as { code: string }).code;
    return answer;
  };

  it.each(ROLES)(
    '%s: terminated backends under load, then fresh connections and deliveries',
    async (role) => {
      const proc = start(role);
      const base = await listeningUrl(proc);
      const appName = `store-api-${role}`;

      if (role !== 'worker') {
        const answers: Answer[] = [];
        let running = true;
        const kinds = ['list', 'export', 'write', 'ready', 'list', 'export'];
        const loops = kinds.map(async (kind, n) => {
          for (let i = 0; running; i++) {
            // A refused or reset connection (the process died) is recorded, and fails the test below.
            answers.push(await call(base, kind, n * 100_000 + i).catch((error: Error) => ({ kind, status: `error ${error.message}` }) as unknown as Answer));
          }
        });
        for (let round = 0; round < 3; round++) {
          // Terminate while this process has queries running (a condition, polled), not at a guessed moment.
          await until('a busy backend of the server', async () => (await backendsOf(appName, true)) > 0).catch(() => undefined);
          expect(proc.child.exitCode, `round ${round}: ${proc.output()}`).toBeNull();
          expect(await terminateBackends(), `round ${round}: ${JSON.stringify(answers.slice(-12))}`).toBeGreaterThan(0);
          const seen = answers.length;
          await until('answers after the fault', async () => answers.length >= seen + kinds.length);
        }
        running = false;
        await Promise.all(loops);

        expect(proc.child.exitCode, proc.output()).toBeNull();
        const failures = answers.filter((a) => a.status !== 200 && a.status !== 201);
        for (const failure of failures) {
          // An export whose stream was cut after its 200 headers is the only other outcome.
          if (failure.status === 'aborted') {
            expect(failure.kind).toBe('export');
            continue;
          }
          // On a 500, the server's own log line says which error was not recognised as "unavailable".
          const unhandled = proc
            .output()
            .split('\n')
            .filter((line) => line.includes('unhandled error'))
            .join('\n');
          expect(failure, unhandled).toMatchObject({ status: 503, code: 'service_unavailable', type: expect.stringContaining('application/problem+json') });
          expect(Number(failure.retryAfter)).toBeGreaterThan(0);
        }
        expect(answers.filter((a) => a.status === 200 || a.status === 201).length).toBeGreaterThan(0);
        // Fresh connections serve everything again.
        for (const kind of ['list', 'export', 'write', 'ready']) {
          await until(`${kind} answering again`, async () => {
            const answer = await call(base, kind, 999_000);
            return answer.status === 200 || answer.status === 201;
          });
        }
      }

      if (role !== 'serve') {
        // The worker's loops and its LISTEN connection (a dedicated client) survive the fault.
        await until('the LISTEN connection', async () => (await backendsOf('store-api-webhook-listener')) === 1);
        for (let round = 0; round < 3; round++) {
          await until('a busy worker backend', async () => (await backendsOf(appName, true)) > 0, 5000).catch(() => undefined);
          await terminateBackends();
        }
        await until('the LISTEN connection back', async () => (await backendsOf('store-api-webhook-listener')) === 1);
        const name = `After the fault (${role})`;
        await until('the write after the fault', async () => {
          const res = await t.app.inject({
            method: 'POST',
            url: '/admin/api/v1/customers',
            headers: { ...admin, 'content-type': 'application/json' },
            payload: JSON.stringify({ name }),
          });
          return res.statusCode === 201;
        });
        await until('its delivery', async () => received.some((body) => body.includes(name)));
        expect(proc.child.exitCode, proc.output()).toBeNull();
      }

      expect(await proc.stop('SIGTERM')).toBe(0);
    },
    180_000,
  );

  it('serve: while the database is unreachable /readyz and the API answer 503 with Retry-After, then recover', async () => {
    const pgUrl = new URL(t.database.url!);
    const relay = new Relay({ host: pgUrl.hostname, port: Number(pgUrl.port || 5432) });
    await relay.open();
    const viaRelay = new URL(t.database.url!);
    viaRelay.port = String(relay.port);
    const proc = start('serve', { DATABASE_URL: viaRelay.toString() });
    const base = await listeningUrl(proc);
    expect((await call(base, 'ready', 0)).status).toBe(200);

    await relay.close();
    for (const kind of ['ready', 'list', 'write']) {
      const answer = await call(base, kind, 1);
      expect(answer, kind).toMatchObject({ status: 503, code: 'service_unavailable', type: expect.stringContaining('application/problem+json') });
      expect(Number(answer.retryAfter)).toBeGreaterThan(0);
    }
    expect(proc.child.exitCode).toBeNull();

    await relay.open();
    for (const kind of ['ready', 'list', 'export', 'write']) {
      await until(`${kind} after the database is back`, async () => {
        const answer = await call(base, kind, 2);
        return answer.status === 200 || answer.status === 201;
      });
    }
    expect(await proc.stop('SIGTERM')).toBe(0);
    await relay.close();
  }, 120_000);
});
