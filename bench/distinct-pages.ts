/**
 * The list over many distinct pages (issue 26): what a sync walks, where no page cache holds the
 * page. Three measurements over the SAME pages, for `alternate`:
 *  - the API (wrk cycling the pages' URLs, bench/wrk-paths.lua), with the `serve` process's CPU time
 *    per page (utime + stime from /proc ÷ pages), which a shared machine disturbs less than pages/s;
 *  - its SQL ceiling: the same pages' stored documents read through `pg` (the list's own records
 *    statement, 8 clients) and joined in Node as the API sends them (`{"data":[…],"pagination":…}`
 *    encoded to bytes), no HTTP;
 *  - PostGraphile 5 (bench/peer) asked for the same pages, one GraphQL body per page
 *    (bench/peer/wrk-post-paths.lua), with its CPU time per page too.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { sql, type Kysely } from 'kysely';
import { pageBodyQuery, recordsQuery } from '../src/db/keyset-page.ts';
import { copyBinary, inlineParameters } from '../src/db/copy-out.ts';
import { productSource } from '../src/catalog/product.json-sql.ts';
import { formatCursor, parseCursor } from '../src/shared/cursor.ts';
import type { Database } from '../src/db/schema.ts';
import { wrk, type LoadResult } from './bench-tools.ts';

/** A load result with the server's CPU milliseconds per page (undefined for the in-process ceiling). */
export interface PagesResult extends LoadResult {
  cpuMsPerPage?: number;
}

/** Distinct pages of the list a sync-like walk asks in turn (issue 26): more than any page cache holds. */
export const DISTINCT_PAGES = 2000;

const WRK_PATHS_SCRIPT = fileURLToPath(new URL('./wrk-paths.lua', import.meta.url));
const WRK_POST_PATHS_SCRIPT = fileURLToPath(new URL('./peer/wrk-post-paths.lua', import.meta.url));
const CLOCK_TICKS = 100; // USER_HZ on Linux

/** CPU milliseconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

/** wrk over `url` with the CPU time `pid` spent per request. */
async function wrkWithCpu(pid: number, url: string, opts: Parameters<typeof wrk>[1]): Promise<PagesResult> {
  const before = processCpuMs(pid);
  const start = performance.now();
  const result = await wrk(url, opts);
  const seconds = (performance.now() - start) / 1000;
  const cpu = processCpuMs(pid) - before;
  return { ...result, cpuMsPerPage: cpu / (result.perSecond * seconds) };
}

/** The API over the distinct pages, one URL a line cycled by wrk. */
export function apiPages(
  origin: string,
  pid: number,
  cursors: readonly string[],
  limit: number,
  load: { connections: number; seconds: number; headers: Record<string, string> },
) {
  const file = join(mkdtempSync(join(tmpdir(), 'store-api-bench-paths-')), 'paths.txt');
  writeFileSync(file, cursors.map((c) => `/api/v1/products?limit=${limit}&cursor=${encodeURIComponent(c)}\n`).join(''));
  return () => wrkWithCpu(pid, origin, { ...load, script: WRK_PATHS_SCRIPT, env: { PATHS_FILE: file } });
}

/**
 * The SQL ceiling of the same pages: `connections` pg clients, each walking the cursors from its own
 * offset, reading a page's stored documents (the list's records statement, limit + 1 rows, below a
 * fixed horizon) and joining them into the bytes the API sends.
 */
export function sqlCeilingPages(
  databaseUrl: string,
  db: Kysely<Database>,
  cursors: readonly string[],
  limit: number,
  opts: { connections: number; seconds: number },
): () => Promise<PagesResult> {
  return async () => {
    const { rows } = await sql<{ t: string }>`SELECT clock_timestamp()::text AS t`.execute(db);
    const horizon = rows[0]!.t;
    const statements = cursors.map((cursor) =>
      recordsQuery(productSource, { cursor: parseCursor(cursor), order: 'asc', horizon, filters: [sql`p.is_active`] }, limit + 1).compile(db),
    );
    const pool = new pg.Pool({ connectionString: databaseUrl, max: opts.connections });
    try {
      const clients = await Promise.all(Array.from({ length: opts.connections }, () => pool.connect()));
      const latencies: number[] = [];
      let bytes = 0;
      const start = performance.now();
      const end = start + opts.seconds * 1000;
      await Promise.all(
        clients.map(async (client, c) => {
          for (let i = c * 7919; performance.now() < end; i++) {
            const statement = statements[i % statements.length]!;
            const t = performance.now();
            const result = await client.query<{ json: string; iso: string; id: string }>(statement.sql, statement.parameters as unknown[]);
            const page = result.rows.slice(0, limit);
            const last = page[page.length - 1];
            const pagination = { next_cursor: last ? formatCursor(last.iso, last.id) : null, has_more: result.rows.length > limit, limit };
            bytes += Buffer.byteLength(`{"data":[${page.map((r) => r.json).join(',')}],"pagination":${JSON.stringify(pagination)}}`);
            latencies.push(performance.now() - t);
          }
        }),
      );
      const elapsed = (performance.now() - start) / 1000;
      for (const client of clients) client.release();
      if (bytes === 0) throw new Error('SQL ceiling read nothing');
      latencies.sort((a, b) => a - b);
      const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
      return { perSecond: latencies.length / elapsed, p50: at(0.5), p99: at(0.99) };
    } finally {
      await pool.end();
    }
  };
}

