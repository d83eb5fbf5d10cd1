/** `store-api migrate`: applies pending migrations (exits non-zero on failure). */
import type { Command } from 'commander';
import { machineOutput, withContext } from './run-command.ts';
import { createAnnouncer } from '../ops/announce.ts';
import { pendingMigrations } from '../db/migrate.ts';

export function registerDatabaseCommands(program: Command): void {
  program
    .command('migrate')
    .description('Apply pending database migrations (the embedded default also migrates at start)')
    .action(() =>
      withContext(
        async (ctx) => {
          const pending = await pendingMigrations(ctx.database.db);
          const msg = pending.length === 0 ? 'Schema is current.' : `Still pending: ${pending.join(', ')}`;
          createAnnouncer({ logLevel: ctx.config.LOG_LEVEL })({ text: `${msg}\n`, msg, fields: { pending } });
        },
        { whileServerRuns: 'nothing is needed: the running server applied every migration when it started', json: machineOutput() },
      ),
    );
}
