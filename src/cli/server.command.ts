/**
 * Process roles: `serve` (HTTP API only), `worker` (event poller + webhook dispatcher + retention
 * pruner + import jobs' runner only) and `all` (both; what `npm start` runs). Every role migrates the schema at start (idempotent; on
 * PostgreSQL concurrent starts serialise on Kysely's migration lock, and a fleet runs
 * `store-api migrate` before rolling out).
 *
 * Shutdown on SIGTERM/SIGINT, in this order:
 *   1. the HTTP server stops accepting (listener closed, idle keep-alive sockets closed, new requests
 *      on open sockets answered 503) and in-flight requests — streamed exports included — finish;
 *      at the same time the worker stops claiming deliveries and finishes the ones in flight, the
 *      pruner finishes its batch, and an import job finishes its step and goes back to the queue;
 *   2. the worker's metrics listener closes, then the database;
 *   3. exit 0. If that takes longer than SHUTDOWN_TIMEOUT_MS the process exits 1, and the deliveries
 *      it abandoned are retried by another worker when their lease ends (at-least-once).
 * A start checks the port it listens on (PORT; the worker's METRICS_PORT) before it opens the
 * database, and stops at once with one line naming the variable when it is taken (ops/listen-port.ts).
 * A signal during start-up is honoured as soon as the start has finished (a start still waiting
 * for a slow PostgreSQL stops waiting at once, main/runtime.ts). When the embedded database
 * fails for good (it could not write its log: a full disk), the same stop runs and the process exits
 * 75 with the reason on stderr, for its supervisor to restart it once space is freed.
 */
import { activeTracing } from '../shared/tracing.ts';
import type { Command } from 'commander';
import type { FastifyInstance } from 'fastify';
import type { App } from '../app.ts';
import type { AppContext } from '../app-context.ts';
import { EnvSchema, loadConfig, publicUrl } from '../config/config.ts';
import { createLogger, openContext } from '../main/runtime.ts';
import { seedDemoStoreIfEmpty } from '../demo/demo-seed.ts';
import type { WebhookWorker } from '../webhooks/webhook-worker.ts';
import type { RetentionPruner } from '../retention/retention-pruner.ts';
import type { ImportJobRunner } from '../inventory/import-job-runner.ts';
import { exitWithError, machineOutput } from './run-command.ts';
import { checkPortFree, listenFailure } from '../ops/listen-port.ts';
import { adminSignInAnnouncements } from '../admin/dashboard/sign-in-hint.ts';
import { createAnnouncer, failureLine } from '../ops/announce.ts';
import { applyHeapGrowing, useBaselineWasmCompiler } from '../ops/heap-tuning.ts';
import { DEMO_TEMPLATE_PRODUCTS } from '../demo/demo-template.ts';
import { EXIT_STORE_CANNOT_WRITE } from '../db/storage-health.ts';
import { PGLITE_DEMO_TEMPLATE_DIR, PGLITE_TEMPLATE_DIR } from '../db/pglite-template.ts';

/**
 * The dashboard's address and, on a store without administrators, its one-time setup link. The
 * process is already listening: a database fault here (a terminated backend, a failover) is retried
 * and, if it lasts, logged, never the end of a serving process (`store-api admin` creates the first
 * administrator without the link).
 */
async function signInAnnouncementsRetried(ctx: AppContext, app: Parameters<typeof adminSignInAnnouncements>[1]) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await adminSignInAnnouncements(ctx, app);
    } catch (error) {
      if (attempt >= 5) {
        ctx.logger.warn({ err: error }, 'could not read the administrators to announce the dashboard; `store-api admin create` makes the first one');
        return [];
      }
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  }
}

// The app, the worker and their plugins are imported when a role starts, not for every CLI command.
type Role = 'serve' | 'worker' | 'all';

interface Running {
  ctx?: AppContext;
  app?: App;
  worker?: WebhookWorker;
  pruner?: RetentionPruner;
  importJobs?: ImportJobRunner;
  opsServer?: FastifyInstance;
  /** Stops the descriptor watch (ops/connection-limits.ts). */
  stopDescriptorWatch?: () => void;
}

/** Releases what `running` holds, in the order of the file comment. */
async function stopAll(running: Running): Promise<void> {
  running.stopDescriptorWatch?.();
  await Promise.all([running.app?.close(), running.worker?.stop(), running.pruner?.stop(), running.importJobs?.stop()]);
  await running.opsServer?.close();
  await running.ctx?.database.close();
  // The spans still buffered go to the collector before the process exits (decision 0052).
  await activeTracing()?.shutdown();
}

