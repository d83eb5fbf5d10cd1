/**
 * Child processes of the real CLI (`node bin/store-api.js <role>`) for the shutdown and fleet tests:
 * spawn with an environment, wait for a line of output (an event, never a sleep), stop with a
 * signal and collect the exit code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll } from 'vitest';
import { openDatabase, type Backend } from '../../src/db/database.ts';
import { migrateToLatest, migrationNames } from '../../src/schema/migrate.ts';
import type { Database } from '../../src/db/schema.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';

export const PROJECT_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const CLI = resolve(PROJECT_ROOT, 'bin/store-api.js');

export interface StoreApiProcess {
  readonly child: ChildProcess;
  readonly name: string;
  /** All stdout and stderr so far. */
  output(): string;
  /** Resolves with the first match of `pattern` in the output (waiting for it to appear). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Resolves with the exit code (or the signal name) once the process has ended. */
  readonly exited: Promise<number | string>;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/** Base environment of a child: nothing from the developer's .env decides a test. */
export function childEnv(env: Record<string, string>): Record<string, string> {
  const base: Record<string, string> = {};
  for (const key of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'NODE_OPTIONS']) {
    if (process.env[key]) base[key] = process.env[key]!;
  }
  return { ...base, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'warn', SEED_DEMO: 'false', ...env };
}

/**
 * Starts the CLI with `args` (or, with `entry`, another script run the same way, e.g. a test's
 * wrapper of the CLI: `['--import', 'tsx', path]`).
 */
export function startStoreApi(
  args: string[],
  env: Record<string, string>,
  { name = args.join(' '), cwd = PROJECT_ROOT, prefix = [] as string[], entry = [CLI] } = {},
): StoreApiProcess {
  // `prefix`: a command the process runs under, e.g. ['prlimit', '--nofile=1024:1024'].
  const [command, ...commandArgs] = [...prefix, process.execPath, ...entry, ...args];
  const child = spawn(command!, commandArgs, { cwd, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | string>((resolveExit) => {
    child.on('exit', (code, signal) => {
      resolveExit(code ?? signal ?? -1);
      for (const listener of listeners) listener();
    });
  });
  let ended = false;
  void exited.then(() => (ended = true));

  const waitFor = (pattern: RegExp, timeoutMs = 60_000) =>
    new Promise<RegExpMatchArray>((resolveMatch, reject) => {
      const check = () => {
        const match = text.match(pattern);
        if (match) {
          done();
          resolveMatch(match);
        } else if (ended || child.exitCode !== null) {
          done();
          reject(new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}:\n${text}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${name} did not print ${pattern} within ${timeoutMs} ms:\n${text}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      listeners.add(check);
      check();
    });

  return {
    child,
    name,
    output: () => text,
    waitFor,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Waits for the "listening on http://…" line and returns the base URL. */
export async function listeningUrl(proc: StoreApiProcess, what: RegExp = /listening on (http:\/\/[^\s"]+)/): Promise<string> {
  const match = await proc.waitFor(what);
  return match[1]!.replace(/\/metrics$/, '');
}

/** Parses a Prometheus text page into `name{labels}` → value. */
export function parseMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    values.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return values;
}

/** Sum of every series of `name` whose labels contain all of `labels` (e.g. `route="/x"`). */
export function metricSum(metrics: Map<string, number>, name: string, ...labels: string[]): number {
  let sum = 0;
  for (const [series, value] of metrics) {
    const bare = series.split('{', 1)[0];
    if (bare !== name) continue;
    if (labels.every((l) => series.includes(l))) sum += value;
  }
  return sum;
}

/** The store a describe block's child processes share (`storeForProcesses`). */
export interface ProcessStore<T> {
  /** What `prepare` answered (e.g. a token). */
  readonly prepared: T;
  /** The environment pointing a child at the store (DATA_DIR or DATABASE_URL). */
  readonly env: Record<string, string>;
  /** Starts the CLI on the store; every child still running at the end is SIGKILLed. */
  start(args: string[], extra?: Record<string, string>, options?: Parameters<typeof startStoreApi>[2]): StoreApiProcess;
  /** Runs `fn` on the store from this process (embedded: only while no child holds the data directory). */
  withDatabase<R>(fn: (db: Kysely<Database>) => Promise<R>): Promise<R>;
}

/**
 * A store for the CLI's child processes of one describe block on `backend`: an embedded data
 * directory migrated here and closed again (a child must be able to lock it) or a PostgreSQL test
 * database, filled by `prepare` first. Registers its own beforeAll/afterAll: the children started
 * through it are SIGKILLed and the store is removed at the end.
 */
export function storeForProcesses<T>(backend: Backend, name: string, prepare: (db: Kysely<Database>) => Promise<T>): ProcessStore<T> {
  let dataDir: string | undefined;
  let database: TestDatabase | undefined;
  let env: Record<string, string> = {};
  let prepared: T | undefined;
  const started: StoreApiProcess[] = [];
  beforeAll(async () => {
    if (backend === 'pglite') {
      dataDir = mkdtempSync(join(tmpdir(), `store-api-${name}-`));
      const handle = await openDatabase({ dataDir, knownMigrations: migrationNames() });
      try {
        await migrateToLatest(handle.db);
        prepared = await prepare(handle.db);
      } finally {
        await handle.close();
      }
      env = { DATA_DIR: dataDir };
    } else {
      database = await openTestDatabase('postgres');
      prepared = await prepare(database.db);
      env = { DATABASE_URL: database.url! };
    }
  });
  afterAll(async () => {
    for (const proc of started) await proc.stop('SIGKILL');
    await database?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });
  return {
    get prepared() {
      return prepared as T;
    },
    get env() {
      return env;
    },
    start(args, extra = {}, options = {}) {
      const proc = startStoreApi(args, { ...env, ...extra }, options);
      started.push(proc);
      return proc;
    },
    async withDatabase(fn) {
      if (database) return fn(database.db);
      const handle = await openDatabase({ dataDir: dataDir! });
      try {
        return await fn(handle.db);
      } finally {
        await handle.close();
      }
    },
  };
}
