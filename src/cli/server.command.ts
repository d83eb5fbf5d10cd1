/**
 * Process roles: `serve` (HTTP API only), `worker` (event poller + webhook dispatcher only) and
 * `all` (both; what `npm start` runs). On SIGTERM/SIGINT: stop accepting, finish in-flight requests
 * and deliveries, close the database, exit 0.
 */
import type { Command } from 'commander';
import { buildApp, type App } from '../app.ts';
import type { AppContext } from '../app-context.ts';
import { loadConfig, publicUrl } from '../config/config.ts';
import { createLogger, openContext } from '../main/runtime.ts';
import { seedDemoStoreIfEmpty } from '../demo/demo-seed.ts';
import { startWebhookWorker, type WebhookWorker } from '../webhooks/webhook-worker.ts';
import { exitWithError } from './run-command.ts';
import { adminSignInHint } from '../admin/dashboard/sign-in-hint.ts';

type Role = 'serve' | 'worker' | 'all';

async function run(role: Role): Promise<void> {
  let ctx: AppContext;
  try {
    const config = loadConfig();
    ctx = await openContext(config, createLogger(config), { applicationName: `store-api-${role}` });
  } catch (error) {
    exitWithError(error);
  }
  const { config, logger } = ctx;
  let app: App | undefined;
  let worker: WebhookWorker | undefined;

  if (role !== 'worker') {
    if (role === 'all' && config.SEED_DEMO) {
      const seeded = await seedDemoStoreIfEmpty(ctx, { products: config.SEED_DEMO_PRODUCTS, progress: process.stdout.isTTY });
      if (seeded) {
        process.stdout.write(
          `\nSeeded a demo store: ${seeded.products} products, ${seeded.orders} orders, ${seeded.customers} customers.\n` +
            `Demo API token (all read scopes; shown once):\n\n  ${seeded.token}\n\n` +
            `Try: curl -H "Authorization: Bearer ${seeded.token}" ${publicUrl(config)}/api/v1/products?limit=2\n\n`,
        );
      }
    }
    app = await buildApp(ctx);
    await app.listen({ port: config.PORT, host: config.HOST });
    process.stdout.write(`Store Integration API listening on ${publicUrl(config, (app.server.address() as { port: number }).port)}\n`);
    process.stdout.write(await adminSignInHint(ctx, app));
  }
  if (role !== 'serve') {
    worker = await startWebhookWorker(ctx);
    logger.info('webhook worker started');
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error('shutdown timed out; exiting');
      process.exit(1);
    }, config.SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    try {
      await app?.close();
      await worker?.stop();
      await ctx.database.close();
      process.exit(0);
    } catch (error) {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

export function registerServerCommands(program: Command): void {
  program.command('all').description('Run the HTTP API and the webhook worker in one process (what npm start runs)').action(() => run('all'));
  program.command('serve').description('Run the HTTP API only').action(() => run('serve'));
  program.command('worker').description('Run the event poller and webhook dispatcher only').action(() => run('worker'));
}
