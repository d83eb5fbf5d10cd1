/**
 * `store-api-sync`: mirrors a store from the Store Integration API into a local database.
 * Every failure ends as one line on stderr and exit code 1 (see sync-errors.ts).
 */
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import cliProgress from 'cli-progress';
import { progressDetail } from './progress.ts';
import { openMirror, type MirrorDatabase } from '../mirror/mirror-database.ts';
import { resetInitialSync } from '../mirror/mirror.repository.ts';
import { clientStoreReader } from '../client-store-reader.ts';
import { INITIAL_SYNC_BATCH, initialSync } from '../initial-sync.ts';
import { reconcile, type ReconcileReport } from '../reconcile.ts';
import { verifyMirror, mirrorMatches } from '../verify.ts';
import { syncStatus, formatAge } from '../sync-status.ts';
import { startReceiver } from '../webhook-receiver.ts';
import { webhookVerifier } from '../webhook-verifier.ts';
import { describeError, SyncError } from '../sync-errors.ts';
import { resourcesNamed, type SyncResource } from '../sync-resources.ts';
import { parseDuration } from './duration.ts';
import { readDaemonState, runDaemon } from '../daemon.ts';
import { webhookGaps, type WebhookGaps } from '../webhook-gaps.ts';
import { unreadableResources } from '../unreadable-resources.ts';
import { StoreApiClient } from '@store-api/client';
import type { RetryInfo } from '@store-api/client';

interface CommonOptions {
  url?: string;
  token?: string;
  database?: string;
  dataDir: string;
  resources?: string[];
}

const program = new Command();
program
  .name('store-api-sync')
  .description(
    'Mirror a store from the Store Integration API into PostgreSQL or an embedded PGlite directory:\ninitial sync from the exports, a webhook receiver, scheduled reconcile, status and verify.',
  )
  .showHelpAfterError();

function withCommon(command: Command, { api = true } = {}): Command {
  if (api) {
    command
      .addOption(new Option('--url <url>', 'base URL of the store API, e.g. http://127.0.0.1:3000').env('STORE_API_URL'))
      .addOption(new Option('--token <token>', 'API token with the four read scopes').env('STORE_API_TOKEN'));
  }
  return command
    .addOption(new Option('--database <url>', 'mirror in this PostgreSQL database (postgres://…) instead of --data-dir').env('SYNC_DATABASE_URL'))
    .addOption(new Option('--data-dir <dir>', 'embedded mirror directory (PGlite)').default('./mirror').env('SYNC_DATA_DIR'))
    .option('--resources <names>', 'comma-separated subset: products,orders,customers,inventory,stock_movements', (v: string) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );
}

function reader(options: CommonOptions, tuning: { retryBaseDelayMs?: number; retryMaxDelayMs?: number; maxRetries?: number } = {}) {
  if (!options.url) throw new SyncError('--url (or STORE_API_URL) is required: the base URL of the store API');
  if (!options.token) throw new SyncError('--token (or STORE_API_TOKEN) is required: an API token with the read scopes');
  return clientStoreReader({ baseUrl: options.url, token: options.token, onRetry: logRetry, ...tuning });
}

/**
 * Says why the tool is waiting when the wait is the token's rate limit (a 429: not a fault, but it
 * can last a minute); other retries stay quiet, their failure ends as one line.
 */
/** The progress bars on screen (stderr, a terminal), if any: lines written meanwhile go above them. */
let barsOnScreen: cliProgress.MultiBar | undefined;

/**
 * Writes a line to `stream`; while progress bars are drawn on the terminal, above them (the bars'
 * log), so that a log line never overwrites a bar and a bar never overwrites a log line.
 */
function say(stream: NodeJS.WriteStream, line: string): void {
  if (barsOnScreen && stream.isTTY && process.stderr.isTTY) barsOnScreen.log(line);
  else stream.write(line);
}

