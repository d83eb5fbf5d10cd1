/**
 * What the dashboard's browser test runs against: the real service as a child process
 * (`node bin/store-api.js all` on a fresh embedded data directory), a loopback webhook receiver, and
 * Debian's Chromium driven by playwright-core. Everything is awaited on events (a line on stdout, a
 * request at the receiver), never on a guessed delay.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';

export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = fileURLToPath(new URL('../../bin/store-api.js', import.meta.url));

/** Environment of the child processes: only what we set, plus PATH/HOME; never a database URL. */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...env };
}

/** Runs a `store-api` CLI command to completion. */
export async function runCli(args: string[], env: Record<string, string>): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, env: childEnv(env), timeout: 120_000 });
}

/** A free TCP port on 127.0.0.1 (asked of the OS, then released for the child to take). */
export async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  probe.close();
  await once(probe, 'close');
  return port;
}

export interface RunningServer {
  url: string;
  output(): string;
  stop(): Promise<void>;
}

/** Starts `store-api all` and resolves once its output matches `ready` (default: it listens). */
export async function startServer(env: Record<string, string>, ready = /listening on http:\/\/\S+/): Promise<RunningServer> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [CLI, 'all'], {
    cwd: REPO_ROOT,
    env: childEnv({ HOST: '127.0.0.1', PORT: String(port), ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = once(child, 'exit');
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (ready.test(output)) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    exited.then(([code]) => reject(new Error(`store-api exited (${code}) before listening:\n${output}`)), reject);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}

export interface ReceivedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: { id: string; type: string; data: unknown };
  answered: number;
}

/** A webhook receiver on 127.0.0.1 whose answer per path can be switched during the test. */
export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  private readonly statusByPath = new Map<string, number>();
  private readonly waiters: Array<{ match: (r: ReceivedRequest) => boolean; resolve: (r: ReceivedRequest) => void }> = [];
  private server?: Server;
  url = '';

  /** The HTTP status answered to requests for `path` (default 200). */
  answer(path: string, status: number): void {
    this.statusByPath.set(path, status);
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = (req.url ?? '/').split('?')[0]!;
        const status = this.statusByPath.get(path) ?? 200;
        const body = Buffer.concat(chunks).toString();
        let json: ReceivedRequest['json'];
        try {
          json = JSON.parse(body);
        } catch {
          json = { id: '', type: '', data: null };
        }
        const received: ReceivedRequest = { path, headers: req.headers, body, json, answered: status };
        this.requests.push(received);
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(status < 300 ? '{"ok":true}' : '{"error":"receiver is failing on purpose"}');
        for (const waiter of [...this.waiters]) {
          if (waiter.match(received)) {
            this.waiters.splice(this.waiters.indexOf(waiter), 1);
            waiter.resolve(received);
          }
        }
      });
    });
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The first request (already received or still to come) that `match` accepts, answered with `status`. */
  next(match: (r: ReceivedRequest) => boolean, { status }: { status?: number } = {}): Promise<ReceivedRequest> {
    const accept = (r: ReceivedRequest) => match(r) && (status === undefined || r.answered === status);
    const seen = this.requests.find(accept);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ match: accept, resolve }));
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close');
  }
}
