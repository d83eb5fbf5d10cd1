/**
 * /healthz, /readyz (database reachable, migrations current; 503 problem+json otherwise) and the
 * Prometheus page at /metrics: request counts and latency by route template and status, rate-limit
 * rejections, database pool use. None of them needs a token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { pino } from 'pino';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { backends, openTestDatabase } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { metricSum, parseMetrics } from './process-helpers.ts';

describe.each(backends)('health and metrics (%s)', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  const scrape = async () => {
    const res = await t.app.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return { text: res.body, metrics: parseMetrics(res.body) };
  };

  it('/healthz answers without a token', async () => {
    const res = await t.app.inject({ url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('/readyz is ready when the database answers and no migration is pending', async () => {
    const res = await t.app.inject({ url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ready', database: 'ok', migrations: 'current' });
  });

  it('/readyz is 503 problem+json naming the pending migration', async () => {
    const { rows } = await sql<{ name: string; timestamp: string }>`SELECT name, timestamp FROM kysely_migration ORDER BY name DESC LIMIT 1`.execute(
      t.database.db,
    );
    const latest = rows[0]!;
    await sql`DELETE FROM kysely_migration WHERE name = ${latest.name}`.execute(t.database.db);
    try {
      const res = await t.app.inject({ url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json()).toMatchObject({ status: 503, code: 'service_unavailable' });
      expect(res.json().detail).toContain(latest.name);
    } finally {
      await sql`INSERT INTO kysely_migration (name, timestamp) VALUES (${latest.name}, ${latest.timestamp})`.execute(t.database.db);
    }
    expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(200);
  });

  it('/readyz is 503 when the database is unreachable, and says nothing internal', async () => {
    const database = await openTestDatabase(backend);
    const app = await buildApp({ config: loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false' }), database, logger: pino({ level: 'silent' }) });
    await database.close();
    try {
      const res = await app.inject({ url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ code: 'service_unavailable', detail: 'The database is unreachable.' });
      expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('counts requests and latency by route template and status, never by raw URL', async () => {
    const headers = await t.auth();
    const before = (await scrape()).metrics;
    const unknownId = '0d7a6a3c-1111-4222-8333-444455556666';
    await t.app.inject({ url: '/api/v1/products', headers });
    await t.app.inject({ url: '/api/v1/products', headers });
    await t.app.inject({ url: `/api/v1/products/${unknownId}`, headers });
    await t.app.inject({ url: '/api/v1/products' });
    await t.app.inject({ url: '/no/such/route' });
    const { text, metrics } = await scrape();
    const delta = (name: string, ...labels: string[]) => metricSum(metrics, name, ...labels) - metricSum(before, name, ...labels);
    expect(delta('http_requests_total', 'route="/api/v1/products"', 'status_code="200"')).toBe(2);
    expect(delta('http_requests_total', 'route="/api/v1/products"', 'status_code="401"')).toBe(1);
    expect(delta('http_requests_total', 'route="/api/v1/products/:id"', 'status_code="404"')).toBe(1);
    expect(delta('http_requests_total', 'route="unmatched"', 'status_code="404"')).toBe(1);
    expect(delta('http_request_duration_seconds_count', 'route="/api/v1/products"', 'status_code="200"')).toBe(2);
    expect(metricSum(metrics, 'http_request_duration_seconds_bucket', 'route="/api/v1/products"', 'le="+Inf"')).toBeGreaterThanOrEqual(2);
    expect(text).not.toContain(unknownId);
    expect(text).not.toContain('/no/such/route');
  });

  it('counts rate-limit rejections by budget', async () => {
    const { token } = await createToken(t.database.db, { name: 'metrics', rateLimitStandard: 1, rateLimitExport: 1 });
    const headers = { authorization: `Bearer ${token}` };
    const before = (await scrape()).metrics;
    await t.app.inject({ url: '/api/v1/customers', headers });
    await t.app.inject({ url: '/api/v1/customers', headers });
    await t.app.inject({ url: '/api/v1/customers', headers });
    await t.app.inject({ url: '/api/v1/customers/export', headers });
    await t.app.inject({ url: '/api/v1/customers/export', headers });
    const after = (await scrape()).metrics;
    const delta = (cls: string) =>
      metricSum(after, 'store_api_rate_limit_rejections_total', `class="${cls}"`) -
      metricSum(before, 'store_api_rate_limit_rejections_total', `class="${cls}"`);
    expect(delta('standard')).toBe(2);
    expect(delta('export')).toBe(1);
    expect(metricSum(after, 'http_requests_total', 'route="/api/v1/customers"', 'status_code="429"')).toBeGreaterThanOrEqual(2);
  });

  it('reports the database pool of this process', async () => {
    // The one open app of this file is the only pool reported; scraping uses no connection.
    await t.app.inject({ url: '/readyz' });
    const stats = t.database.poolStats();
    const { metrics } = await scrape();
    expect(stats.total).toBeGreaterThanOrEqual(1);
    expect(metricSum(metrics, 'store_api_db_pool_connections', 'state="total"')).toBe(stats.total);
    expect(metricSum(metrics, 'store_api_db_pool_connections', 'state="idle"')).toBe(stats.idle);
    for (const state of ['total', 'idle', 'in_use', 'waiting']) {
      expect(
        [...metrics.keys()].some((k) => k === `store_api_db_pool_connections{state="${state}"}`),
        state,
      ).toBe(true);
    }
    expect(metricSum(metrics, 'process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('reports the webhook queue depth from the database, and the webhook metric families', async () => {
    const { text, metrics } = await scrape();
    expect(metrics.get('store_api_webhook_queue_depth')).toBe(0);
    for (const family of [
      'store_api_webhook_deliveries_attempted_total',
      'store_api_webhook_deliveries_dead_lettered_total',
      'store_api_webhook_attempt_duration_seconds',
    ]) {
      expect(text, family).toContain(`# TYPE ${family} `);
    }
  });
});
