/**
 * The larger chaos run of the sync tool (`npm run chaos -- --products 10000 --minutes 3`): the same
 * run as test/sync/chaos.test.ts (see test/sync/chaos-harness.ts) with a bigger store, longer
 * chaos, more writers and CSV imports of 1,000 rows. PGlite by default (`store-api all`, killed
 * whole); `--database postgres://…/postgres` runs the service on a scratch PostgreSQL database
 * created on that server and dropped afterwards (`store-api serve` + a `store-api worker` that is
 * killed). The mirror is an in-memory PGlite. Prints the figures as a Markdown table for
 * docs/sync.md; exit code 1 when the mirror differs or an event went missing.
 */
import { Command } from 'commander';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openMirror } from '../packages/sync/src/index.ts';
import { chaosClean, runChaos } from '../test/sync/chaos-harness.ts';

const program = new Command()
  .name('npm run chaos --')
  .option('--products <n>', 'products in the store', (v) => Number(v), 10_000)
  .option('--minutes <n>', 'minutes of chaos (writers running)', (v) => Number(v), 3)
  .option('--writers <n>', 'concurrent writers', (v) => Number(v), 2)
  .option('--kills <n>', 'SIGKILLs of the worker (PGlite: the whole service)', (v) => Number(v), 4)
  .option('--csv-rows <n>', 'rows per CSV import', (v) => Number(v), 500)
  .option('--csv-every <n>', 'each writer imports a CSV every n operations', (v) => Number(v), 300)
  .option('--write-pause <ms>', 'pause of each writer between operations', (v) => Number(v), 250)
  .option('--database <url>', 'run the service on PostgreSQL: a scratch database on this server');
program.parse();
const opts = program.opts<{
  products: number;
  minutes: number;
  writers: number;
  kills: number;
  csvRows: number;
  csvEvery: number;
  writePause: number;
  database?: string;
}>();

let scratch: { url: string; drop(): Promise<void> } | undefined;
if (opts.database) {
  const name = `store_api_chaos_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: opts.database });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(opts.database);
  url.pathname = `/${name}`;
  scratch = {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: opts.database });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

const mirror = await openMirror({});
const backend = scratch ? 'postgres' : 'pglite';
try {
  const report = await runChaos({
    backend,
    databaseUrl: scratch?.url,
    mirror,
    products: opts.products,
    durationMs: opts.minutes * 60_000,
    writers: opts.writers,
    kills: opts.kills,
    csvRows: opts.csvRows,
    csvEvery: opts.csvEvery,
    writePauseMs: opts.writePause,
    log: (line) => process.stderr.write(`[chaos] ${line}\n`),
  });
  const writes = Object.values(report.writes).reduce((a, b) => a + b, 0);
  const rows: [string, string | number][] = [
    ['back end', backend],
    ['products at start', opts.products],
    ['chaos', `${opts.minutes} min, ${opts.writers} writers, ${report.kills} SIGKILLs`],
    [
      'admin writes',
      `${writes} (${Object.entries(report.writes)
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')})`,
    ],
    [
      'receiver answers',
      Object.entries(report.receiver)
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
    ],
    ['events', report.events],
    ['events delivered', report.delivered],
    ['dead letters', report.deadLetters],
    ['duplicates (redeliveries ignored)', report.duplicates],
    ['delivered but not in the mirror', report.lostEvents.length],
    ['neither delivered nor dead', report.undelivered.length],
    ['differing before reconcile, unexplained', Object.values(report.unexplainedBeforeReconcile).flat().length],
    ['applied by the final reconcile', report.reconcile.map((r) => `${r.resource} ${r.applied}/${r.pulled}`).join(', ')],
    ['records compared', `${report.recordsCompared} (${report.afterReconcile.map((r) => `${r.resource} ${r.apiCount}`).join(', ')})`],
    ['mismatches', report.mismatches],
    ['run time', `${report.seconds} s`],
  ];
  process.stdout.write(`| | |\n|---|---|\n${rows.map(([k, v]) => `| ${k} | ${v} |`).join('\n')}\n`);
  process.exitCode = chaosClean(report) ? 0 : 1;
} finally {
  await mirror.close();
  await scratch?.drop();
}