function logRetry(info: RetryInfo): void {
  if (info.status !== 429) return;
  // Snapshots count against the export budget like the exports (the service's `config('export')`).
  const budget = /\/(export|snapshot)\b/.test(info.error.request) ? 'export' : 'standard';
  say(
    process.stderr,
    `${new Date().toISOString()} store-api-sync: waiting ${Math.round(info.delayMs / 1000)} s for the ${budget} rate limit (the token's budget; the README's sync recipe says how to raise it)\n`,
  );
}

async function withMirror<T>(options: CommonOptions, fn: (mirror: MirrorDatabase, resources: SyncResource[]) => Promise<T>): Promise<T> {
  const resources = resourcesNamed(options.resources);
  const mirror = await openMirror({ databaseUrl: options.database, dataDir: options.dataDir });
  try {
    return await fn(mirror, resources);
  } finally {
    await mirror.close();
  }
}

// biome-ignore lint/suspicious/noConfusingVoidType: actions either return an exit code or nothing.
function run<Args extends unknown[]>(action: (...args: Args) => Promise<number | void>) {
  return async (...args: Args) => {
    try {
      process.exitCode = (await action(...args)) ?? 0;
    } catch (error) {
      process.stderr.write(`store-api-sync: ${describeError(error)}\n`);
      process.exitCode = 1;
    }
  };
}

function progressBars(resources: readonly SyncResource[]) {
  const bars = new cliProgress.MultiBar(
    {
      format: '{resource} |{bar}| {detail}',
      hideCursor: true,
      clearOnComplete: false,
      noTTYOutput: !process.stderr.isTTY,
      notTTYSchedule: 5000,
    },
    cliProgress.Presets.shades_classic,
  );
  const byName = new Map(resources.map((r) => [r.name, bars.create(1, 0, { resource: r.name.padEnd(15), detail: 'waiting' })]));
  barsOnScreen = bars;
  // Each resource's first report (time, records): the ETA's rate is measured from there.
  const first = new Map<string, { at: number; records: number }>();
  return {
    onProgress: ({ resource, records, total, done }: { resource: SyncResource; records: number; total: number | null; done: boolean }) => {
      const bar = byName.get(resource.name)!;
      if (!first.has(resource.name)) first.set(resource.name, { at: performance.now(), records });
      const since = first.get(resource.name)!;
      // Without an announced total the bar grows with the export and is full when done.
      bar.setTotal(done ? Math.max(records, 1) : (total ?? records + 500) || 1);
      bar.update(records, { detail: progressDetail({ records, total, done, since: { records: since.records, elapsedMs: performance.now() - since.at } }) });
    },
    /** A resource the token may not read: its bar says so. */
    onSkip: (resource: SyncResource) => byName.get(resource.name)!.update(0, { detail: `skipped: the token lacks ${resource.scope}` }),
    stop: () => {
      bars.stop();
      if (barsOnScreen === bars) barsOnScreen = undefined;
    },
  };
}

/** Says a resource skipped for a missing scope, on stderr (above the progress bars). */
const warnSkipped = (line: string) => say(process.stderr, `store-api-sync: ${line}\n`);

/** The initial sync of the resources the token may read (the others skipped and said); how many were synced. */
async function runInitialSync(mirror: MirrorDatabase, options: CommonOptions, resources: SyncResource[], batchSize?: number): Promise<number> {
  const bars = progressBars(resources);
  const source = reader(options);
  try {
    const readable = unreadableResources({ warn: warnSkipped, mirror, onSkip: bars.onSkip });
    const synced = await readable.each(resources, (resource) => initialSync(mirror, source, [resource], { batchSize, onProgress: bars.onProgress }));
    return synced.length;
  } finally {
    bars.stop();
  }
}

function printReconcile(reports: ReconcileReport[]): void {
  for (const r of reports) {
    say(
      process.stdout,
      `${r.resource.padEnd(15)} pulled ${r.pulled}, applied ${r.applied} (missed by webhooks)${r.lagMs === null ? '' : `, lag ${formatAge(r.lagMs)}`}, cursor ${r.cursor ?? '—'}\n`,
    );
  }
}

