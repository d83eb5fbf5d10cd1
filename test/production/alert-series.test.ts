/**
 * The series the alert rules and the dashboard read (deploy/prometheus, deploy/grafana), with their
 * values: the queue's age (lateness of the most overdue claimable delivery, 0 when none), the
 * destination kind of each attempt, the events written (the event log's sequence), the worker's
 * heartbeat per loop, the build's version, whether the database can write, and the embedded data
 * directory's disk. Both back ends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { backends, openTestDatabase } from '../helpers/test-database.ts';
import { openDatabase } from '../../src/db/database.ts';
import { migrationNames } from '../../src/schema/migrate.ts';
import { metricsRegistry, trackDatabasePool } from '../../src/ops/metrics.ts';
import { createCustomer } from '../../src/customers/customer.service.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from '../webhooks/webhook-test-kit.ts';
import { WebhookReceiver } from '../webhooks/webhook-receiver.ts';
import { metricSum, parseMetrics, PROJECT_ROOT } from './process-helpers.ts';

const { version } = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string };

describe.each(backends)('series for the alerts (%s)', (backend) => {
  let kit: WebhookTestKit;
  beforeAll(async () => {
    // No worker yet: the queue's deliveries stay where the test puts them.
    kit = await webhookTestKit(backend, {}, { worker: false });
  });
  afterAll(async () => kit?.close());

  const scrape = async () => {
    const res = await kit.t.app.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    return parseMetrics(res.body);
  };
  const db = () => kit.t.database.db;

  it('store_api_build_info carries the package version and the Node version', async () => {
    const metrics = await scrape();
    expect(metrics.get(`store_api_build_info{version="${version}",node_version="${process.version}"}`)).toBe(1);
  });

  it('the queue age is 0 with nothing due, grows with a waiting delivery, and leaves out paused, disabled and suspended ones', async () => {
    expect((await scrape()).get('store_api_webhook_queue_age_seconds')).toBe(0);
    const endpoint = await kit.createEndpoint('http://127.0.0.1:9/never-called');
    const ping = await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    expect(ping.status).toBe(202);
    const fresh = await scrape();
    expect(fresh.get('store_api_webhook_queue_depth')).toBe(1);
    expect(fresh.get('store_api_webhook_queue_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(fresh.get('store_api_webhook_queue_age_seconds')).toBeLessThan(60);

    // Due ten minutes ago and still not delivered: ten minutes late (the clock is the database's).
    await sql`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '600 seconds' WHERE endpoint_id = ${endpoint.id}::uuid`.execute(db());
    const late = (await scrape()).get('store_api_webhook_queue_age_seconds')!;
    expect(late).toBeGreaterThanOrEqual(600);
    expect(late).toBeLessThan(660);

    // Paused by its breaker: the delivery waits on purpose, due only when the pause ends.
    await sql`UPDATE webhook_endpoints SET paused_until = now() + interval '1 hour' WHERE id = ${endpoint.id}::uuid`.execute(db());
    expect((await scrape()).get('store_api_webhook_queue_age_seconds')).toBe(0);
    // The pause ended five minutes ago: late from then on.
    await sql`UPDATE webhook_endpoints SET paused_until = now() - interval '300 seconds' WHERE id = ${endpoint.id}::uuid`.execute(db());
    const afterPause = (await scrape()).get('store_api_webhook_queue_age_seconds')!;
    expect(afterPause).toBeGreaterThanOrEqual(300);
    expect(afterPause).toBeLessThan(360);

    // A retry scheduled in the future is not due yet (the breaker closed again).
    await sql`UPDATE webhook_endpoints SET paused_until = NULL WHERE id = ${endpoint.id}::uuid`.execute(db());
    await sql`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = now() + interval '1 hour' WHERE endpoint_id = ${endpoint.id}::uuid`.execute(
      db(),
    );
    expect((await scrape()).get('store_api_webhook_queue_age_seconds')).toBe(0);
    // Its time passed: late again.
    await sql`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '900 seconds' WHERE endpoint_id = ${endpoint.id}::uuid`.execute(db());
    expect((await scrape()).get('store_api_webhook_queue_age_seconds')).toBeGreaterThanOrEqual(900);

    // A disabled endpoint's deliveries wait for an administrator, not for a worker.
    expect((await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false })).status).toBe(200);
    expect((await scrape()).get('store_api_webhook_queue_age_seconds')).toBe(0);
    expect((await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: true })).status).toBe(200);
    expect((await scrape()).get('store_api_webhook_queue_age_seconds')).toBeGreaterThanOrEqual(900);

    // A suspended store's deliveries wait until it is resumed.
    await sql`UPDATE stores SET status = 'suspended' WHERE id = (SELECT store_id FROM webhook_endpoints WHERE id = ${endpoint.id}::uuid)`.execute(db());
    expect((await scrape()).get('store_api_webhook_queue_age_seconds')).toBe(0);
    await sql`UPDATE stores SET status = 'active' WHERE id = (SELECT store_id FROM webhook_endpoints WHERE id = ${endpoint.id}::uuid)`.execute(db());

    // Delivered (or dead): nothing waits any more.
    await sql`UPDATE webhook_deliveries SET status = 'dead', next_attempt_at = NULL, dead_at = now() WHERE endpoint_id = ${endpoint.id}::uuid`.execute(db());
    const settled = await scrape();
    expect(settled.get('store_api_webhook_queue_age_seconds')).toBe(0);
    expect(settled.get('store_api_webhook_queue_depth')).toBe(0);
    expect(settled.get('store_api_webhook_dead_letters')).toBe(1);
  });

  it('store_api_events_written_total counts each event appended, by any writer', async () => {
    const before = metricSum(await scrape(), 'store_api_events_written_total');
    await createCustomer(db(), { name: 'Counted', email: 'counted@example.com' });
    await createCustomer(db(), { name: 'Counted too', email: 'counted2@example.com' });
    expect(metricSum(await scrape(), 'store_api_events_written_total') - before).toBe(2);
  });

  it('a worker reports a heartbeat per loop, and each attempt carries its destination kind', async () => {
    const receiver = await new WebhookReceiver().start();
    const startedAt = Date.now() / 1000;
    const worker = await kit.startWorker();
    try {
      await new Promise((resolve) => worker.events.once('polled', resolve));
      const endpoint = await kit.createEndpoint(receiver.url);
      const attempt = waitForAttempts(worker, 1, (r) => r.endpointId === endpoint.id);
      await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
      expect((await attempt)[0]!.result.outcome).toBe('success');
      const metrics = await scrape();
      for (const loop of ['poll', 'dispatch']) {
        const beat = metrics.get(`store_api_webhook_worker_heartbeat_timestamp_seconds{loop="${loop}"}`);
        expect(beat, loop).toBeGreaterThanOrEqual(Math.floor(startedAt));
        expect(beat, loop).toBeLessThanOrEqual(Date.now() / 1000 + 1);
      }
      expect(metricSum(metrics, 'store_api_webhook_deliveries_attempted_total', 'outcome="success"', 'destination_kind="http"')).toBeGreaterThanOrEqual(1);
      expect(metricSum(metrics, 'store_api_webhook_attempt_duration_seconds_count', 'outcome="success"', 'destination_kind="http"')).toBeGreaterThanOrEqual(1);
      expect([...metrics.keys()].filter((k) => k.startsWith('store_api_webhook_deliveries_attempted_total{') && !k.includes('destination_kind='))).toEqual([]);
    } finally {
      await worker.stop();
      await receiver.close();
    }
  });

  it('store_api_database_cannot_write is 1 while the database cannot take writes', async () => {
    const database = await openTestDatabase(backend);
    const untrack = trackDatabasePool(database);
    try {
      const read = async () => parseMetrics(await metricsRegistry.metrics()).get('store_api_database_cannot_write');
      expect(await read()).toBe(0);
      database.storage.noteOutOfSpace(Object.assign(new Error('could not extend file: No space left on device'), { code: '53100' }));
      expect(await read()).toBe(1);
    } finally {
      untrack();
      await database.close();
    }
  });
});

describe('the embedded data directory disk on /metrics', () => {
  it('reports the file system of DATA_DIR while a database on it is open, and nothing otherwise', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-api-disk-metrics-'));
    const series = () => {
      const metrics = parseMetrics(readFileMetrics);
      return {
        avail: metricSum(metrics, 'store_api_data_dir_filesystem_avail_bytes', `data_dir="${dir}"`),
        size: metricSum(metrics, 'store_api_data_dir_filesystem_size_bytes', `data_dir="${dir}"`),
        any: [...metrics.keys()].some((k) => k.startsWith('store_api_data_dir_filesystem_')),
      };
    };
    let readFileMetrics = await metricsRegistry.metrics();
    expect(series().any).toBe(false);
    const database = await openDatabase({ dataDir: dir, knownMigrations: migrationNames() });
    const untrack = trackDatabasePool(database);
    try {
      readFileMetrics = await metricsRegistry.metrics();
      const stats = statfsSync(dir);
      const { avail, size } = series();
      expect(size).toBe(stats.blocks * stats.bsize);
      // Free space moves a little between the two reads (other writers on the disk).
      expect(Math.abs(avail - stats.bavail * stats.bsize)).toBeLessThan(64 * 1024 * 1024);
      expect(avail).toBeGreaterThan(0);
      expect(avail).toBeLessThanOrEqual(size);
    } finally {
      untrack();
      await database.close();
      rmSync(dir, { recursive: true, force: true });
    }
    readFileMetrics = await metricsRegistry.metrics();
    expect(series().any).toBe(false);
  });
});
