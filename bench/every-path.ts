/**
 * Every read path of every resource on the generated store (issue 14): the first and the last list
 * page, the paged export and the snapshot export against `COPY (SELECT <stored document> …) TO
 * STDOUT` on the same rows, and `store-api-sync init` end to end into a PostgreSQL mirror against the
 * sum of those COPY ceilings. One measurement each (the large store makes them long): the ratios are
 * taken back to back, not alternated over rounds like the headline figures.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import pg from 'pg';
import type { DatabaseHandle } from '../src/db/database.ts';
import { alternate, copyOut, exportWalk, log, snapshotRead, spread, wrk, type LoadResult } from './bench-tools.ts';

const SYNC_CLI = fileURLToPath(new URL('../packages/sync/bin/store-api-sync.js', import.meta.url));

interface PathResource {
  name: string;
  path: string;
  /** Query giving the same rows as `where` (every record the mirror takes). */
  query: string;
  from: string;
  doc: string;
  where: string;
}

const RESOURCES: readonly PathResource[] = [
  { name: 'products', path: 'products', query: 'include_inactive=true', from: 'products p', doc: 'p.doc', where: 'true' },
  { name: 'orders', path: 'orders', query: '', from: 'orders o', doc: 'o.doc', where: 'true' },
  { name: 'customers', path: 'customers', query: '', from: 'customers c', doc: 'c.doc', where: 'true' },
  {
    name: 'inventory',
    path: 'inventory',
    query: 'include_inactive=true',
    from: 'products p',
    doc: 'p.inventory_doc',
    where: `p.product_type IN ('physical','food','digital_card')`,
  },
  { name: 'stock movements', path: 'inventory/movements', query: '', from: 'stock_movements m', doc: 'm.doc', where: 'true' },
];

export interface PathFigures {
  name: string;
  /** Records the exports and the COPY read (every one, or the first `maxRecords`). */
  records: number;
  /** Records of the resource in all (what a sync init mirrors). */
  total: number;
  firstP50: number;
  lastP50: number;
  exportPerSecond: number;
  snapshotPerSecond: number;
  copyPerSecond: number;
}

export interface SyncFigures {
  seconds: number;
  records: number;
  /** True when stopped at the cap before the end (records then counts the rows the mirror holds). */
  capped: boolean;
  capSeconds?: number;
  /** Records of every resource (the init's whole work). */
  total: number;
  perSecond: number;
  /** Records/s of the COPY ceilings over all resources together. */
  ceilingPerSecond: number;
  /** `store-api-sync verify` of the mirror just made (server checksums, decision 0038), end to end; not run after a capped init. */
  verifySeconds?: number;
}

const alias = (from: string) => from.split(' ')[1]!;

async function countOf(database: DatabaseHandle, r: PathResource): Promise<number> {
  const { rows } = await sql<{ n: string }>`SELECT count(*)::text AS n FROM ${sql.raw(r.from)} WHERE ${sql.raw(r.where)}`.execute(database.db);
  return Number(rows[0]!.n);
}

async function lastPageCursor(database: DatabaseHandle, r: PathResource, limit: number, n: number): Promise<string | undefined> {
  const a = alias(r.from);
  if (n <= limit) return undefined;
  const {
    rows: [at],
  } = await sql<{ iso: string; id: string }>`
    SELECT iso_utc(${sql.raw(`${a}.last_modified`)}) AS iso, ${sql.raw(`${a}.id`)}::text AS id FROM ${sql.raw(r.from)} WHERE ${sql.raw(r.where)}
    ORDER BY ${sql.raw(`${a}.last_modified, ${a}.id`)} OFFSET ${n - limit - 1} LIMIT 1`.execute(database.db);
  return `${at!.iso}_${at!.id}`;
}

/**
 * First/last page p50 (on `uncachedOrigin`, a `serve` without the list page cache, in `rounds`
 * alternated rounds), paged export, snapshot and COPY ceiling for each resource; the exports and
 * the COPY over the first `maxRecords` records in list order when given (the large store).
 */