withCommon(
  program
    .command('init')
    .alias('initial-sync')
    .description(
      'initial sync from one snapshot per resource (the bulk exports against a server without snapshots), resumable: run it again after a crash and it continues',
    ),
)
  .option('--restart', 'forget the stored export positions and walk the exports from the start')
  .option('--batch-size <n>', 'records per local transaction', (v: string) => positiveInt(v, '--batch-size'), INITIAL_SYNC_BATCH)
  .action(
    run(async (options: CommonOptions & { restart?: boolean; batchSize: number }) =>
      withMirror(options, async (mirror, resources) => {
        if (options.restart) for (const r of resources) await resetInitialSync(mirror.db, r.name);
        const synced = await runInitialSync(mirror, options, resources, options.batchSize);
        process.stdout.write(
          `initial sync complete${synced < resources.length ? ` (${synced} of ${resources.length} resources; the others skipped, see above)` : ''}\n`,
        );
      }),
    ),
  );

withCommon(program.command('reconcile').description('pull every list from its stored next_cursor and apply what the webhooks missed'))
  .option('--page-size <n>', 'list page size (1-200)', (v: string) => positiveInt(v, '--page-size'), 200)
  .action(
    run(async (options: CommonOptions & { pageSize: number }) =>
      withMirror(options, async (mirror, resources) => {
        const source = reader(options);
        const readable = unreadableResources({ warn: warnSkipped, mirror });
        printReconcile((await readable.each(resources, (resource) => reconcile(mirror, source, [resource], { pageSize: options.pageSize }))).flat());
      }),
    ),
  );

function receiverOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--secret <whsec...>', 'signing secret of the webhook endpoint (repeat, or comma-separate, during a rotation)')
        .env('STORE_WEBHOOK_SECRET')
        .argParser((v: string, prev: string[] | undefined) => [
          ...(prev ?? []),
          ...v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
        ]),
    )
    .addOption(
      new Option('--secret-file <path>', 'file holding the signing secret(s), one per line or comma-separated (keeps it out of `ps` and shell history)').env(
        'STORE_WEBHOOK_SECRET_FILE',
      ),
    )
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on', (v: string) => port(v), 4000)
    .option('--path <path>', 'URL path the service posts to', '/webhooks');
}

type ReceiverCliOptions = CommonOptions & { secret?: string[]; secretFile?: string; host: string; port: number; path: string };

