/**
 * Shared set-up of the webhook integration tests: the real app on a fresh database of one back end
 * with shrunk webhook intervals, an admin token, a worker in the same process, and helpers to
 * register endpoints and wait for the worker's typed events.
 */
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import type { Backend } from '../../src/db/database.ts';
import { startWebhookWorker, type AttemptReport, type WebhookWorker } from '../../src/webhooks/webhook-worker.ts';

/** Defaults for tests: everything in milliseconds instead of minutes. */
export const FAST_WEBHOOKS: Record<string, string> = {
  WEBHOOK_POLL_INTERVAL_MS: '50',
  WEBHOOK_RETRY_SCHEDULE_MS: '60000,60000,60000,60000,60000',
  // Generous: a loaded CI machine must not turn a slow 200 into a failed attempt.
  WEBHOOK_TIMEOUT_MS: '5000',
  WEBHOOK_LEASE_MS: '10000',
  WEBHOOK_BREAKER_THRESHOLD: '10',
  WEBHOOK_BREAKER_PAUSE_MS: '60000',
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
};

export interface WebhookTestKit {
  t: TestApp;
  admin: { authorization: string };
  worker: WebhookWorker;
  startWorker(): Promise<WebhookWorker>;
  api<T = any>(method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown): Promise<{ status: number; body: T }>;
  createEndpoint(url: string, extra?: Record<string, unknown>): Promise<{ id: string; secret: string }>;
  close(): Promise<void>;
}

export async function webhookTestKit(
  backend: Backend,
  env: Record<string, string> = {},
  { worker = true, logLines }: { worker?: boolean; logLines?: string[] } = {},
): Promise<WebhookTestKit> {
  const t = await buildTestApp(backend, { ...FAST_WEBHOOKS, ...env }, { logLines });
  const admin = await t.auth(['admin']);
  const workers: WebhookWorker[] = [];
  const kit: WebhookTestKit = {
    t,
    admin,
    worker: undefined as unknown as WebhookWorker,
    async startWorker() {
      const w = await startWebhookWorker(t.ctx, { listenUrl: t.database.url });
      workers.push(w);
      return w;
    },
    async api(method, url, body) {
      const res = await t.app.inject({ method, url: `/admin/api/v1${url}`, headers: admin, ...(body === undefined ? {} : { payload: body as object }) });
      return { status: res.statusCode, body: res.body ? res.json() : (undefined as never) };
    },
    async createEndpoint(url, extra = {}) {
      const res = await kit.api('POST', '/webhooks/endpoints', { url, ...extra });
      if (res.status !== 201) throw new Error(`create endpoint: ${res.status} ${JSON.stringify(res.body)}`);
      return { id: res.body.data.id, secret: res.body.data.secret };
    },
    async close() {
      for (const w of workers) await w.stop();
      await t.close();
    },
  };
  if (worker) kit.worker = await kit.startWorker();
  return kit;
}

/** Resolves with the worker's attempt reports once `predicate` holds for `n` of them (from now on). */
export function waitForAttempts(
  worker: WebhookWorker,
  n: number,
  predicate: (r: AttemptReport) => boolean = () => true,
  timeoutMs = 30_000,
): Promise<AttemptReport[]> {
  return new Promise((resolve, reject) => {
    const seen: AttemptReport[] = [];
    const timer = setTimeout(() => {
      worker.events.off('attempt', listener);
      reject(new Error(`saw ${seen.length} of ${n} matching attempts within ${timeoutMs} ms`));
    }, timeoutMs);
    const listener = (report: AttemptReport) => {
      if (!predicate(report)) return;
      seen.push(report);
      if (seen.length >= n) {
        clearTimeout(timer);
        worker.events.off('attempt', listener);
        resolve(seen);
      }
    };
    worker.events.on('attempt', listener);
  });
}
