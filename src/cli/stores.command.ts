/**
 * `store-api stores …`: the platform operator's stores (docs/decisions/0051-stores-as-tenants.md).
 * These work across stores; every other store-scoped command takes `--store <id>`.
 */
import { userInfo } from 'node:os';
import type { Command } from 'commander';
import { commandProgress } from './command-progress.ts';
import { CliUsageError, withContext } from './run-command.ts';
import { createStore, deleteStore, getStore, isStoreId, listStores, setStoreStatus, type Store } from '../stores/store.service.ts';
import { storeSetupUrl } from '../admin/sessions/setup-code.service.ts';
import { listPlatformAudit, recordPlatformAction, type PlatformActor } from '../stores/platform-audit.ts';

const platform = { scope: 'platform' as const, whileServerRuns: 'stop the server first: the embedded database allows one process at a time' };

/** The CLI as the platform audit log's actor: the operating-system user who ran it. */
function cliActor(): PlatformActor {
  let user: string | undefined;
  try {
    user = userInfo().username;
  } catch {
    user = undefined;
  }
  return { actor: 'cli', ...(user ? { detail: `os user ${user}` } : {}) };
}

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
        await recordPlatformAction(ctx.database.db, cliActor(), 'store.created', store);
        // The first owner's one-time link (decision 0051, "Administrators per store").
        const setup = await storeSetupUrl(ctx.database.db, ctx.config, store.id);
        if (opts.json) process.stdout.write(`${JSON.stringify({ ...store, setup_url: setup.url })}\n`);
        else
          process.stdout.write(
            `Created store "${store.name}" (${store.id}).\nIts first owner opens this link (works once, until ${setup.expiresAt}):\n  ${setup.url}\nGive it a key: store-api tokens create --store ${store.id} --name <name>\n`,
          );
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
          await recordPlatformAction(ctx.database.db, cliActor(), status === 'active' ? 'store.resumed' : 'store.suspended', store);
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
        const store = await getStore(ctx.database.db, id);
        await recordPlatformAction(ctx.database.db, cliActor(), 'store.deletion_started', store);
        const progress = commandProgress(ctx.config, 'stores delete');
        try {
          const { deleted } = await deleteStore(ctx.database.db, id, ({ table, deleted }) => progress.update(deleted, deleted, table));
          progress.stop();
          await recordPlatformAction(ctx.database.db, cliActor(), 'store.deleted', store, { deleted_rows: deleted });
          process.stdout.write(`Deleted store ${id} and its ${deleted} rows.\n`);
        } finally {
          progress.stop();
        }
      }, platform),
    );

  stores
    .command('audit-log')
    .description('The platform audit log: every store created, suspended, resumed or deleted, by the platform API or this CLI, newest first')
    .option('--store-id <id>', "only this store's entries")
    .option('--limit <n>', 'entries to print (1-1000)', '50')
    .option('--json', 'print JSON lines instead of text')
    .action((opts: { storeId?: string; limit: string; json?: boolean }) =>
      withContext(async (ctx) => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
          throw new CliUsageError(`--limit must be a whole number from 1 to 1000, not "${opts.limit}". Nothing was read.`);
        if (opts.storeId !== undefined && !isStoreId(opts.storeId)) throw new CliUsageError(`--store-id must be a store id (a UUID), not "${opts.storeId}".`);
        const { data } = await listPlatformAudit(ctx.database.db, { limit, ...(opts.storeId ? { store: opts.storeId } : {}) });
        for (const entry of data) {
          process.stdout.write(
            opts.json
              ? `${JSON.stringify(entry)}\n`
              : `${entry.at}  ${entry.action.padEnd(22)}  ${entry.store_id}  ${entry.store_name}  by ${entry.actor}${entry.actor_detail ? ` (${entry.actor_detail})` : ''}\n`,
          );
        }
      }, platform),
    );
}
