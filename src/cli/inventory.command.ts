/**
 * `store-api inventory import <file>` and `store-api inventory job <id>`: a stock CSV import as an
 * import job (decision 0060), with a progress bar (JSON progress lines on stderr when not a terminal)
 * that follows the job's `rows_done`. Waiting, the command runs its store's queued jobs itself, as the
 * process that runs background work does (on the embedded database no server can run them while it
 * holds the data directory; on PostgreSQL a worker may take them first, and the bar follows the job
 * all the same). `--no-wait` only queues the job, for a `worker` or `all` process to run.
 */
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import type { Command } from 'commander';
import type { AppContext } from '../app-context.ts';
import { CliUsageError, withContext } from './run-command.ts';
import { commandProgress } from './command-progress.ts';
import { importJob, submitImportJob, type ImportJob } from '../inventory/import-job.service.ts';
import { startImportJobRunner } from '../inventory/import-job-runner.ts';
import { currentStoreId } from '../db/store-scope.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** How often a waiting command reads its job's progress. */
const FOLLOW_INTERVAL_MS = 200;

const WHILE_SERVER_RUNS =
  'send the CSV to the running server: POST /admin/api/v1/inventory/import (text/csv), which answers a large import with a job to poll at GET /admin/api/v1/inventory/import-jobs/:id';

/** Runs the store's queued jobs and follows job `id` with a progress bar until it ends; exit code 1 when it failed. */
async function follow(ctx: AppContext, id: string): Promise<void> {
  const runner = startImportJobRunner(ctx, { storeId: currentStoreId() });
  const progress = commandProgress(ctx.config, 'stock import job');
  let job: ImportJob;
  try {
    for (;;) {
      job = await importJob(ctx.database.db, id);
      progress.update(job.rows_done, job.rows_total, job.status === 'queued' ? `queued (${job.queue_position ?? 0} ahead)` : job.status);
      if (job.status === 'succeeded' || job.status === 'failed') break;
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_INTERVAL_MS));
    }
  } finally {
    progress.stop();
    await runner.stop();
  }
  for (const note of job.notes) process.stderr.write(`note: ${note}\n`);
  if (job.status === 'succeeded') {
    const r = job.result!;
    process.stdout.write(`Imported ${r.rows} rows: ${r.movements} stock movements, ${r.products} products changed (job ${job.id}).\n`);
    return;
  }
  process.stderr.write(`Import job ${job.id} failed: ${job.error?.detail ?? 'no reason recorded'}\n`);
  for (const e of job.error?.errors ?? []) process.stderr.write(`  ${e.param}: ${e.message}\n`);
  process.exitCode = 1;
}

export function registerInventoryCommands(program: Command): void {
  const inventory = program.command('inventory').description('Stock: CSV imports as jobs with their progress');
  inventory
    .command('import')
    .description('Import stock from a CSV file (header sku,stock or sku,quantity_change; optional note) as an import job, with a progress bar')
    .argument('<file>', 'the CSV file')
    .option('--no-wait', 'only queue the job (a worker or all process runs it); print its id')
    .action((file: string, options: { wait: boolean }) =>
      withContext(
        async (ctx) => {
          let csv: string;
          try {
            csv = readFileSync(file, 'utf8');
          } catch (error) {
            throw new CliUsageError(`Cannot read ${file}: ${(error as Error).message}. Nothing was imported.`);
          }
          const job = await submitImportJob(ctx.database.db, csv, {
            createdBy: { kind: 'cli', id: null, name: userInfo().username },
            queueMax: ctx.config.IMPORT_JOB_QUEUE,
          });
          if (!options.wait) {
            process.stdout.write(
              `Import job ${job.id} queued (${job.rows_total} rows). A worker or all process runs it; follow it with \`store-api inventory job ${job.id} --wait\`.\n`,
            );
            return;
          }
          await follow(ctx, job.id);
        },
        { whileServerRuns: WHILE_SERVER_RUNS },
      ),
    );
  inventory
    .command('job')
    .description("Show an import job (JSON); --wait runs the store's queued jobs and follows it with a progress bar to its end")
    .argument('<id>', 'the job id')
    .option('--wait', 'follow the job to its end (exit 1 when it failed)')
    .action((id: string, options: { wait?: boolean }) =>
      withContext(
        async (ctx) => {
          if (!UUID.test(id)) throw new CliUsageError(`"${id}" is not an import job id (a UUID, as \`store-api inventory import\` prints it).`);
          if (options.wait) return follow(ctx, id);
          process.stdout.write(`${JSON.stringify(await importJob(ctx.database.db, id), null, 2)}\n`);
        },
        { whileServerRuns: WHILE_SERVER_RUNS },
      ),
    );
}
