/**
 * Profiles the list page under wrk load, for decision 0016: a scratch PostgreSQL store (10,000
 * products by default), `serve` from source with `--cpu-prof`, wrk on the half-way page of 200
 * active products, then the profile's heaviest functions by self time.
 *
 *   node --import tsx bench/list-profile.ts [--products N] [--seconds S] [--distinct N] [--shape bench|demo] [--env NAME=VALUE ...]
 *
 * `--distinct N`: the list over N distinct pages in turn instead (every request a page cache miss,
 * issue 26), then the same pages' SQL ceiling (bench/distinct-pages.ts).
 * `--shape demo`: the store `store-api demo generate --products N` writes (src/demo/demo-store.ts:
 * products written 250 to a transaction, so 250 share one last_modified, variants and images on
 * most) instead of the bench's generated one (one second between rows). `--keep NAME`: the scratch
 * database is NAME, generated only when it does not exist yet and kept afterwards.
 *
 * DATABASE_URL (default postgres://root@127.0.0.1:5432/postgres) is where the scratch database is
 * made and dropped. Profiles go to a temporary directory named at the end.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/schema/migrate.ts';
import { createToken } from '../src/tokens/token.service.ts';
import { activeCount, cursorAt, generateBenchStore } from './generate-store.ts';
import { generateDemoStore } from '../src/demo/demo-store.ts';
import { freePort, log, queryLoop, startServer, wrk } from './bench-tools.ts';
import { sql } from 'kysely';
import { pageBodyQuery, recordsQuery } from '../src/db/keyset-page.ts';
import { productSource } from '../src/catalog/product.json-sql.ts';
import { readHorizon } from '../src/db/write-clock.ts';
import { parseCursor } from '../src/shared/cursor.ts';
import { apiPages, spreadPositions, sqlCeilingPages } from './distinct-pages.ts';

const { values: args } = parseArgs({
  options: {
    products: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '5' },
    env: { type: 'string', multiple: true, default: [] },
    distinct: { type: 'string', default: '0' },
    shape: { type: 'string', default: 'bench' },
    keep: { type: 'string' },
  },
});
const products = Number(args.products);
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';
const SOURCE_CLI = fileURLToPath(new URL('../src/main/cli.ts', import.meta.url));

// --keep NAME: that database, generated on the first run and kept (a demo store of 50,000 takes minutes).
const name = args.keep ?? `list_profile_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: DATABASE_URL });
await admin.connect();
const fresh = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 0;
if (fresh) await admin.query(`CREATE DATABASE ${name}`);
await admin.end();
const url = new URL(DATABASE_URL);
url.pathname = `/${name}`;
const database = await openDatabase({ databaseUrl: url.toString(), poolSize: 4 });
const profileDir = mkdtempSync(join(tmpdir(), 'list-profile-'));
try {
  await migrateToLatest(database.db);
  if (fresh) {
    log(`generating ${products} products (${args.shape} store)`);
    if (args.shape === 'demo') await generateDemoStore(database.db, { products });
    else await generateBenchStore(database.db, { products, customers: products / 10, orders: products / 5, movements: products / 2 });
  }
  const { rows: size } = await sql<{
    n: string;
    bytes: string;
  }>`SELECT count(*) AS n, round(avg(octet_length(doc::text))) AS bytes FROM products WHERE is_active`.execute(database.db);
  log(`${size[0]!.n} active products, their documents ${size[0]!.bytes} bytes on average`);
  const { token } = await createToken(database.db, { name: 'profile' });
  const cursor = await cursorAt(database, Math.floor((await activeCount(database)) / 2));
  const port = await freePort();
  const extra = Object.fromEntries(args.env.map((e) => e.split('=', 2) as [string, string]));
  const server = await startServer(
    ['--import', 'tsx', '--conditions=source', '--cpu-prof', `--cpu-prof-dir=${profileDir}`, SOURCE_CLI, 'serve'],
    { LOG_LEVEL: 'warn', SEED_DEMO: 'false', RATE_LIMIT_STANDARD: '1000000', HOST: '127.0.0.1', DATABASE_URL: url.toString(), PORT: String(port), ...extra },
    port,
  );
  const listUrl = `${server.origin}/api/v1/products?limit=200&cursor=${encodeURIComponent(cursor)}`;
  const load = { connections: 8, seconds: Number(args.seconds), headers: { Authorization: `Bearer ${token}` } };
  if (Number(args.distinct) > 0) {
    // --distinct N: the list over N distinct pages (no page cache hit), then the same pages' SQL ceiling.
    const { cursors } = await spreadPositions(database.db, Number(args.distinct), 200);
    const pages = apiPages(server.origin, server.child.pid!, cursors, 200, load);
    await pages();
    const result = await pages();
    log(`list, ${cursors.length} distinct pages: ${result.perSecond.toFixed(0)} pages/s, p99 ${result.p99} ms, CPU ${result.cpuMsPerPage!.toFixed(2)} ms/page`);
    await server.stop();
    const ceiling = await sqlCeilingPages(url.toString(), database.db, cursors, 200, load)();
    log(`the same pages' SQL ceiling: ${ceiling.perSecond.toFixed(0)} pages/s (list ÷ ceiling ${(result.perSecond / ceiling.perSecond).toFixed(2)})`);
  } else {
    await wrk(listUrl, { ...load, seconds: 1 });
    const result = await wrk(listUrl, load);
    log(`list: ${result.perSecond.toFixed(0)} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms`);
    await server.stop();
  }
  // The page's statements without HTTP: one row per record against one value per page.
  const req = { cursor: parseCursor(cursor), limit: 200, order: 'asc', horizon: await readHorizon(database.db), filters: [sql`p.is_active`] } as const;
  for (const [label, query] of [
    ['rows (recordsQuery)', recordsQuery(productSource, req, 201)],
    ['one value (pageBodyQuery)', pageBodyQuery(productSource, req)],
  ] as const) {
    const r = await queryLoop(url.toString(), query.compile(database.db), { connections: 8, seconds: Number(args.seconds) });
    log(`${label}: ${r.perSecond.toFixed(0)} queries/s, p50 ${r.p50.toFixed(1)} ms`);
  }
  for (const file of readdirSync(profileDir)) {
    const profile = JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as {
      nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
      samples: number[];
    };
    const self = new Map<number, number>();
    for (const id of profile.samples) self.set(id, (self.get(id) ?? 0) + 1);
    const byName = new Map<string, number>();
    for (const node of profile.nodes) {
      const where = `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/^.*node_modules\//, '')}:${node.callFrame.lineNumber}`;
      byName.set(where, (byName.get(where) ?? 0) + (self.get(node.id) ?? 0));
    }
    const total = profile.samples.length;
    log(`${file}: ${total} samples; heaviest by self time:`);
    for (const [where, n] of [...byName].sort((a, b) => b[1] - a[1]).slice(0, 25)) log(`  ${((100 * n) / total).toFixed(1)}%  ${where}`);
  }
  log(`profiles in ${profileDir}`);
} finally {
  await database.close();
  if (args.keep !== undefined) process.exit(0);
  const dropper = new pg.Client({ connectionString: DATABASE_URL });
  await dropper.connect();
  await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await dropper.end();
}
