/** `store-api demo generate`: fills the store with realistic demo data of a chosen size. */
import { InvalidArgumentError, type Command } from 'commander';
import { demoOrderCount, generateDemoStore } from '../demo/demo-store.ts';
import { checkRecordLimit } from '../stores/record-limits.ts';
import { commandProgress } from './command-progress.ts';
import { withContext } from './run-command.ts';

const positive =
  (name: string) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a whole number ≥ 0.`);
    return n;
  };

export function registerDemoCommands(program: Command): void {
  const demo = program.command('demo').description('Demo data');
  demo
    .command('generate')
    .description('Generate a demo store: products of every type with variants and images, customers, orders in every status, stock movements')
    .option('--products <n>', 'number of products', positive('--products'), 1000)
    .option('--customers <n>', 'number of customers (default: products / 3)', positive('--customers'))
    .option('--orders <n>', 'number of orders (default: products / 2, at most 2000)', positive('--orders'))
    .option('--seed <n>', 'random seed (same seed, same store)', positive('--seed'), 42)
    .action((opts: { products: number; customers?: number; orders?: number; seed: number }) =>
      withContext(async (ctx) => {
        // The store's record limits hold here too (decision 0051): refused before anything is written.
        await checkRecordLimit(ctx.database.db, 'products', ctx.config.STORE_MAX_PRODUCTS, opts.products);
        await checkRecordLimit(ctx.database.db, 'orders', ctx.config.STORE_MAX_ORDERS, demoOrderCount(opts.products, opts.orders));
        const progress = commandProgress(ctx.config, 'demo generate');
        const started = Date.now();
        let summary;
        try {
          summary = await generateDemoStore(ctx.database.db, { ...opts, onProgress: (d, t, phase) => progress.update(d, t, phase) });
        } finally {
          progress.stop();
        }
        process.stdout.write(
          `Generated ${summary.products} products, ${summary.customers} customers, ${summary.orders} orders in ${((Date.now() - started) / 1000).toFixed(1)} s.\n`,
        );
      }),
    );
}
