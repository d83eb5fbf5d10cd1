/**
 * Retention (src/retention): the tables are filled beyond their retention (rows stamped weeks and
 * months back), pruning runs while deliveries are in flight, and only what is past its time and
 * needed by nobody goes: nothing inside the window, nothing pending or leased, no dead letter inside
 * its own retention, no event the poller has not read yet. Then readers are told how far back data
 * goes: the events feed and replays answer 400 naming the oldest available instant, the stats say it.
 * Every statement a pruning run makes over a store-owned table names the store of its rows
 * (test/helpers/statement-audit.ts, decision 0051).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { sql, type Kysely } from 'kysely';
import { pino } from 'pino';
import client from 'prom-client';
import { backends } from '../helpers/test-database.ts';
import { webhookTestKit, type WebhookTestKit } from '../webhooks/webhook-test-kit.ts';
import { WebhookReceiver, ok } from '../webhooks/webhook-receiver.ts';
import { aProduct } from '../helpers/store-fixtures.ts';
import type { Database } from '../../src/db/schema.ts';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { pruneOnce, startRetentionPruner, type PruneReport } from '../../src/retention/retention-pruner.ts';
import { cutoffsAt, retentionPolicyOf } from '../../src/retention/retention-policy.ts';
import { isoFromMillis } from '../../src/shared/time.ts';
import { startStatementAudit } from '../helpers/statement-audit.ts';

const DAY = 86_400_000;

describe('retention configuration', () => {
  it('defaults to what an operator expects: events and deliveries 30 days, dead letters 90, the audit log 365, finished import jobs 30', () => {
    const policy = retentionPolicyOf(loadConfig({}));
    expect(policy).toMatchObject({ eventsMs: 30 * DAY, deliveriesMs: 30 * DAY, deadLettersMs: 90 * DAY, auditLogMs: 365 * DAY, importJobsMs: 30 * DAY });
    const now = Date.parse('2026-11-23T12:00:00Z');
    expect(cutoffsAt(policy, now)).toEqual({
      events: '2026-10-24T12:00:00.000000Z',
      deliveries: '2026-10-24T12:00:00.000000Z',
      deadLetters: '2026-08-25T12:00:00.000000Z',
      auditLog: '2025-11-23T12:00:00.000000Z',
      importJobs: '2026-10-24T12:00:00.000000Z',
    });
  });

  it.each([
    ['EVENT_RETENTION_MS', '0'],
    ['EVENT_RETENTION_MS', '30d'],
    ['WEBHOOK_DELIVERY_RETENTION_MS', '999'],
    ['WEBHOOK_DEAD_LETTER_RETENTION_MS', '400000000000'],
    ['RETENTION_INTERVAL_MS', '100'],
    ['RETENTION_BATCH_SIZE', '0'],
    ['IMPORT_JOB_RETENTION_MS', '10'],
  ])('a bad %s (%j) stops the start naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(`${name}=${JSON.stringify(value)}`);
  });

  it('refuses dead letters kept shorter than succeeded deliveries', () => {
    expect(() => loadConfig({ WEBHOOK_DELIVERY_RETENTION_MS: String(10 * DAY), WEBHOOK_DEAD_LETTER_RETENTION_MS: String(5 * DAY) })).toThrow(
      /WEBHOOK_DEAD_LETTER_RETENTION_MS="432000000": must be at least WEBHOOK_DELIVERY_RETENTION_MS/,
    );
    expect(() => loadConfig({ WEBHOOK_DELIVERY_RETENTION_MS: String(100 * DAY) })).toThrow(
      /WEBHOOK_DELIVERY_RETENTION_MS="8640000000": must not exceed WEBHOOK_DEAD_LETTER_RETENTION_MS/,
    );
  });
});

type Status = 'pending' | 'succeeded' | 'failed' | 'dead';

describe.each(backends)('retention pruning (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  let db: Kysely<Database>;
  let endpointId: string;
  const now = () => Date.now();
  const ago = (ms: number) => isoFromMillis(now() - ms);

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    // No worker yet: the poller has not read the log when pruning first runs.
    kit = await webhookTestKit(backend, {}, { worker: false });
    db = kit.t.ctx.database.db;
    endpointId = (await kit.createEndpoint(receiver.url)).id;
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  async function anEvent(createdAt: string): Promise<string> {
    const id = randomUUID();
    await sql`INSERT INTO events (id, type, resource_type, resource_id, data, created_at)
      VALUES (${id}, 'product.updated', 'product', ${randomUUID()}, '{}'::jsonb, ${createdAt}::timestamptz)`.execute(db);
    return id;
  }

  /** A delivery of `eventId` in `status`, finished (or made) at `at`, with `attempts` attempts. */
  async function aDelivery(eventId: string, status: Status, at: string, attempts = 2): Promise<string> {
    const id = randomUUID();
    await sql`INSERT INTO webhook_deliveries (id, event_id, event_type, endpoint_id, status, attempt_count, next_attempt_at, created_at, updated_at, succeeded_at, dead_at)
      VALUES (${id}, ${eventId}, 'product.updated', ${endpointId}, ${status}, ${attempts},
        ${status === 'pending' || status === 'failed' ? isoFromMillis(now() + DAY) : null}::timestamptz,
        ${at}::timestamptz, ${at}::timestamptz,
        ${status === 'succeeded' ? at : null}::timestamptz, ${status === 'dead' ? at : null}::timestamptz)`.execute(db);
    for (let n = 1; n <= attempts; n++) {
      await sql`INSERT INTO webhook_attempts (id, delivery_id, attempt_number, started_at, duration_ms, status_code, outcome)
        VALUES (${randomUUID()}, ${id}, ${n}, ${at}::timestamptz, 5, 500, 'http_error')`.execute(db);
    }
    return id;
  }

  /** One pruning run, every statement of it (and of the worker meanwhile) audited: each names its rows' store. */
  async function audited(run: () => Promise<PruneReport>): Promise<PruneReport> {
    const audit = startStatementAudit();
    let wrong: string[];
    let report: PruneReport;
    try {
      report = await run();
    } finally {
      wrong = audit.stop();
    }
    expect(wrong).toEqual([]);
    return report;
  }

  const ids = async (table: 'events' | 'webhook_deliveries') =>
    new Set((await sql<{ id: string }>`SELECT id::text FROM ${sql.table(table)}`.execute(db)).rows.map((r) => r.id));
  const attemptsOf = async (deliveryId: string) =>
    (await sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_attempts WHERE delivery_id = ${deliveryId}::uuid`.execute(db)).rows[0]!.n;

  it('prunes only what is past its retention and needed by nobody, while deliveries are in flight', async () => {
    const policy = retentionPolicyOf(kit.t.ctx.config);
    // Beyond the retention (30 days for events and deliveries, 90 for dead letters):
    const oldAlone = await anEvent(ago(40 * DAY));
    const oldDoneEvent = await anEvent(ago(40 * DAY));
    const oldDone = await aDelivery(oldDoneEvent, 'succeeded', ago(40 * DAY));
    const deadRecentEvent = await anEvent(ago(40 * DAY));
    const deadRecent = await aDelivery(deadRecentEvent, 'dead', ago(40 * DAY), 6); // inside its own 90 days
    const deadOldEvent = await anEvent(ago(100 * DAY));
    const deadOld = await aDelivery(deadOldEvent, 'dead', ago(100 * DAY), 6);
    const pendingOldEvent = await anEvent(ago(40 * DAY));
    const pendingOld = await aDelivery(pendingOldEvent, 'failed', ago(40 * DAY)); // waiting for its retry
    // Never tried for 100 days (its endpoint disabled all along): waiting is not finished, it stays.
    const neverTriedEvent = await anEvent(ago(100 * DAY));
    const neverTried = await aDelivery(neverTriedEvent, 'pending', ago(100 * DAY), 0);
    // Inside the window:
    const recentEvent = await anEvent(ago(29 * DAY));
    const recentDone = await aDelivery(recentEvent, 'succeeded', ago(29 * DAY));

    // The poller has not read the log yet: no event may go, however old.
    let report = await audited(() => pruneOnce(db, policy, now()));
    expect(report).toMatchObject({ deliveries: 1, deadLetters: 1, attempts: 2 + 6, events: 0 });
    report = await pruneOnce(db, policy, now());
    expect(report.events).toBe(0);
    expect(await ids('events')).toContain(oldAlone);
    let deliveries = await ids('webhook_deliveries');
    expect(deliveries).not.toContain(oldDone);
    expect(deliveries).not.toContain(deadOld);
    for (const kept of [deadRecent, pendingOld, neverTried, recentDone]) expect(deliveries).toContain(kept);
    expect(await attemptsOf(oldDone)).toBe(0);
    expect(await attemptsOf(deadRecent)).toBe(6);

    // Now a worker reads the log and delivers a real change, which the receiver holds (in flight).
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    receiver.respond = (req, n, res, socket) => void released.then(() => ok(req, n, res, socket));
    const worker = await kit.startWorker();
    const product = await aProduct(db);
    await receiver.waitFor((r) => r.json.type === 'product.created' && (r.json.data as { id: string }).id === product.id);
    const inFlight = (
      await sql<{ id: string; locked_until: string | null; status: string }>`
      SELECT id::text, locked_until::text, status FROM webhook_deliveries WHERE event_type = 'product.created'`.execute(db)
    ).rows;
    expect(inFlight.length).toBeGreaterThan(0);
    expect(inFlight.every((d) => d.status === 'pending' && d.locked_until !== null)).toBe(true);

    const deliveriesInFlight = await ids('webhook_deliveries');
    report = await audited(() => pruneOnce(db, policy, now()));
    const events = await ids('events');
    expect(events).not.toContain(oldAlone);
    expect(events).not.toContain(oldDoneEvent);
    expect(events).not.toContain(deadOldEvent);
    for (const kept of [deadRecentEvent, pendingOldEvent, neverTriedEvent, recentEvent]) expect(events).toContain(kept);
    expect(report.events).toBe(3);
    expect(await ids('webhook_deliveries')).toEqual(deliveriesInFlight);

    // Two months on (scaled time): the dead letter and the recent success are past their time now;
    // the deliveries in flight and the one waiting for its retry still stay.
    const later = await audited(() => pruneOnce(db, policy, now() + 60 * DAY));
    expect(later).toMatchObject({ deliveries: 1, deadLetters: 1 });
    deliveries = await ids('webhook_deliveries');
    expect(deliveries).not.toContain(deadRecent);
    expect(deliveries).not.toContain(recentDone);
    for (const d of inFlight) expect(deliveries).toContain(d.id);
    expect(deliveries).toContain(pendingOld);
    expect(deliveries).toContain(neverTried);
    expect((await sql<{ status: string }>`SELECT status FROM webhook_deliveries WHERE id = ${neverTried}::uuid`.execute(db)).rows[0]!.status).toBe('pending');

    // The held deliveries complete normally after all that.
    release();
    await until(
      async () =>
        (
          await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM webhook_deliveries WHERE event_type = 'product.created' AND status = 'succeeded'`.execute(db)
        ).rows[0]!.n === inFlight.length,
    );
    await worker.stop();
    receiver.respond = ok;
  });

  it('prunes finished import jobs past IMPORT_JOB_RETENTION_MS, never a queued or running one however old', async () => {
    const policy = retentionPolicyOf(kit.t.ctx.config);
    /** An import job in `status`, made (and, when finished, ended) at `at`. */
    const aJob = async (status: 'queued' | 'running' | 'succeeded' | 'failed', at: string): Promise<string> => {
      const id = randomUUID();
      const finished = status === 'succeeded' || status === 'failed';
      await sql`INSERT INTO import_jobs (id, kind, status, body, rows_total, runner, heartbeat_at, created_at, started_at, finished_at, updated_at)
        VALUES (${id}::uuid, 'stock_csv', ${status}, ${finished ? null : 'sku,stock\nA,1\n'}, 1,
          ${status === 'running' ? 'a runner' : null}, ${status === 'running' ? isoFromMillis(now()) : null}::timestamptz,
          ${at}::timestamptz, ${status === 'queued' ? null : at}::timestamptz, ${finished ? at : null}::timestamptz, ${at}::timestamptz)`.execute(db);
      return id;
    };
    const oldSucceeded = await aJob('succeeded', ago(31 * DAY));
    const oldFailed = await aJob('failed', ago(40 * DAY));
    const recentSucceeded = await aJob('succeeded', ago(29 * DAY));
    const oldQueued = await aJob('queued', ago(100 * DAY));
    const oldRunning = await aJob('running', ago(100 * DAY));
    const jobs = async () => new Set((await sql<{ id: string }>`SELECT id::text FROM import_jobs`.execute(db)).rows.map((r) => r.id));

    const report = await audited(() => pruneOnce(db, policy, now()));
    expect(report.importJobs).toBe(2);
    let kept = await jobs();
    expect(kept).not.toContain(oldSucceeded);
    expect(kept).not.toContain(oldFailed);
    for (const id of [recentSucceeded, oldQueued, oldRunning]) expect(kept).toContain(id);

    // Two days on, the recent one is past its time too; the queued and running ones still stay.
    expect((await pruneOnce(db, policy, now() + 2 * DAY)).importJobs).toBe(1);
    kept = await jobs();
    expect(kept).not.toContain(recentSucceeded);
    for (const id of [oldQueued, oldRunning]) expect(kept).toContain(id);
    await sql`DELETE FROM import_jobs WHERE id IN (${oldQueued}::uuid, ${oldRunning}::uuid)`.execute(db);
  });

  it('tells readers how far back data goes: feed and replay 400 naming the oldest instant, stats', async () => {
    const oldest = (await sql<{ at: string }>`SELECT iso_utc(oldest_available) AS at FROM retention_watermarks WHERE table_name = 'events'`.execute(db))
      .rows[0]!.at;
    const read = await kit.t.auth(['products:read']);
    const feed = await kit.t.app.inject({ url: `/api/v1/events?cursor=${ago(31 * DAY)}`, headers: read });
    expect(feed.statusCode).toBe(400);
    expect(feed.json().errors[0]).toMatchObject({ param: 'cursor' });
    expect(feed.json().errors[0].message).toContain(`events before ${oldest} have been pruned`);

    const replay = await kit.api('POST', `/webhooks/endpoints/${endpointId}/replay`, { from: ago(31 * DAY), to: ago(DAY) });
    expect(replay.status).toBe(400);
    expect(replay.body.errors[0].param).toBe('from');
    expect(replay.body.errors[0].message).toContain(`the oldest available instant is ${oldest}`);
    expect((await kit.api('POST', `/webhooks/endpoints/${endpointId}/replay`, { from: oldest, to: isoFromMillis(Date.parse(oldest) + DAY) })).status).toBe(202);

    const stats = await kit.api('GET', '/webhooks/stats?hours=1');
    expect(stats.status).toBe(200);
    expect(stats.body.data.retention).toMatchObject({
      delivery_retention_ms: 30 * DAY,
      dead_letter_retention_ms: 90 * DAY,
      event_retention_ms: 30 * DAY,
      events_complete_since: oldest,
    });
    expect(stats.body.data.retention.deliveries_complete_since).toMatch(/Z$/);
    expect(stats.body.data.retention.oldest_delivery_at).toMatch(/Z$/);
  });

  it('runs in its own loop: a log line and metrics per run', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk, _enc, done) {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    );
    const runs = async () => await client.register.getSingleMetricAsString('store_api_retention_runs_total');
    const pruner = startRetentionPruner({ ...kit.t.ctx, logger });
    const report = await new Promise<PruneReport>((resolve, reject) => {
      pruner.events.once('pruned', resolve);
      pruner.events.once('pruneError', reject);
    });
    await pruner.stop();
    expect(report.durationMs).toBeGreaterThanOrEqual(0);
    expect(lines.find((l) => l.msg === 'retention pruning run')).toMatchObject({
      events: expect.any(Number),
      deliveries: expect.any(Number),
      dead_letters: expect.any(Number),
    });
    expect(await runs()).toMatch(/store_api_retention_runs_total\{result="ok"\} [1-9]/);
    expect(await client.register.getSingleMetricAsString('store_api_retention_pruned_rows_total')).toMatch(/table="events"/);
  });
});

/** Bounded polling for a condition (never a fixed sleep). */
async function until(condition: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
