/**
 * Generated-input run (`npm run fuzz -- --requests 100000 [--database-url postgres://…]`): serves the
 * real application on 127.0.0.1 — on the embedded default (PGlite in a temporary data directory), or
 * with --database-url on a scratch PostgreSQL database created on that server and dropped afterwards
 * — with a small store, then sends the requested number of requests generated from every route's
 * schemas with hostile values mixed in (test/helpers/hostile-requests.ts, the generator of the
 * property test) over HTTP, --concurrency at a time. Exits 1 when any answer is a 5xx, or a 4xx that
 * is not problem+json naming the field, printing the first of them; prints counts by status either
 * way. Figures and the commands: docs/hardening.md.
 */
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import fc from 'fast-check';
import { pino } from 'pino';
import pg from 'pg';
import { Pool } from 'undici';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config/config.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/database.ts';
import { migrateToLatest, migrationNames } from '../src/schema/migrate.ts';
import { createProduct } from '../src/catalog/catalog.service.ts';
import { createCustomer } from '../src/customers/customer.service.ts';
import { placeOrder } from '../src/orders/order.service.ts';
import { createToken } from '../src/tokens/token.service.ts';
import { collectRoutes, requestArbitrary, responseProblem, type GeneratedRequest } from '../test/helpers/hostile-requests.ts';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '25000' },
    concurrency: { type: 'string', default: '16' },
    'database-url': { type: 'string' },
    seed: { type: 'string' },
  },
});
const REQUESTS = Number(args.requests);
const CONCURRENCY = Number(args.concurrency);
const SEED = args.seed === undefined ? Date.now() % 2 ** 31 : Number(args.seed);
if (!Number.isInteger(REQUESTS) || REQUESTS < 1) throw new Error('--requests must be a positive integer');
if (!Number.isInteger(CONCURRENCY) || CONCURRENCY < 1) throw new Error('--concurrency must be a positive integer');

function log(message: string) {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

/** The database to serve, and how to get rid of it afterwards. */
async function openScratchDatabase(): Promise<{ database: DatabaseHandle; label: string; dispose: () => Promise<void> }> {
  if (!args['database-url']) {
    const dataDir = mkdtempSync(join(tmpdir(), 'store-api-fuzz-'));
    const database = await openDatabase({ dataDir, knownMigrations: migrationNames() });
    return {
      database,
      label: 'PGlite (embedded default)',
      dispose: async () => {
        await database.close();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  const base = args['database-url'];
  const name = `store_api_fuzz_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  const database = await openDatabase({ databaseUrl: url.toString(), poolSize: 10 });
  return {
    database,
    label: 'PostgreSQL',
    dispose: async () => {
      await database.close();
      const dropper = new pg.Client({ connectionString: base });
      await dropper.connect();
      await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await dropper.end();
    },
  };
}

async function main(): Promise<number> {
  const { database, label, dispose } = await openScratchDatabase();
  try {
    await migrateToLatest(database.db);
    const config = loadConfig({
      LOG_LEVEL: 'silent',
      SEED_DEMO: 'false',
      RATE_LIMIT_STANDARD: '1000000',
      RATE_LIMIT_EXPORT: '1000000',
      // Endpoints registered by generated requests are never called (no worker) and need no DNS.
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    });
    const { app, routes } = await collectRoutes(() => buildApp({ config, database, logger: pino({ level: 'silent' }) }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;

    const db = database.db;
    const product = (await createProduct(db, { name: 'Fuzz product', product_type: 'physical', sku: 'FUZZ-1', price: 10, stock: 1_000_000 })) as { id: string };
    const withVariants = (await createProduct(db, {
      name: 'Fuzz variants',
      product_type: 'physical',
      price: 5,
      variants: [{ name: 'S', sku: 'FUZZ-S', price: 5, stock: 1_000_000 }],
      images: [{ image_url: 'https://example.com/a.png' }],
    })) as { id: string; variants: { id: string }[]; images: { id: string }[] };
    const customer = (await createCustomer(db, { name: 'Fuzz customer' })) as { id: string };
    const order = (await placeOrder(db, { source: 'pos', items: [{ product_id: product.id, quantity: 1 }] })) as { id: string };
    const { token: readToken } = await createToken(db, { name: 'fuzz-read' });
    const { token: adminToken } = await createToken(db, { name: 'fuzz-admin', scopes: ['admin'] });
    const endpoint = await app.inject({
      method: 'POST',
      url: '/admin/api/v1/webhooks/endpoints',
      headers: { authorization: `Bearer ${adminToken}` },
      payload: { url: 'http://127.0.0.1:9/hook' },
    });
    const ids = [
      product.id,
      withVariants.id,
      withVariants.variants[0]!.id,
      withVariants.images[0]!.id,
      customer.id,
      order.id,
      endpoint.json().data.id as string,
    ];
    const arbitrary = requestArbitrary(routes, { ids, readToken, adminToken });

    log(`${label}: ${routes.length} routes, ${REQUESTS} requests, concurrency ${CONCURRENCY}, seed ${SEED}, ${origin}`);
    const pool = new Pool(origin, { connections: CONCURRENCY, pipelining: 1 });
    const byStatus = new Map<number, number>();
    const failures: { request: GeneratedRequest; problem: string }[] = [];
    let sent = 0;
    const batch: GeneratedRequest[] = [];
    let batchSeed = SEED;
    // Ctrl-C stops sending and still reports (and drops the scratch database).
    let interrupted = false;
    process.once('SIGINT', () => {
      interrupted = true;
    });
    const nextRequest = (): GeneratedRequest | undefined => {
      if (sent >= REQUESTS || interrupted) return undefined;
      sent++;
      if (sent % 10_000 === 0) log(`${sent} sent`);
      if (batch.length === 0) batch.push(...fc.sample(arbitrary, { numRuns: 1000, seed: batchSeed++ }));
      return batch.pop();
    };
    const started = performance.now();
    const worker = async () => {
      for (let request = nextRequest(); request; request = nextRequest()) {
        let problem: string | undefined;
        let status = 0;
        try {
          const res = await pool.request({ method: request.method as 'GET', path: request.url, headers: request.headers, body: request.payload });
          const body = await res.body.text();
          status = res.statusCode;
          problem = responseProblem(status, res.headers['content-type'] as string | undefined, body);
        } catch (error) {
          problem = `no response: ${(error as Error).message}`;
        }
        byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
        if (problem) failures.push({ request, problem });
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const seconds = (performance.now() - started) / 1000;
    await pool.close();
    await app.close();

    const statuses = [...byStatus.entries()]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}: ${n}`)
      .join(', ');
    const fiveHundreds = [...byStatus.entries()].filter(([s]) => s >= 500 || s === 0).reduce((sum, [, n]) => sum + n, 0);
    console.log(`${label}: ${sent} requests in ${seconds.toFixed(0)} s (${(sent / seconds).toFixed(0)}/s), seed ${SEED}`);
    console.log(`  by status: ${statuses}`);
    console.log(`  5xx or no answer: ${fiveHundreds}; responses not acceptable: ${failures.length}`);
    for (const { request, problem } of failures.slice(0, 5)) {
      console.log(`  ✗ ${request.method} ${request.url} ${request.payload?.slice(0, 200) ?? ''}\n    ${problem}`);
    }
    return failures.length === 0 ? 0 : 1;
  } finally {
    await dispose();
  }
}

process.exitCode = await main();
