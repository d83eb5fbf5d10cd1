/**
 * `store-api-sync run` as a daemon: started while the service is down, it keeps its webhook
 * receiver up, logs the outage and retries without end; `status` shows the outage; when the service
 * comes up it finishes the initial sync. Then the service is stopped and started again (a new
 * process of the app on the same port and database) while changes happen: the daemon logs the
 * outage, recovers by itself, and the mirror verifies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backends, openTestDatabase } from '../helpers/test-database.ts';
import { buildTestApp, UNLIMITED, type TestApp } from '../helpers/test-app.ts';
import { aProduct, aCustomer } from '../helpers/store-fixtures.ts';
import { buildApp, type App } from '../../src/app.ts';
import { PROJECT_ROOT } from '../production/process-helpers.ts';

const SYNC_CLI = join(PROJECT_ROOT, 'packages/sync/bin/store-api-sync.js');
/** The CLI under test runs its TypeScript sources and the client's (the "source" export condition), never a dist/ build. */
const RUN_SOURCE = '--conditions=source';
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Collects a child's output and resolves when a line matching `pattern` appears after `from`. */
class Output {
  text = '';
  #waiters: { pattern: RegExp; from: number; resolve: (line: string) => void }[] = [];
  constructor(stream: NodeJS.ReadableStream) {
    stream.on('data', (chunk: Buffer) => {
      this.text += chunk.toString();
      for (const w of [...this.#waiters]) this.#check(w);
    });
  }
  #check(w: { pattern: RegExp; from: number; resolve: (line: string) => void }) {
    const line = this.text
      .slice(w.from)
      .split('\n')
      .find((l) => w.pattern.test(l));
    if (line !== undefined) {
      this.#waiters.splice(this.#waiters.indexOf(w), 1);
      w.resolve(line);
    }
  }
  next(pattern: RegExp, from = this.text.length): Promise<string> {
    return new Promise((resolve) => {
      const w = { pattern, from, resolve };
      this.#waiters.push(w);
      this.#check(w);
    });
  }
}

function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SYNC_CLI, ...args], {
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', NODE_OPTIONS: RUN_SOURCE, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe.each(backends)('store-api-sync run through outages of the service (%s)', (backend) => {
  let t: TestApp;
  let app: App | undefined;
  let port: number;
  const closers: { close(): Promise<void> }[] = [];

  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED });
    port = await freePort();
    for (let i = 0; i < 20; i++) await aProduct(t.database.db);
    for (let i = 0; i < 5; i++) await aCustomer(t.database.db);
  });
  afterAll(async () => {
    await app?.close();
    for (const c of closers.reverse()) await c.close();
    await t?.close();
  });

  const startService = async () => {
    app = await buildApp(t.ctx);
    await app.listen({ port, host: '127.0.0.1' });
  };
  const killService = async () => {
    const running = app!;
    app = undefined;
    running.server.closeAllConnections();
    await running.close();
  };

  it('keeps running, says so, and ends with a mirror that verifies', async () => {
    let mirrorArgs: string[];
    if (backend === 'postgres') {
      const db = await openTestDatabase('postgres', { poolSize: 1 });
      closers.push(db);
      mirrorArgs = ['--database', db.url!];
    } else {
      mirrorArgs = ['--data-dir', mkdtempSync(join(tmpdir(), 'store-api-sync-daemon-'))];
    }
    const token = (await t.auth()).authorization.slice('Bearer '.length);
    const env = { STORE_API_URL: `http://127.0.0.1:${port}`, STORE_API_TOKEN: token, STORE_WEBHOOK_SECRET: SECRET };
    const daemon: ChildProcessWithoutNullStreams = spawn(
      process.execPath,
      [SYNC_CLI, 'run', ...mirrorArgs, '--port', '0', '--reconcile-every', '200ms', '--retry-min', '100ms', '--retry-max', '400ms'],
      { env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', NODE_OPTIONS: RUN_SOURCE, ...env }, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const exited = new Promise<number | null>((resolve) => daemon.on('exit', (code) => resolve(code)));
    const stdout = new Output(daemon.stdout);
    const stderr = new Output(daemon.stderr);
    try {
      // 1. The service is down from the start: the receiver is up anyway, the outage is logged and retried.
      await stdout.next(/^receiving webhooks on http:\/\/127\.0\.0\.1:\d+\/webhooks/);
      await stderr.next(/outage: Cannot reach the Store API at http:\/\/127\.0\.0\.1:\d+.*retrying the initial sync in \d+\.\d s \(failed try 1\)/);
      await stderr.next(/\(failed try 3\)/);
      if (backend === 'postgres') {
        const status = await cli(['status', ...mirrorArgs], env);
        expect(status.stdout).toMatch(
          /^OUTAGE: the service or the mirror has failed since \S+ \(\d+ failed tries; run keeps retrying\): Cannot reach the Store API/m,
        );
      }

      // 2. The service comes up: the initial sync completes by itself.
      let mark = stderr.text.length;
      await startService();
      await stderr.next(/initial sync complete/, mark);
      await stderr.next(/recovered after \d+ s and \d+ failed tries/, mark);

      // 3. Killed and restarted while the store changes: the daemon notices, waits, catches up.
      mark = stderr.text.length;
      await killService();
      await stderr.next(/outage: .*retrying the reconcile/, mark);
      for (let i = 0; i < 4; i++) await aProduct(t.database.db);
      await aCustomer(t.database.db);
      mark = stderr.text.length;
      await startService();
      await stderr.next(/recovered after/, mark);
      if (backend === 'postgres') {
        const status = await cli(['status', ...mirrorArgs], env);
        expect(status.stdout).toMatch(/^service: reachable/m);
      }
    } finally {
      daemon.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    const verify = await cli(['verify', ...mirrorArgs], env);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    expect(verify.stdout).toMatch(/products +api 24 \((-?\w+)\) mirror 24 \(\1\) match/);
  }, 180_000);
});