/** The secrets of --secret and of --secret-file together (a file: one per line or comma-separated). */
function receiverSecrets(options: ReceiverCliOptions): string[] {
  if (options.secretFile === undefined) return options.secret ?? [];
  let text: string;
  try {
    text = readFileSync(options.secretFile, 'utf8');
  } catch (error) {
    throw new SyncError(`cannot read the secret file ${options.secretFile} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  return [
    ...(options.secret ?? []),
    ...text
      .split(/[\n,]/)
      .map((s) => s.trim())
      .filter(Boolean),
  ];
}

async function startCliReceiver(mirror: MirrorDatabase, options: ReceiverCliOptions) {
  let verify;
  const secrets = receiverSecrets(options);
  try {
    verify = webhookVerifier(secrets);
  } catch (error) {
    throw new SyncError(`${(error as Error).message} (--secret, --secret-file, STORE_WEBHOOK_SECRET or STORE_WEBHOOK_SECRET_FILE)`);
  }
  const receiver = await startReceiver(mirror, verify, {
    host: options.host,
    port: options.port,
    path: options.path,
    onRequest: (r) => {
      if (r.message) say(process.stderr, `store-api-sync: ${r.message}\n`);
      else if (r.event) say(process.stdout, `${new Date().toISOString()} ${r.event.type} ${r.event.id} ${r.outcome}\n`);
    },
  });
  process.stdout.write(`receiving webhooks on ${receiver.url}\n`);
  return receiver;
}

async function untilSignal(): Promise<void> {
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
}

withCommon(receiverOptions(program.command('serve').alias('receive').description('run the webhook receiver: verify each event and apply it to the mirror')), {
  api: false,
}).action(
  run(async (options: ReceiverCliOptions) =>
    withMirror(options, async (mirror) => {
      const receiver = await startCliReceiver(mirror, options);
      await untilSignal();
      await receiver.close();
    }),
  ),
);

withCommon(
  receiverOptions(
    program
      .command('run')
      .description(
        'initial sync if needed, then the webhook receiver plus a reconcile on a schedule; outages of the service or the mirror are retried without end',
      ),
  ),
)
  .option('--reconcile-every <duration>', 'how often to reconcile (e.g. 30s, 15m, 1h)', (v: string) => parseDuration(v, '--reconcile-every'), 3_600_000)
  .option('--retry-min <duration>', 'first wait after a failure (outage of the service or the mirror)', (v: string) => parseDuration(v, '--retry-min'), 1_000)
  .option('--retry-max <duration>', 'longest wait between tries during an outage', (v: string) => parseDuration(v, '--retry-max'), 60_000)
  .action(
    run(async (options: ReceiverCliOptions & { reconcileEvery: number; retryMin: number; retryMax: number }) =>
      withMirror(options, async (mirror, resources) => {
        // Receive first: events that arrive during the initial sync are applied too (newest wins). The
        // receiver stays up whatever happens to the service: the loop below only logs and retries.
        const receiver = await startCliReceiver(mirror, options);
        const stop = new AbortController();
        const onSignal = () => stop.abort();
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        const bars = progressBars(resources);
        try {
          await runDaemon(mirror, reader(options, { retryBaseDelayMs: options.retryMin, retryMaxDelayMs: options.retryMax, maxRetries: 2 }), resources, {
            reconcileEveryMs: options.reconcileEvery,
            retryMinMs: options.retryMin,
            retryMaxMs: options.retryMax,
            signal: stop.signal,
            log: (line) => say(process.stderr, `${new Date().toISOString()} store-api-sync: ${line}\n`),
            onProgress: bars.onProgress,
            onSkip: bars.onSkip,
            onReconcile: printReconcile,
          });
        } finally {
          bars.stop();
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          await receiver.close();
        }
      }),
    ),
  );

withCommon(
  program
    .command('status')
    .description(
      'last event, cursor positions, lag and outages of the mirror; with --url/--token also the webhooks that never arrived (compared with the events feed)',
    ),
)
  .option('--json', 'print JSON')
  .option('--max-events <n>', 'missed events listed', (v: string) => positiveInt(v, '--max-events'), 20)
  .action(
    run(async (options: CommonOptions & { json?: boolean; maxEvents: number }) =>
      withMirror(options, async (mirror, resources) => {
        const status = await syncStatus(mirror, resources);
        let gaps: WebhookGaps | null = null;
        if (options.url && options.token) {
          gaps = await webhookGaps(mirror, new StoreApiClient({ baseUrl: options.url, token: options.token, onRetry: logRetry }));
        }
        if (options.json) {
          process.stdout.write(`${JSON.stringify({ ...status, daemon: (await readDaemonState(mirror)) ?? null, webhooks: gaps }, null, 2)}\n`);
          return;
        }
        const daemon = await readDaemonState(mirror);
        if (daemon?.outage_since) {
          process.stdout.write(
            `OUTAGE: the service or the mirror has failed since ${daemon.outage_since} (${daemon.outage_attempts} failed tries; run keeps retrying): ${daemon.last_error}\n`,
          );
        } else if (daemon?.last_success_at) {
          process.stdout.write(`service: reachable (last successful sync ${daemon.last_success_at})\n`);
        }
        const e = status.events;
        process.stdout.write(
          e.last
            ? `last event: ${e.last.type} ${e.last.event_id} written ${e.last.created_at} (${formatAge(e.lastEventAgeMs)} ago), received ${e.last.received_at}\n`
            : 'last event: none received\n',
        );
        process.stdout.write(`events: ${e.received} received, ${e.applied} applied, ${e.duplicates} redeliveries ignored\n`);
        for (const r of status.resources) {
          const initial = r.initial_done ? 'initial sync done' : r.export_cursor ? `initial sync at ${r.export_cursor}` : 'initial sync not started';
          const last = r.last_reconcile_at
            ? `last reconcile ${r.last_reconcile_at} (pulled ${r.last_reconcile_pulled}, applied ${r.last_reconcile_applied})`
            : 'never reconciled';
          process.stdout.write(
            `${r.resource.padEnd(15)} ${String(r.records).padStart(8)} records; ${initial}; cursor ${r.cursor ?? '—'} (lag ${formatAge(r.cursorAgeMs)}); ${last}\n`,
          );
          if (r.skipped_scope)
            process.stdout.write(
              `${''.padEnd(15)} SKIPPED since ${r.skipped_since}: the token lacks the scope ${r.skipped_scope}, so run and init mirror the other resources without it\n`,
            );
        }
        if (gaps && gaps.from === null) process.stdout.write('webhooks: none received yet, nothing to compare with the events feed\n');
        else if (gaps) {
          process.stdout.write(`webhooks: ${gaps.received} of ${gaps.feedEvents} events of the feed between ${gaps.from} and ${gaps.to} arrived`);
          if (gaps.missed.length === 0) process.stdout.write('; none missing\n');
          else {
            process.stdout.write(`; ${gaps.missed.length} MISSING (only the reconcile brought their changes; check the endpoint's deliveries):\n`);
            for (const m of gaps.missed.slice(0, options.maxEvents))
              process.stdout.write(`  ${m.created_at} ${m.type} ${m.id} (record ${m.resource_id ?? '—'})\n`);
            if (gaps.missed.length > options.maxEvents) process.stdout.write(`  … ${gaps.missed.length - options.maxEvents} more (--max-events)\n`);
          }
        }
      }),
    ),
  );

