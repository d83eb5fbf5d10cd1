/** `store-api migrate`: applies pending migrations (exits non-zero on failure). */
import type { Command } from 'commander';
import { withContext } from './run-command.ts';
import { pendingMigrations } from '../db/migrate.ts';

export function registerDatabaseCommands(program: Command): void {
  program
    .command('migrate')
    .description('Apply pending database migrations (the embedded default also migrates at start)')
    .action(() =>
      withContext(async (ctx) => {
        const pending = await pendingMigrations(ctx.database.db);
        process.stdout.write(pending.length === 0 ? 'Schema is current.\n' : `Still pending: ${pending.join(', ')}\n`);
      }, { whileServerRuns: 'nothing is needed: the running server applied every migration when it started' }),
    );
}