async function graphql<T>(origin: string, query: string): Promise<T> {
  const res = await fetch(`${origin}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  const body = (await res.json()) as { data?: T; errors?: unknown };
  if (!body.data) throw new Error(`PostGraphile: ${JSON.stringify(body.errors)}`);
  return body.data;
}

/** PostGraphile's page query after `after` (its own cursor), as bench/peer/graphql-page.ts asks it. */
function peerQuery(after: string, limit: number): string {
  const order = 'orderBy: [LAST_MODIFIED_ASC, PRIMARY_KEY_ASC]';
  const children = '(condition: {isActive: true}, orderBy: [POSITION_ASC, PRIMARY_KEY_ASC])';
  return `{ allProducts(first: ${limit}, after: ${JSON.stringify(after)}, condition: {isActive: true}, ${order}) {
    pageInfo { endCursor hasNextPage }
    nodes { rowId name slug productType barcode sku price costPrice stock categoryId thumbnailUrl isActive createdAt lastModified
      variants: variantsByProductId${children} { nodes { rowId name sku price stock attributes } }
      images: imagesByProductId${children} { nodes { rowId imageUrl isPrimary } } } } }`;
}

/**
 * PostGraphile over the same pages: its cursors of every active product in one query (PostGraphile
 * cursors are its own), the ones at the positions of `positions`, one POST body a line; the first
 * page is checked to hold `limit` products.
 */
export async function peerPages(origin: string, pid: number, positions: readonly number[], limit: number, load: { connections: number; seconds: number }) {
  const all = await graphql<{ allProducts: { edges: { cursor: string }[] } }>(
    origin,
    `{ allProducts(condition: {isActive: true}, orderBy: [LAST_MODIFIED_ASC, PRIMARY_KEY_ASC]) { edges { cursor } } }`,
  );
  const bodies = positions.map((p) => JSON.stringify({ query: peerQuery(all.allProducts.edges[p]!.cursor, limit) }));
  const sample = await graphql<{ allProducts: { nodes: unknown[] } }>(origin, JSON.parse(bodies[0]!).query);
  if (sample.allProducts.nodes.length !== limit) throw new Error(`PostGraphile page has ${sample.allProducts.nodes.length} products, not ${limit}`);
  const file = join(mkdtempSync(join(tmpdir(), 'store-api-bench-peer-paths-')), 'bodies.txt');
  writeFileSync(file, bodies.map((b) => `${b.replaceAll('\n', ' ')}\n`).join(''));
  return () => wrkWithCpu(pid, `${origin}/graphql`, { ...load, headers: {}, script: WRK_POST_PATHS_SCRIPT, env: { BODIES_FILE: file } });
}

/**
 * `count` cursors spread evenly over the active products, each with the position (0-based) of the
 * product it names: the page after it starts at position + 1, in the API and in PostGraphile alike.
 */
export async function spreadPositions(db: Kysely<Database>, count: number, limit: number): Promise<{ cursors: string[]; positions: number[] }> {
  const {
    rows: [active],
  } = await sql<{ n: string }>`SELECT count(*) AS n FROM products WHERE is_active`.execute(db);
  const step = Math.max(1, Math.floor(Math.max(1, Number(active!.n) - limit - 1) / count));
  const { rows } = await sql<{ iso: string; id: string; n: string }>`
    SELECT iso_utc(last_modified) AS iso, id::text AS id, n FROM (
      SELECT last_modified, id, row_number() OVER (ORDER BY last_modified, id) - 1 AS n FROM products WHERE is_active
    ) p WHERE n % ${step} = 0 ORDER BY n LIMIT ${count}
  `.execute(db);
  return { cursors: rows.map((r) => formatCursor(r.iso, r.id)), positions: rows.map((r) => Number(r.n)) };
}

/**
 * PostgreSQL's CPU per page (ms) for the list's page statement as the API reads it (one value by
 * binary COPY) and for the ceiling's records statement (one row per record), over the same pages on
 * one connection each in turn: the backend's own CPU time from /proc, which other work on a shared
 * machine disturbs far less than pages/s. Tells whether the API's statement costs the database more
 * than the ceiling's on a store's shape (decision 0066).
 */
export async function statementCpu(
  databaseUrl: string,
  db: Kysely<Database>,
  cursors: readonly string[],
  limit: number,
  pages = 400,
): Promise<{ page: number; ceiling: number }> {
  const { rows } = await sql<{ t: string }>`SELECT clock_timestamp()::text AS t`.execute(db);
  const horizon = rows[0]!.t;
  const req = (cursor: string) => ({ cursor: parseCursor(cursor), limit, order: 'asc' as const, horizon, filters: [sql`p.is_active`] });
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const sum = { page: 0, ceiling: 0 };
    for (let round = 0; round < 2; round++) {
      for (const kind of ['page', 'ceiling'] as const) {
        const before = processCpuMs(pid);
        for (let i = 0; i < pages / 2; i++) {
          const cursor = cursors[(round * pages + i * 7) % cursors.length]!;
          if (kind === 'page') {
            const q = sql`SELECT n::text, iso, id, cut::text, data FROM (${pageBodyQuery(productSource, req(cursor))}) q`.compile(db);
            await copyBinary(client as unknown as pg.PoolClient, inlineParameters(q.sql, q.parameters));
          } else {
            const q = recordsQuery(productSource, req(cursor), limit + 1).compile(db);
            await client.query(q.sql, q.parameters as unknown[]);
          }
        }
        sum[kind] += processCpuMs(pid) - before;
      }
    }
    return { page: sum.page / pages, ceiling: sum.ceiling / pages };
  } finally {
    await client.end();
  }
}
