/**
 * `store-api` command line. Every command is one file in src/cli/; this file only wires them.
 * Run `store-api --help` for the list.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { registerServerCommands } from '../cli/server.command.ts';
import { registerTokenCommands } from '../cli/tokens.command.ts';
import { registerDatabaseCommands } from '../cli/database.command.ts';
import { registerDemoCommands } from '../cli/demo.command.ts';
import { registerAdminCommands } from '../cli/admin.command.ts';
import { registerDocumentsCommands } from '../cli/documents.command.ts';

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

await program.parseAsync(process.argv);
