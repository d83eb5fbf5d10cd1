/** `store-api migrate`: applies pending migrations and says which (exits non-zero on failure). */
import type { Command } from 'commander';
import { machineOutput, withContext } from './run-command.ts';
import { createAnnouncer } from '../ops/announce.ts';
import { pendingMigrations } from '../schema/migrate.ts';
import { migrateAtStart } from '../main/runtime.ts';

export function registerDatabaseCommands(program: Command): void {
  program
    .command('migrate')
    .description('Apply pending database migrations and list them (the server roles also migrate at start)')
    .action(() =>
      withContext(
        async (ctx) => {
          // A database that does not answer in time is tried again, as at a server's start.
          const result = await migrateAtStart(ctx);
          const applied = (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
          const pending = await pendingMigrations(ctx.database.db);
          const msg =
            applied.length === 0
              ? 'Schema is current.'
              : `Applied ${applied.length} migration${applied.length === 1 ? '' : 's'}: ${applied.join(', ')}. Schema is current.`;
          createAnnouncer({ logLevel: ctx.config.LOG_LEVEL })({ text: `${msg}\n`, msg, fields: { applied, pending } });
        },
        { whileServerRuns: 'nothing is needed: the running server applied every migration when it started', json: machineOutput(), migrate: false },
      ),
    );
}