async function run(role: Role): Promise<void> {
  const running: Running = {};
  let starting = true;
  let stopRequested: string | undefined;
  let stopping = false;

  const shutdown = async (signal: string, exitCode = 0) => {
    if (stopping) return;
    stopping = true;
    const logger = running.ctx?.logger;
    logger?.info({ signal, role }, 'shutting down: finishing in-flight requests and deliveries');
    const timeoutMs = running.ctx?.config.SHUTDOWN_TIMEOUT_MS ?? 25_000;
    const timer = setTimeout(() => {
      logger?.error({ timeoutMs }, 'shutdown timed out; exiting with work abandoned');
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    try {
      await stopAll(running);
      logger?.info({ role }, 'shut down cleanly');
      await new Promise<void>((resolve) => (logger ? logger.flush(() => resolve()) : resolve()));
      process.exit(exitCode);
    } catch (error) {
      logger?.error({ err: error }, 'shutdown failed');
      process.exit(exitCode || 1);
    }
  };
  // Aborted by a signal during the start: a start waiting for a slow database stops waiting.
  const startAborted = new AbortController();
  const onSignal = (signal: string) => {
    if (starting) {
      stopRequested ??= signal;
      startAborted.abort(signal);
    } else void shutdown(signal);
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));

  try {
    const config = loadConfig();
    // A port already taken is said before the database opens (which can take long), not after.
    if (role !== 'worker') await checkPortFree('PORT', config.HOST, config.PORT);
    if (role === 'worker' && config.METRICS_PORT !== undefined) await checkPortFree('METRICS_PORT', config.HOST, config.METRICS_PORT);
    applyHeapGrowing(config.HEAP_GROWING_PERCENT);
    // Before the embedded database's WebAssembly is compiled (the first open, just below).
    if (!config.DATABASE_URL && !config.PGLITE_WASM_OPTIMIZING) useBaselineWasmCompiler();
    // The default demo store of a first start comes ready-made from the build (demo/demo-template.ts).
    const demoTemplate =
      role === 'all' && config.SEED_DEMO && config.SEED_DEMO_PRODUCTS === DEMO_TEMPLATE_PRODUCTS
        ? { template: [PGLITE_DEMO_TEMPLATE_DIR, PGLITE_TEMPLATE_DIR] }
        : {};
    // The HTTP app's modules load on this thread while the embedded database opens in its own
    // (decision 0030): a start, a restart after a crash above all, overlaps the two.
    const appModule = role !== 'worker' ? import('../app.ts') : undefined;
    appModule?.catch(() => {});
    // PostgreSQL: the modules load first. Loading them holds this thread for seconds on a CPU-starved
    // host, and a connection opened meanwhile timed out before its answer was read;
    // opening a connection overlaps nothing worth having.
    if (config.DATABASE_URL) await appModule;
    running.ctx = await openContext(config, createLogger(config), { applicationName: `store-api-${role}`, signal: startAborted.signal, ...demoTemplate });
    const ctx = running.ctx;
    // Every role: a warning (log and gauge) when open descriptors near the process's limit.
    const { watchDescriptors } = await import('../ops/connection-limits.ts');
    running.stopDescriptorWatch = watchDescriptors(ctx.logger);
    // Text on a terminal, JSON lines (credentials flagged as secrets) anywhere else (ops/announce.ts).
    const announce = createAnnouncer({ logLevel: config.LOG_LEVEL });
    // The embedded database could not write its log (a full disk) and cannot recover in this process
    // (db/storage-health.ts): stop like on SIGTERM, then exit non-zero so a supervisor restarts it.
    ctx.database.storage.onFatal((reason) => {
      ctx.logger.fatal({ exitCode: EXIT_STORE_CANNOT_WRITE }, `${reason} Exiting with code ${EXIT_STORE_CANNOT_WRITE} so a supervisor restarts the process.`);
      const line = `store-api: ${reason} Exiting with code ${EXIT_STORE_CANNOT_WRITE}.`;
      process.stderr.write(machineOutput() ? failureLine(line, { exitCode: EXIT_STORE_CANNOT_WRITE }) : `${line}\n`);
      if (starting) stopRequested ??= 'store-cannot-write';
      else void shutdown('store-cannot-write', EXIT_STORE_CANNOT_WRITE);
    });

    if (role !== 'worker') {
      if (role === 'all' && config.SEED_DEMO) {
        const seeded = await seedDemoStoreIfEmpty(ctx, { products: config.SEED_DEMO_PRODUCTS, progress: process.stdout.isTTY, announce });
        if (seeded) {
          const counts = { products: seeded.products, orders: seeded.orders, customers: seeded.customers };
          announce({
            text: `\nSeeded a demo store: ${seeded.products} products, ${seeded.orders} orders, ${seeded.customers} customers.\n`,
            msg: `seeded a demo store: ${seeded.products} products, ${seeded.orders} orders, ${seeded.customers} customers`,
            fields: counts,
          });
          announce({
            text:
              `Demo API token (all read scopes; shown once):\n\n  ${seeded.token}\n\n` +
              `Try: curl -H "Authorization: Bearer ${seeded.token}" ${publicUrl(config)}/api/v1/products?limit=2\n\n`,
            msg: 'demo API token (all read scopes; shown once) in secret_value; send it as "Authorization: Bearer <token>"',
            secret: { kind: 'demo_token', value: seeded.token },
          });
        }
      }
      const { buildApp } = await (appModule ?? import('../app.ts'));
      running.app = await buildApp(ctx);
      await running.app.listen({ port: config.PORT, host: config.HOST }).catch((error: unknown) => {
        throw listenFailure(error, 'PORT', config.HOST, config.PORT);
      });
      const port = (running.app.server.address() as { port: number }).port;
      const url = publicUrl(config, port);
      announce({ text: `Store Integration API listening on ${url}\n`, msg: `Store Integration API listening on ${url}`, fields: { url } });
      for (const announcement of await signInAnnouncementsRetried(ctx, running.app)) announce(announcement);
    }
    if (role !== 'serve') {
      const { startWebhookWorker } = await import('../webhooks/webhook-worker.ts');
      running.worker = await startWebhookWorker(ctx);
      const { startRetentionPruner } = await import('../retention/retention-pruner.ts');
      running.pruner = startRetentionPruner(ctx);
      const { startImportJobRunner } = await import('../inventory/import-job-runner.ts');
      running.importJobs = startImportJobRunner(ctx);
      if (role === 'worker' && config.METRICS_PORT !== undefined) {
        const { buildOpsServer } = await import('../ops/ops-server.ts');
        running.opsServer = await buildOpsServer(ctx);
        const metricsPort = config.METRICS_PORT;
        await running.opsServer.listen({ port: metricsPort, host: config.HOST }).catch((error: unknown) => {
          throw listenFailure(error, 'METRICS_PORT', config.HOST, metricsPort);
        });
        const port = (running.opsServer.server.address() as { port: number }).port;
        const url = `${publicUrl(config, port)}/metrics`;
        announce({ text: `Worker metrics listening on ${url}\n`, msg: `Worker metrics listening on ${url}`, fields: { url } });
      }
      announce({ text: 'Webhook worker started\n', msg: 'Webhook worker started' });
    }
  } catch (error) {
    await stopAll(running).catch(() => {});
    exitWithError(error, { json: machineOutput() });
  }
  starting = false;
  if (stopRequested) void shutdown(stopRequested, running.ctx?.database.storage.fatal ? EXIT_STORE_CANNOT_WRITE : 0);
}

/** The environment variables of the configuration schema (config/config.ts), one line each, for `--help`. */
export function environmentHelp(): string {
  const entries = Object.entries(EnvSchema.properties) as [string, { description?: string; default?: unknown }][];
  const width = Math.max(...entries.map(([name]) => name.length)) + 2;
  const lines = entries.map(([name, schema]) => {
    const fallback = schema.default === undefined || schema.default === '' ? '' : ` (default ${String(schema.default)})`;
    return `  ${name.padEnd(width)}${schema.description ?? ''}${fallback}`;
  });
  return `\nEnvironment variables (also read from ./.env; the environment wins):\n${lines.join('\n')}\n`;
}

export function registerServerCommands(program: Command): void {
  const roles: [Role, string][] = [
    ['all', 'Run the HTTP API and the webhook worker in one process (what npm start runs)'],
    ['serve', 'Run the HTTP API only'],
    ['worker', 'Run the event poller and webhook dispatcher only'],
  ];
  for (const [role, description] of roles) {
    program
      .command(role)
      .description(description)
      .addHelpText('after', environmentHelp)
      .action(() => run(role));
  }
}
