/**
 * `store-api` command line. Every command is one file in src/cli/; this file only wires them.
 * Run `store-api --help` for the list.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { CREATE_OPTION_HELP, STORE_OPTION_HELP, allowStoreCreation, selectStore } from '../cli/run-command.ts';
import { registerStoreCommands } from '../cli/stores.command.ts';
import { registerServerCommands } from '../cli/server.command.ts';
import { registerTokenCommands } from '../cli/tokens.command.ts';
import { registerDatabaseCommands } from '../cli/database.command.ts';
import { registerDemoCommands } from '../cli/demo.command.ts';
import { registerAdminCommands } from '../cli/admin.command.ts';
import { registerDocumentsCommands } from '../cli/documents.command.ts';
import { registerInventoryCommands } from '../cli/inventory.command.ts';

// package.json is two folders up from both src/main/ and dist/main/.
const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const program = new Command();
program
  .name('store-api')
  .version(version, '-V, --version', 'Print the version (package.json) and exit')
  .description("Store Integration API: read API, exports and webhooks for a store's data.\nConfiguration comes from environment variables (see README).")
  .showHelpAfterError();

registerServerCommands(program);
registerDatabaseCommands(program);
registerTokenCommands(program);
registerDemoCommands(program);
registerAdminCommands(program);
registerDocumentsCommands(program);
registerStoreCommands(program);
registerInventoryCommands(program);

// Every command that opens the store but does not start a server takes --create (cli/run-command.ts).
const SERVER_ROLES = new Set(['all', 'serve', 'worker']);
const leaves = (command: Command): Command[] => (command.commands.length === 0 ? [command] : command.commands.flatMap(leaves));
for (const command of program.commands.flatMap(leaves)) if (!SERVER_ROLES.has(command.name())) command.option('--create', CREATE_OPTION_HELP);
// Every command that acts in one store takes --store (cli/run-command.ts); `stores …` and `migrate` work across stores.
const ACROSS_STORES = new Set(['stores', 'migrate']);
for (const command of program.commands.filter((c) => !ACROSS_STORES.has(c.name())).flatMap(leaves)) {
  if (!SERVER_ROLES.has(command.name()) && !ACROSS_STORES.has(command.name())) command.option('--store <id>', STORE_OPTION_HELP);
}
program.hook('preAction', (_program, action) => {
  allowStoreCreation(action.opts().create === true);
  selectStore(action.opts().store as string | undefined);
});

await program.parseAsync(process.argv);
