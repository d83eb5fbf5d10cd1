/**
 * `store-api stores …`: the platform operator's stores (docs/decisions/0051-stores-as-tenants.md).
 * These work across stores; every other store-scoped command takes `--store <id>`.
 */
import type { Command } from 'commander';
import { commandProgress } from './command-progress.ts';
import { CliUsageError, withContext } from './run-command.ts';
import { createStore, deleteStore, listStores, setStoreStatus, type Store } from '../stores/store.service.ts';

const platform = { scope: 'platform' as const, whileServerRuns: 'stop the server first: the embedded database allows one process at a time' };

function line(store: Store): string {
  return `${store.id}  ${store.status.padEnd(9)}  ${store.name}  created ${store.created_at}\n`;
}

export function registerStoreCommands(program: Command): void {
  const stores = program.command('stores').description('Create, list, suspend, resume and delete the stores of this deployment');

  stores
    .command('create')
    .description('Create a store; its id is what `--store` takes (`tokens create --store <id>`, `demo generate --store <id>`)')
    .requiredOption('--name <name>', 'the store name, unique in the deployment (1-200 characters)')
    .option('--json', 'print JSON instead of text')
    .action((opts: { name: string; json?: boolean }) =>
      withContext(async (ctx) => {
        const store = await createStore(ctx.database.db, { name: opts.name });
        if (opts.json) process.stdout.write(`${JSON.stringify(store)}\n`);
        else process.stdout.write(`Created store "${store.name}" (${store.id}).\nGive it a key: store-api tokens create --store ${store.id} --name <name>\n`);
      }, platform),
    );

  stores
    .command('list')
    .description('List the stores, oldest first')
    .option('--json', 'print JSON instead of a table')
    .action((opts: { json?: boolean }) =>
      withContext(async (ctx) => {
        const all = await listStores(ctx.database.db);
        if (opts.json) process.stdout.write(`${JSON.stringify(all)}\n`);
        else for (const store of all) process.stdout.write(line(store));
      }, platform),
    );

  for (const [name, status, description] of [
    ['suspend', 'suspended', 'Suspend a store: its keys are answered 403 store_suspended and its webhook deliveries wait until it is resumed'],
    ['resume', 'active', 'Resume a suspended store'],
  ] as const) {
    stores
      .command(name)
      .description(description)
      .argument('<id>', 'the store id')
      .action((id: string) =>
        withContext(async (ctx) => {
          const store = await setStoreStatus(ctx.database.db, id, status);
          process.stdout.write(`Store "${store.name}" (${store.id}) is ${store.status}.\n`);
        }, platform),
      );
  }

  stores
    .command('delete')
    .description('Erase a store and every row it owns, in steps that give way to other stores; run it again to finish one that was interrupted')
    .argument('<id>', 'the store id')
    .option('--yes', 'confirm: the store and all its data are erased for good')
    .action((id: string, opts: { yes?: boolean }) =>
      withContext(async (ctx) => {
        if (!opts.yes) throw new CliUsageError(`Deleting a store erases all its data for good: run it again with --yes to confirm. Nothing was deleted.`);
        const progress = commandProgress(ctx.config, 'stores delete');
        try {
          const { deleted } = await deleteStore(ctx.database.db, id, ({ table, deleted }) => progress.update(deleted, deleted, table));
          progress.stop();
          process.stdout.write(`Deleted store ${id} and its ${deleted} rows.\n`);
        } finally {
          progress.stop();
        }
      }, platform),
    );
}
