/**
 * The 1M-product page check of issue 9 on its own: "1M products: the last page costs ≤ 1.2× the
 * first". `npm run bench -- --large` measures it too, but spends most of its time on everything
 * else (1M orders, the peer, webhooks); this generates only the catalogue (kept between runs in the
 * database `store_api_bench_large` of the local PostgreSQL, or --database-url) and runs wrk on the
 * first and the last page of 200 active products, alternated, 3 rounds.
 *
 *   node --import tsx bench/large-pages.ts [--products 1000000] [--database-url postgres://…] [--rounds 3]
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { sql } from 'kysely';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/schema/migrate.ts';
import { createToken } from '../src/tokens/token.service.ts';
import { activeCount, cursorAt, generateBenchStore } from './generate-store.ts';
import { alternate, ensureWrk, freePort, log, spread, startServer, wrk } from './bench-tools.ts';

const { values: args } = parseArgs({ options: { products: { type: 'string' }, 'database-url': { type: 'string' }, rounds: { type: 'string' } } });
const products = Number(args.products ?? 1_000_000);
const rounds = Number(args.rounds ?? 3);
if (!Number.isSafeInteger(products) || products < 1000) throw new Error('--products: a whole number ≥ 1000');
if (!Number.isSafeInteger(rounds) || rounds < 1) throw new Error('--rounds: a whole number ≥ 1');
ensureWrk();

const base = process.env.BENCH_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';
let url = args['database-url'];
if (!url) {
  const name = `store_api_bench_large_${products}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  if (!rowCount) await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(base);
  u.pathname = `/${name}`;
  url = u.toString();
}

const database = await openDatabase({ databaseUrl: url });
await migrateToLatest(database.db);
const {
  rows: [{ n: existing }],
} = await sql<{ n: number }>`SELECT count(*)::int AS n FROM products`.execute(database.db);
if (existing !== products) {
  if (existing > 0) throw new Error(`${url} holds ${existing} products, not ${products}: give another --database-url or drop it`);
  log(`generating ${products} products into ${url}`);
  const started = Date.now();
  await generateBenchStore(database.db, { products, customers: 1000, orders: 1000, movements: 1000 });
  await sql`ANALYZE`.execute(database.db);
  log(`generated in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}
const { token } = await createToken(database.db, { name: 'large-pages bench' });
const active = await activeCount(database);
const lastCursor = await cursorAt(database, active - 201);
await database.close();

const port = await freePort();
const server = await startServer(
  [new URL('../bin/store-api.js', import.meta.url).pathname, 'serve'],
  { DATABASE_URL: url, PORT: String(port), LOG_LEVEL: 'warn', SEED_DEMO: 'false', RATE_LIMIT_STANDARD: '1000000', HOST: '127.0.0.1' },
  port,
);
try {
  const load = { connections: 8, seconds: 5, headers: { Authorization: `Bearer ${token}` } };
  const firstUrl = `${server.origin}/api/v1/products?limit=200`;
  const lastUrl = `${server.origin}/api/v1/products?limit=200&cursor=${encodeURIComponent(lastCursor)}`;
  await wrk(firstUrl, { ...load, seconds: 2 });
  await wrk(lastUrl, { ...load, seconds: 2 });
  const r = await alternate(rounds, { first: () => wrk(firstUrl, load), last: () => wrk(lastUrl, load) });
  const first = spread(r.first!.map((x) => x.p50));
  const lastP50 = spread(r.last!.map((x) => x.p50));
  const f1 = (s: { median: number; min: number; max: number }) => `${s.median.toFixed(1)} (${s.min.toFixed(1)}–${s.max.toFixed(1)})`;
  process.stdout.write(
    [
      '',
      `| ${active.toLocaleString('en')} active of ${products.toLocaleString('en')} products, limit 200, wrk 8 connections | |`,
      '|---|---:|',
      `| First page p50 (ms) | ${f1(first)} |`,
      `| Last page p50 (ms) | ${f1(lastP50)} |`,
      `| First page requests/s | ${f1(spread(r.first!.map((x) => x.perSecond)))} |`,
      `| Last page requests/s | ${f1(spread(r.last!.map((x) => x.perSecond)))} |`,
      `| **Last page ÷ first page (p50)** | **${(lastP50.median / first.median).toFixed(2)}** (target ≤ 1.2) |`,
      '',
    ].join('\n'),
  );
} finally {
  await server.stop();
}
