/**
 * What the dashboard's browser test runs against: the real service as a child process
 * (`node bin/store-api.js all` on a fresh embedded data directory), a loopback webhook receiver, and
 * Debian's Chromium driven by playwright-core. Everything is awaited on events (a line on stdout, a
 * request at the receiver), never on a guessed delay.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';
import { join } from 'node:path';
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

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** What every page of a browser test is held to, collected for the test to assert at the end. */
export interface PageChecks {
  consoleErrors: string[];
  a11yViolations: string[];
  sidewaysScroll: string[];
  /** HTTP errors provoked on purpose (Chromium logs each failed fetch as a console error): set while provoking them. */
  provoking: boolean;
  /** Collects the page's console errors and uncaught errors, and sets its default timeout. */
  watch(page: Page, who: string): void;
  /** axe (WCAG 2.1 A/AA) and sideways scrolling of the page as it is now. */
  checkPage(page: Page, where: string): Promise<void>;
  /** A screenshot for the docs (notifications dismissed first). */
  shot(page: Page, name: string): Promise<void>;
}

export function pageChecks(screenshots: string, timeoutMs: number): PageChecks {
  const checks = { consoleErrors: [] as string[], a11yViolations: [] as string[], sidewaysScroll: [] as string[], provoking: false } as PageChecks;

  const watch: PageChecks['watch'] = (page: Page, who: string) => {
    page.setDefaultTimeout(timeoutMs);
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      if (checks.provoking && /the server responded with a status of 4\d\d/.test(m.text())) return;
      checks.consoleErrors.push(`${who}: ${m.text()} (${m.location().url})`);
    });
    page.on('pageerror', (e) => checks.consoleErrors.push(`${who} uncaught: ${e.message}`));
  };
  const checkPage: PageChecks['checkPage'] = async (page: Page, where: string) => {
    // A notification fading in (0.18 s) is measured half transparent: axe would report its text's
    // contrast as it is during the fade. Finite animations end first (spinners run on).
    await page.evaluate(() =>
      Promise.all(
        document
          .getAnimations()
          .filter((a) => a.effect?.getComputedTiming().iterations !== Number.POSITIVE_INFINITY)
          .map((a) => a.finished.catch(() => undefined)),
      ),
    );
    await page.evaluate(AXE_SOURCE);
    const found = await page.evaluate(async () => {
      const axe = (
        window as unknown as {
          axe: { run(ctx: Document, o: object): Promise<{ violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }> }> };
        }
      ).axe;
      const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
      return result.violations.map(
        (v) =>
          `${v.impact} ${v.id} (${v.nodes
            .map((n) => n.target.join(' '))
            .slice(0, 3)
            .join(', ')})`,
      );
    });
    checks.a11yViolations.push(...found.map((v) => `${where}: ${v}`));
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    if (overflow > 0) {
      const culprits = await page.evaluate(() =>
        Array.from(document.querySelectorAll('body *'))
          .filter(
            (el) =>
              el.getBoundingClientRect().right > window.innerWidth + 1 &&
              !(el.parentElement && el.parentElement.getBoundingClientRect().right > window.innerWidth + 1),
          )
          .slice(0, 3)
          .map((el) => `${el.tagName.toLowerCase()}.${Array.from(el.classList).join('.')}`),
      );
      checks.sidewaysScroll.push(`${where}: ${overflow}px (${culprits.join(', ')})`);
    }
  };
  const shot: PageChecks['shot'] = async (page: Page, name: string) => {
    for (const b of await page.locator('#toasts .toast-close').all()) await b.click({ timeout: 2000 }).catch(() => {});
    await page.screenshot({ path: join(screenshots, `${name}.png`), animations: 'disabled' });
  };
  return Object.assign(checks, { watch, checkPage, shot });
}