export async function benchEveryPath(
  database: DatabaseHandle,
  databaseUrl: string,
  origin: string,
  uncachedOrigin: string,
  token: string,
  load: { connections: number; seconds: number; limit: number; rounds: number; maxRecords?: number },
): Promise<PathFigures[]> {
  const max = load.maxRecords ?? Number.POSITIVE_INFINITY;
  const headers = { Authorization: `Bearer ${token}` };
  const figures: PathFigures[] = [];
  for (const r of RESOURCES) {
    log(`every path: ${r.name}`);
    const q = r.query ? `&${r.query}` : '';
    const total = await countOf(database, r);
    const cursor = await lastPageCursor(database, r, load.limit, total);
    // On the server without the page cache, alternated: each page's p50 is the median of the rounds.
    const pageLoad = { connections: load.connections, seconds: load.seconds, headers };
    const firstUrl = `${uncachedOrigin}/api/v1/${r.path}?limit=${load.limit}${q}`;
    const pages = await alternate<LoadResult>(load.rounds, {
      first: () => wrk(firstUrl, pageLoad),
      last: () => wrk(cursor ? `${firstUrl}&cursor=${encodeURIComponent(cursor)}` : firstUrl, pageLoad),
    });
    const first = { p50: spread(pages.first!.map((x) => x.p50)).median };
    const last = { p50: spread(pages.last!.map((x) => x.p50)).median };
    const a = alias(r.from);
    const limit = Number.isFinite(max) ? ` LIMIT ${max}` : '';
    const copy = await copyOut(databaseUrl, `SELECT ${r.doc}::text FROM ${r.from} WHERE ${r.where} ORDER BY ${a}.last_modified, ${a}.id${limit}`);
    const snapshot = await snapshotRead(origin, `/api/v1/${r.path}/snapshot${r.query ? `?${r.query}` : ''}`, token, max);
    const paged = await exportWalk(origin, `/api/v1/${r.path}/export?limit=500${q}`, token, max);
    figures.push({
      name: r.name,
      records: snapshot.records,
      total,
      firstP50: first.p50,
      lastP50: last.p50,
      exportPerSecond: paged.perSecond,
      snapshotPerSecond: snapshot.perSecond,
      copyPerSecond: copy.perSecond,
    });
  }
  return figures;
}

/** `store-api-sync verify` of the mirror at `mirrorUrl`, end to end (seconds); fails unless the mirror matches (exit 0). */
async function timeVerify(origin: string, token: string, mirrorUrl: string): Promise<number> {
  log('every path: store-api-sync verify of that mirror');
  const start = performance.now();
  const child = spawn(process.execPath, [SYNC_CLI, 'verify', '--url', origin, '--token', token, '--database', mirrorUrl], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env },
  });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out = (out + chunk.toString()).slice(-4000)));
  child.stderr!.on('data', (chunk: Buffer) => (out = (out + chunk.toString()).slice(-4000)));
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`store-api-sync verify exited ${code} on the mirror init just made: ${out}`);
  return (performance.now() - start) / 1000;
}

/**
 * `store-api-sync init` of every resource into a fresh PostgreSQL mirror database, end to end; when
 * `capSeconds` is given and passed, the init is stopped there and the rows the mirror holds by then
 * are counted instead (reported as capped, not end to end).
 */
export async function benchSyncInit(adminUrl: string, origin: string, token: string, paths: readonly PathFigures[], capSeconds?: number): Promise<SyncFigures> {
  const name = `store_api_bench_mirror_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
    const mirrorUrl = new URL(adminUrl);
    mirrorUrl.pathname = `/${name}`;
    log('every path: store-api-sync init into a PostgreSQL mirror');
    const start = performance.now();
    const child = spawn(process.execPath, [SYNC_CLI, 'init', '--url', origin, '--token', token, '--database', mirrorUrl.toString()], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env },
    });
    let err = '';
    child.stderr!.on('data', (chunk: Buffer) => (err = (err + chunk.toString()).slice(-4000)));
    const exited = once(child, 'exit');
    let capped = false;
    const cap =
      capSeconds === undefined
        ? undefined
        : setTimeout(() => {
            capped = true;
            child.kill('SIGTERM');
          }, capSeconds * 1000);
    const [code] = await exited;
    if (cap) clearTimeout(cap);
    const seconds = (performance.now() - start) / 1000;
    if (code !== 0 && !capped) throw new Error(`store-api-sync init exited ${code}: ${err}`);
    const total = paths.reduce((sum, p) => sum + p.total, 0);
    let records = total;
    if (capped) {
      // Records the mirror committed before the cap: the sync state's count, stored with each batch
      // (insert counters would also count the init's staging table and batches rolled back).
      const mirror = new pg.Client({ connectionString: mirrorUrl.toString() });
      await mirror.connect();
      try {
        const { rows } = await mirror.query<{ n: string }>('SELECT coalesce(sum(initial_records), 0)::text AS n FROM store_mirror.sync_state');
        records = Number(rows[0]!.n);
      } finally {
        await mirror.end();
      }
    }
    const ceilingSeconds = paths.reduce((sum, p) => sum + p.total / p.copyPerSecond, 0);
    const verifySeconds = capped ? undefined : await timeVerify(origin, token, mirrorUrl.toString());
    return { seconds, records, capped, capSeconds, total, perSecond: records / seconds, ceilingPerSecond: total / ceilingSeconds, verifySeconds };
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
}
