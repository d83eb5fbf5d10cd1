/**
 * A start waits out a slow host instead of dying of it: on a CPU-starved host `serve` on
 * PostgreSQL exited at start with "Connection terminated due to connection timeout", its first
 * connection timed out while the process was busy loading its modules. A test-owned TCP proxy in
 * front of PostgreSQL holds the first connections silent, so each times out
 * (DATABASE_CONNECT_TIMEOUT_MS, shrunk here), then passes traffic: `serve` tries again, logs each
 * try, comes up and is ready. A database still silent at DATABASE_START_TIMEOUT_MS, or a signal,
 * ends the start with the message naming DATABASE_URL; a clear refusal (a missing database) ends
 * it at once, after one connection. PostgreSQL only: the embedded database has no connection.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { hostAndPort, startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { listeningUrl, startStoreApi, type StoreApiProcess } from './process-helpers.ts';

const BASE = process.env.TEST_DATABASE_URL;
const RETRY_LINE = /did not answer within DATABASE_CONNECT_TIMEOUT_MS \(250 ms\) or is starting up; trying again until DATABASE_START_TIMEOUT_MS/;

/** The JSON log lines of `output` (stdout and stderr). */
function jsonLines(output: string): { level: number; msg: string; [field: string]: unknown }[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));
}

describe.skipIf(!BASE)('a start on PostgreSQL whose connections time out', () => {
  let database: TestDatabase;
  let proxy: TcpProxy | undefined;
  let proc: StoreApiProcess | undefined;

  beforeAll(async () => {
    database = await openTestDatabase('postgres', { poolSize: 1 });
  });
  afterEach(async () => {
    await proc?.stop('SIGKILL');
    await proxy?.close();
    proc = undefined;
    proxy = undefined;
  });
  afterAll(async () => {
    await database?.close();
  });

  const start = (role: string, env: Record<string, string>) =>
    startStoreApi([role], { DATABASE_CONNECT_TIMEOUT_MS: '250', ...env, DATABASE_URL: proxy!.through(env.DATABASE_URL ?? database.url!) });

  it('`serve` tries again while connections time out, then comes up ready', async () => {
    proxy = await startTcpProxy(hostAndPort(database.url!), { holdFirst: 2 });
    proc = start('serve', {});
    const url = await listeningUrl(proc);
    const ready = await request(`${url}/readyz`);
    expect(ready.statusCode).toBe(200);
    expect(await ready.body.json()).toMatchObject({ status: 'ready' });
    expect(proxy.held).toBe(2);
    const retries = jsonLines(proc.output()).filter((line) => RETRY_LINE.test(line.msg));
    expect(retries).toHaveLength(2);
    expect(retries.map((line) => line.attempt)).toEqual([1, 2]);
    expect(retries[0]!.level).toBe(40);
  });

  it('a database still silent at DATABASE_START_TIMEOUT_MS ends the start, naming DATABASE_URL and how long it tried', async () => {
    proxy = await startTcpProxy(hostAndPort(database.url!), { holdFirst: Number.POSITIVE_INFINITY });
    proc = start('serve', { DATABASE_START_TIMEOUT_MS: '1500' });
    expect(await proc.exited).toBe(1);
    const failure = jsonLines(proc.output()).find((line) => line.level === 60)!;
    expect(failure.msg).toMatch(/^Cannot open the database \(DATABASE_URL/);
    expect(failure.msg).toMatch(/timeout/);
    expect(failure.msg).toMatch(/Tried \d+ times? in \d+ s \(DATABASE_START_TIMEOUT_MS=1500\)/);
    expect(proxy.held).toBeGreaterThanOrEqual(1);
    expect(proc.output()).not.toMatch(/listening on/);
  });

  it('SIGTERM while the start waits for the database stops it at once', async () => {
    proxy = await startTcpProxy(hostAndPort(database.url!), { holdFirst: Number.POSITIVE_INFINITY });
    proc = start('serve', { DATABASE_START_TIMEOUT_MS: '600000' });
    await proc.waitFor(RETRY_LINE);
    expect(await proc.stop('SIGTERM')).toBe(1);
    const failure = jsonLines(proc.output()).find((line) => line.level === 60)!;
    expect(failure.msg).toMatch(/^Cannot open the database \(DATABASE_URL/);
    expect(failure.msg).toMatch(/The start was stopped \(SIGTERM\)/);
  });

  it('a clear refusal (a missing database) ends the start at once, after one connection', async () => {
    proxy = await startTcpProxy(hostAndPort(database.url!));
    const missing = new URL(database.url!);
    missing.pathname = '/store_api_no_such_database';
    proc = start('serve', { DATABASE_URL: missing.toString() });
    expect(await proc.exited).toBe(1);
    const failure = jsonLines(proc.output()).find((line) => line.level === 60)!;
    expect(failure.msg).toMatch(/DATABASE_URL/);
    expect(failure.msg).toMatch(/does not exist/);
    expect(proc.output()).not.toMatch(RETRY_LINE);
    expect(proxy.accepted).toBe(1);
  });
});
