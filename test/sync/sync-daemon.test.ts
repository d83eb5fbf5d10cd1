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
import { aProduct, aCustomer, anOrder } from '../helpers/store-fixtures.ts';
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

/**
 * A token lacking one resource's scope (a token made for part of the store, or made before an
 * upgrade declared a resource): `init` and `run` mirror what it may read and say once which resource
 * they skipped and why, `status` and `verify` report it, the daemon keeps running, and a token that
 * may read it later mirrors it; a token that may read nothing still fails with one clear line.
 */
describe.each(backends)('store-api-sync with a token lacking a resource scope (%s)', (backend) => {
  let t: TestApp;
  let url: string;
  const closers: { close(): Promise<void> }[] = [];
  const SKIPPED = /store-api-sync: orders: skipped, the token lacks the scope orders:read \(the service answers 403\)/g;

  beforeAll(async () => {
    t = await buildTestApp(backend, { ...UNLIMITED });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
    const product = await aProduct(t.database.db);
    for (let i = 0; i < 5; i++) await aProduct(t.database.db);
    for (let i = 0; i < 3; i++) await aCustomer(t.database.db);
    await anOrder(t.database.db, [{ product_id: product.id, quantity: 1 }]);
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c.close();
    await t?.close();
  });

  const freshMirrorArgs = async () => {
    if (backend !== 'postgres') return ['--data-dir', mkdtempSync(join(tmpdir(), 'store-api-sync-scopes-'))];
    const db = await openTestDatabase('postgres', { poolSize: 1 });
    closers.push(db);
    return ['--database', db.url!];
  };
  const tokenOf = async (scopes?: Parameters<TestApp['auth']>[0]) => (await t.auth(scopes)).authorization.slice('Bearer '.length);

  it('init mirrors the other resources and says once that orders is skipped and why; status and verify report it; a token with the scope mirrors it later', async () => {
    const mirrorArgs = await freshMirrorArgs();
    const limited = { STORE_API_URL: url, STORE_API_TOKEN: await tokenOf(['products:read', 'customers:read', 'inventory:read']) };
    const init = await cli(['init', ...mirrorArgs], limited);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stderr.match(SKIPPED)?.length, init.stderr).toBe(1);
    expect(init.stdout).toMatch(/^initial sync complete \(4 of 5 resources; the others skipped, see above\)$/m);

    const status = await cli(['status', ...mirrorArgs], limited);
    expect(status.stdout).toMatch(/^products +6 records; initial sync done/m);
    expect(status.stdout).toMatch(/^orders +0 records; initial sync not started.*\n +SKIPPED since \S+: the token lacks the scope orders:read/m);
    const verify = await cli(['verify', ...mirrorArgs], limited);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    expect(verify.stdout).toMatch(/^orders +SKIPPED: the token lacks the scope orders:read; not compared$/m);
    expect(verify.stdout).toMatch(/^products +api 6 \((-?\w+)\) mirror 6 \(\1\) match$/m);
    expect(verify.stdout).not.toMatch(/^orders +api/m);

    // A token that may read orders: the next init mirrors them, and the skip is forgotten.
    const full = { STORE_API_URL: url, STORE_API_TOKEN: await tokenOf() };
    const again = await cli(['init', ...mirrorArgs], full);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^initial sync complete$/m);
    expect((await cli(['status', ...mirrorArgs], full)).stdout).not.toMatch(/SKIPPED/);
    const verified = await cli(['verify', ...mirrorArgs], full);
    expect(verified.code, verified.stdout).toBe(0);
    expect(verified.stdout).toMatch(/^orders +api 1 \((-?\w+)\) mirror 1 \(\1\) match$/m);
  }, 120_000);

  it('run keeps running and mirroring the other resources, warning once', async () => {
    const mirrorArgs = await freshMirrorArgs();
    const env = { STORE_API_URL: url, STORE_API_TOKEN: await tokenOf(['products:read', 'customers:read', 'inventory:read']), STORE_WEBHOOK_SECRET: SECRET };
    const daemon = spawn(process.execPath, [SYNC_CLI, 'run', ...mirrorArgs, '--port', '0', '--reconcile-every', '100ms'], {
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', NODE_OPTIONS: RUN_SOURCE, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => daemon.on('exit', (code) => resolve(code)));
    const stdout = new Output(daemon.stdout);
    const stderr = new Output(daemon.stderr);
    try {
      await stderr.next(/initial sync complete \(4 of 5 resources; the others skipped, see above\)/);
      // Reconcile cycles go on (each tries orders again), and a new product reaches the mirror.
      for (let i = 0; i < 3; i++) await stdout.next(/^products +pulled \d+/);
      await aProduct(t.database.db);
      await stdout.next(/^products +pulled [1-9]\d*, applied [1-9]/);
      expect(stderr.text.match(SKIPPED)?.length, stderr.text).toBe(1);
      expect(stdout.text).not.toMatch(/^orders +pulled/m);
    } finally {
      daemon.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    // (After it stopped: an embedded mirror is one process's at a time.)
    const verify = await cli(['verify', ...mirrorArgs], env);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    expect(verify.stdout).toMatch(/^products +api 7 \((-?\w+)\) mirror 7 \(\1\) match$/m);
  }, 120_000);

  it('a token that may read none of the resources fails clearly: init and run end with one line naming each resource and scope', async () => {
    const env = { STORE_API_URL: url, STORE_API_TOKEN: await tokenOf(['admin']), STORE_WEBHOOK_SECRET: SECRET };
    const none =
      /^store-api-sync: the token may read none of the resources asked for \(the service answers 403\): products needs products:read, orders needs orders:read, customers needs customers:read, inventory needs inventory:read, stock_movements needs inventory:read\. /;
    for (const command of [['init'], ['run', '--port', '0']]) {
      const result = await cli([...command, ...(await freshMirrorArgs())], env);
      expect(result.code, `${command[0]}: ${result.stderr}`).toBe(1);
      expect(result.stderr.trim().split('\n').at(-1), command[0]).toMatch(none);
    }
  }, 120_000);
});
