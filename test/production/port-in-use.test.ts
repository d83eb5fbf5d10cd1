/**
 * A port already in use is said before the database opens: it was reported after the
 * database had opened and migrated (26 s later on a loaded host), as a JSON stack. Now the start
 * checks the port first and stops with one line naming PORT (the worker: METRICS_PORT) and what to
 * do, exit 1, the database never opened: an empty DATA_DIR stays empty, and a test-owned proxy in
 * front of PostgreSQL sees no connection.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { hostAndPort, startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { startStoreApi, type StoreApiProcess } from './process-helpers.ts';

let occupied: Server;
let port: number;
const started: StoreApiProcess[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  occupied = createServer();
  await new Promise<void>((resolve) => occupied.listen(0, '127.0.0.1', resolve));
  port = (occupied.address() as { port: number }).port;
});
afterEach(async () => {
  for (const proc of started.splice(0)) await proc.stop('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
afterAll(async () => {
  await new Promise<void>((resolve) => occupied.close(() => resolve()));
});

function emptyDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'store-api-port-in-use-'));
  dirs.push(dir);
  return dir;
}

/** Starts `role` with `env`, waits for its exit, and returns the code and its one JSON line. */
async function failedStart(role: string, env: Record<string, string>): Promise<{ code: number | string; line: Record<string, unknown>; output: string }> {
  const proc = startStoreApi([role], env);
  started.push(proc);
  const code = await proc.exited;
  const lines = proc
    .output()
    .split('\n')
    .filter((line) => line.trim() !== '');
  expect(lines, proc.output()).toHaveLength(1);
  return { code, line: JSON.parse(lines[0]!) as Record<string, unknown>, output: proc.output() };
}

describe('a start whose port is taken (embedded)', () => {
  for (const role of ['serve', 'all']) {
    it(`\`${role}\` stops with one line naming PORT before the data directory is touched`, async () => {
      const dataDir = emptyDataDir();
      const { code, line } = await failedStart(role, { DATA_DIR: dataDir, PORT: String(port), SEED_DEMO: 'true' });
      expect(code).toBe(1);
      expect(line).toMatchObject({ level: 60, variables: ['PORT'] });
      expect(line.msg).toBe(
        `Cannot listen on 127.0.0.1:${port} (PORT=${port}, EADDRINUSE): the port is already in use (another store-api, or another server). Stop that process, or set PORT to a free port. Nothing was started.`,
      );
      expect(readdirSync(dataDir)).toEqual([]);
    });
  }

  it('`worker` stops with one line naming METRICS_PORT before the data directory is touched', async () => {
    const dataDir = emptyDataDir();
    const { code, line } = await failedStart('worker', { DATA_DIR: dataDir, METRICS_PORT: String(port) });
    expect(code).toBe(1);
    expect(line).toMatchObject({ level: 60, variables: ['METRICS_PORT'] });
    expect(line.msg).toMatch(new RegExp(`^Cannot listen on 127\\.0\\.0\\.1:${port} \\(METRICS_PORT=${port}, EADDRINUSE\\).* set METRICS_PORT to a free port`));
    expect(readdirSync(dataDir)).toEqual([]);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('a start whose port is taken (PostgreSQL)', () => {
  let proxy: TcpProxy;
  beforeAll(async () => {
    proxy = await startTcpProxy(hostAndPort(process.env.TEST_DATABASE_URL!));
  });
  afterAll(async () => {
    await proxy.close();
  });

  it('`serve` stops with one line naming PORT and never connects to the database', async () => {
    const { code, line } = await failedStart('serve', { DATABASE_URL: proxy.through(process.env.TEST_DATABASE_URL!), PORT: String(port) });
    expect(code).toBe(1);
    expect(line).toMatchObject({ level: 60, variables: ['PORT'] });
    expect(line.msg).toMatch(/\(PORT=\d+, EADDRINUSE\): the port is already in use/);
    expect(proxy.accepted).toBe(0);
  });
});