withCommon(program.command('verify').description('compare the mirror with the API (counts, checksums, differing ids); exit code 1 when they differ'))
  .option('--json', 'print JSON')
  .option('--max-ids <n>', 'ids listed per kind of difference', (v: string) => positiveInt(v, '--max-ids'), 20)
  .action(
    run(async (options: CommonOptions & { json?: boolean; maxIds: number }) =>
      withMirror(options, async (mirror, resources) => {
        const source = reader(options);
        const skipped: SyncResource[] = [];
        const readable = unreadableResources({ warn: warnSkipped, onSkip: (resource) => skipped.push(resource) });
        const results = (await readable.each(resources, (resource) => verifyMirror(mirror, source, [resource]))).flat();
        if (options.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
        else {
          for (const r of skipped) process.stdout.write(`${r.name.padEnd(15)} SKIPPED: the token lacks the scope ${r.scope}; not compared\n`);
          for (const r of results) {
            const same = r.missing.length + r.extra.length + r.different.length === 0;
            process.stdout.write(
              `${r.resource.padEnd(15)} api ${r.apiCount} (${r.apiChecksum}) mirror ${r.mirrorCount} (${r.mirrorChecksum}) ${same ? 'match' : 'DIFFER'}\n`,
            );
            for (const [kind, ids] of [
              ['missing from mirror', r.missing],
              ['only in mirror', r.extra],
              ['different', r.different],
            ] as const) {
              if (ids.length)
                process.stdout.write(`  ${kind} (${ids.length}): ${ids.slice(0, options.maxIds).join(' ')}${ids.length > options.maxIds ? ' …' : ''}\n`);
            }
          }
        }
        return mirrorMatches(results) ? 0 : 1;
      }),
    ),
  );

function positiveInt(value: string, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new SyncError(`${flag} "${value}": expected a positive integer`);
  return n;
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new SyncError(`--port "${value}": expected 0-65535`);
  return n;
}

try {
  await program.parseAsync(process.argv);
} catch (error) {
  process.stderr.write(`store-api-sync: ${describeError(error)}\n`);
  process.exitCode = 1;
}
