/**
 * Child processes of the real CLI (`node bin/store-api.js <role>`) for the shutdown and fleet tests:
 * spawn with an environment, wait for a line of output (an event, never a sleep), stop with a
 * signal and collect the exit code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';

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
