/**
 * `store-api documents backfill` and `store-api documents check`: the stored documents
 * (db/documents.ts) as an operator sees them.
 */
import type { Command } from 'commander';
import { SingleBar, Presets } from 'cli-progress';
import { withContext } from './run-command.ts';
import { commandProgress } from './command-progress.ts';
import { loadConfig } from '../config/config.ts';
import { rebuildEvents, type RebuildProgress } from '../db/documents.ts';
import { checkStoreDocuments, rebuildStoreDocuments } from '../resources/store-schema.ts';

/**
 * A bar per table on stderr while documents are filled; when not a terminal, a line per table filled
 * and a JSON progress line every PROGRESS_LOG_INTERVAL_MS (cli/command-progress.ts).
 */
function showProgress(): () => void {
  const tty = process.stderr.isTTY === true;
  // A bad configuration is reported by withContext, which runs next.
  let lines: ReturnType<typeof commandProgress> | undefined;
  try {
    lines = tty ? undefined : commandProgress(loadConfig(), 'documents backfill', { terminal: false });
  } catch {
    lines = undefined;
  }
  const bar = new SingleBar(
    { format: ' {table} [{bar}] {percentage}% | {value}/{total} rows | {eta_formatted} left', hideCursor: true, stream: process.stderr },
    Presets.shades_classic,
  );
  let current: string | undefined;
  const onProgress = ({ table, done, total }: RebuildProgress) => {
    if (tty) {
      if (table !== current) {
        if (current !== undefined) bar.stop();
        current = table;
        bar.start(total, done, { table: table.padEnd(15) });
      } else {
        bar.update(done);
      }
    } else {
      lines?.update(done, total, table);
      if (done === total) process.stderr.write(`${table}: ${total} rows\n`);
    }
  };
  rebuildEvents.on('progress', onProgress);
  return () => {
    rebuildEvents.off('progress', onProgress);
    lines?.stop();
    if (tty && current !== undefined) bar.stop();
  };
}

export function registerDocumentsCommands(program: Command): void {
  const documents = program.command('documents').description('Stored documents: the JSON of every record, kept by the database and served as it is');
  documents
    .command('backfill')
    .description('Fill the stored documents with a progress bar (the migration that adds them runs first, batched); --all rebuilds every one')
    .option('--all', 'rebuild every document, not only missing ones (after a change to how a document is built)')
    .action((options: { all?: boolean }) => {
      const stop = showProgress();
      return withContext(
        async (ctx) => {
          try {
            const rebuilt = await rebuildStoreDocuments(ctx.database.db, { onlyMissing: !options.all });
            process.stdout.write(`Documents filled (${rebuilt} rebuilt by this command; any missing ones were filled by the migration).\n`);
          } finally {
            stop();
          }
        },
        { whileServerRuns: 'stop the server: it applied the migration that fills the documents when it started' },
      );
    });
  documents
    .command('check')
    .description('Rebuild every document from the tables and compare it with the stored one; exit 1 naming the records that differ')
    .option('--limit <n>', 'name at most this many records', '100')
    .action((options: { limit: string }) =>
      withContext(
        async (ctx) => {
          const limit = Math.max(1, Number.parseInt(options.limit, 10) || 100);
          const differences = await checkStoreDocuments(ctx.database.db, { limit });
          if (differences.length === 0) {
            process.stdout.write('Every stored document equals its rebuild from the tables.\n');
            return;
          }
          for (const d of differences) process.stdout.write(`${d.kind} ${d.id} differs\n  stored:  ${d.stored ?? '(missing)'}\n  rebuilt: ${d.rebuilt}\n`);
          process.stderr.write(
            `${differences.length}${differences.length >= limit ? '+' : ''} stored documents differ from their rebuild: run \`store-api documents backfill --all\` to rebuild them.\n`,
          );
          process.exitCode = 1;
        },
        { whileServerRuns: 'stop the server first, or run it against PostgreSQL where it can run alongside' },
      ),
    );
}
