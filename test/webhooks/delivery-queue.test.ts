/**
 * The delivery queue's promises, driven statement by statement with an explicit clock (no worker,
 * no receiver, no waiting): a settle is guarded by the claimant, a half-open endpoint gives exactly
 * one probe and that probe is the delivery most likely to show the endpoint is up, a worker that
 * died mid-attempt does not use up the retry budget, a rotated-out secret stops signing when its
 * overlap ends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import type { Database } from '../../src/db/schema.ts';
import { claimDueDeliveries, releaseDeliveries, settleDelivery, type ClaimOptions } from '../../src/webhooks/delivery-queue.ts';
import type { HttpAttemptResult } from '../../src/webhooks/webhook-http-client.ts';
import { isoFromMillis } from '../../src/shared/time.ts';

const OVERLAP_MS = 60_000;
const LEASE_MS = 10_000;
const SCHEDULE = [1000, 2000, 3000, 4000, 5000];
const BREAKER = { threshold: 10, pauseMs: 60_000 };

const success: HttpAttemptResult = { outcome: 'success', statusCode: 200, durationMs: 3, error: null, responseExcerpt: null, retryAfterMs: null };
const failure: HttpAttemptResult = { outcome: 'http_error', statusCode: 500, durationMs: 3, error: 'HTTP 500', responseExcerpt: 'down', retryAfterMs: null };

describe.each(backends)('delivery queue (%s)', (backend) => {
  let kit: WebhookTestKit;
  let db: Kysely<Database>;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, { WEBHOOK_SECRET_OVERLAP_MS: String(OVERLAP_MS) }, { worker: false });
    db = kit.t.ctx.database.db;
  });
  afterAll(async () => {
    await kit?.close();
  });

  const claim = (workerId: string, now: number, extra: Partial<ClaimOptions> = {}) =>
    claimDueDeliveries(db, {
      workerId,
      now,
      leaseMs: LEASE_MS,
      limit: 50,
      freeSlots: new Map(),
      endpointCapacity: 50,
      breaker: BREAKER,
      ...extra,
    });
  const settle = (workerId: string, delivery: Awaited<ReturnType<typeof claim>>[number], result: HttpAttemptResult, now: number) =>
    settleDelivery(db, delivery, result, { workerId, startedAt: now, now, retry: { scheduleMs: SCHEDULE }, breaker: BREAKER });
  const ping = async (endpointId: string): Promise<string> => (await kit.api('POST', `/webhooks/endpoints/${endpointId}/ping`)).body.data.delivery_id;
  const row = async (id: string) =>
    (
      await sql<{ status: string; locked_by: string | null; attempt_count: number; next_attempt_ms: number | null }>`
    SELECT status, locked_by, attempt_count, (extract(epoch FROM next_attempt_at) * 1000)::float8 AS next_attempt_ms
    FROM webhook_deliveries WHERE id = ${id}::uuid`.execute(db)
    ).rows[0]!;
  /** An endpoint no other test's deliveries belong to (claims below only see their own endpoint's rows). */
  const anEndpoint = async () => {
    const endpoint = await kit.createEndpoint(`http://127.0.0.1:9/${Math.random()}`);
    // Other endpoints of earlier tests stop competing for the claim.
    await sql`UPDATE webhook_endpoints SET enabled = false WHERE id <> ${endpoint.id}::uuid`.execute(db);
    return endpoint;
  };

  it('a settle changes nothing once the worker no longer holds the delivery (its lease expired and another worker claimed it)', async () => {
    const endpoint = await anEndpoint();
    const id = await ping(endpoint.id);
    const t0 = Date.now() + 1000;
    const [byA] = await claim('worker-a', t0);
    expect(byA?.id).toBe(id);
    // A's lease runs out; B claims the delivery again.
    const [byB] = await claim('worker-b', t0 + LEASE_MS + 1);
    expect(byB?.id).toBe(id);
    // A's late answer must not overwrite B's attempt.
    const late = await settle('worker-a', byA!, failure, t0 + LEASE_MS + 2);
    expect(late.settled).toBe(false);
    expect(await row(id)).toMatchObject({ status: 'pending', locked_by: 'worker-b' });
    const mine = await settle('worker-b', byB!, success, t0 + LEASE_MS + 3);
    expect(mine.settled).toBe(true);
    expect(await row(id)).toMatchObject({ status: 'succeeded', locked_by: null });
  });

  it('a half-open endpoint gives exactly one probe, to one worker, whatever the room', async () => {
    const endpoint = await anEndpoint();
    for (let i = 0; i < 5; i++) await ping(endpoint.id);
    const now = Date.now() + 1000;
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${BREAKER.threshold}, paused_until = ${isoFromMillis(now - 1)}::timestamptz
      WHERE id = ${endpoint.id}::uuid`.execute(db);
    const first = await claim('worker-a', now);
    expect(first).toHaveLength(1);
    expect(await claim('worker-b', now)).toHaveLength(0);
    // The probe re-armed the pause: nothing more until it ends.
    expect(await claim('worker-b', now + BREAKER.pauseMs - 1)).toHaveLength(0);
  });

  it('the probe after a pause is the due delivery with the fewest failed attempts, newest first, so a delivery the receiver keeps rejecting cannot keep the endpoint paused', async () => {
    const endpoint = await anEndpoint();
    const rejected = await ping(endpoint.id);
    const older = await ping(endpoint.id);
    const newest = await ping(endpoint.id);
    // The first one has failed three times already and is due again.
    const now = Date.now() + 1000;
    await sql`UPDATE webhook_deliveries SET status = 'failed', attempt_count = 3 WHERE id = ${rejected}::uuid`.execute(db);
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${BREAKER.threshold}, paused_until = ${isoFromMillis(now - 1)}::timestamptz
      WHERE id = ${endpoint.id}::uuid`.execute(db);
    const [probe] = await claim('worker-a', now);
    expect(probe?.id).toBe(newest);
    // It succeeds: the breaker closes, and the rest flow, never-failed ones before the rejected one.
    expect((await settle('worker-a', probe!, success, now + 1)).breaker).toMatchObject({ consecutiveFailures: 0 });
    // Room for one: the first attempt, not the retry of the rejected one.
    const one = await claim('worker-a', now + 2, { endpointCapacity: 1 });
    expect(one.map((d) => d.id)).toEqual([older]);
    expect(await releaseDeliveries(db, 'worker-a', one)).toBe(1);
    // Room for all: sent in that order.
    const rest = await claim('worker-a', now + 3);
    expect(rest.map((d) => d.id)).toEqual([older, rejected]);
  });

  it('a worker that died mid-attempt does not use up the retry budget: only attempts that reached the endpoint count', async () => {
    const endpoint = await anEndpoint();
    const id = await ping(endpoint.id);
    let now = Date.now() + 1000;
    // Three workers in a row die holding it (their leases expire unsettled).
    for (let crash = 0; crash < 3; crash++) {
      const [held] = await claim(`crashed-${crash}`, now);
      expect(held?.id).toBe(id);
      now += LEASE_MS + 1;
    }
    // Then every attempt reaches the receiver and fails: five retries on the schedule, then dead.
    for (let attempt = 1; attempt <= SCHEDULE.length + 1; attempt++) {
      const [held] = await claim('worker', now);
      expect(held?.id).toBe(id);
      expect(held!.attemptNumber).toBe(attempt);
      const settled = await settle('worker', held!, failure, now);
      if (attempt <= SCHEDULE.length) {
        expect(settled.settlement).toEqual({ status: 'failed', nextAttemptAt: now + SCHEDULE[attempt - 1]! });
        now += SCHEDULE[attempt - 1]!;
      } else {
        expect(settled.settlement).toEqual({ status: 'dead' });
      }
    }
    expect(await row(id)).toMatchObject({ status: 'dead', attempt_count: SCHEDULE.length + 1 });
    const outcomes = (
      await sql<{ outcome: string }>`SELECT outcome FROM webhook_attempts WHERE delivery_id = ${id}::uuid ORDER BY attempt_number, started_at`.execute(db)
    ).rows.map((r) => r.outcome);
    expect(outcomes.filter((o) => o === 'abandoned')).toHaveLength(3);
    expect(outcomes.filter((o) => o === 'http_error')).toHaveLength(SCHEDULE.length + 1);

    // The figures count what reached the receiver: the abandoned claims are not attempts there.
    // (The clock above ran ahead of the server's: the attempts move back into the windows.)
    await sql`UPDATE webhook_attempts SET started_at = started_at - interval '10 minutes' WHERE delivery_id = ${id}::uuid`.execute(db);
    const windows = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/stats`)).body.data;
    expect(windows.last_24h).toMatchObject({ attempts: SCHEDULE.length + 1, succeeded: 0, success_rate: 0 });
    expect(windows.last_7d).toMatchObject({ attempts: SCHEDULE.length + 1 });
    const hourly = (await kit.api('GET', '/webhooks/stats?hours=24')).body.data as { buckets: { failed: number }[] };
    const { rows: counted } = await sql<{ failed: number }>`
      SELECT count(*)::int AS failed FROM webhook_attempts
      WHERE started_at >= date_trunc('hour', now()) - interval '23 hours' AND outcome NOT IN ('success', 'abandoned')`.execute(db);
    expect(hourly.buckets.reduce((sum, b) => sum + b.failed, 0)).toBe(counted[0]!.failed);
  });

  it('a rotated-out secret signs alongside the new one during the overlap, and stops when it ends', async () => {
    const endpoint = await anEndpoint();
    const rotated = (await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/rotate-secret`)).body.data;
    expect(rotated.secret).not.toBe(endpoint.secret);
    const expiresAt = Date.parse(rotated.previous_secret_expires_at);
    await ping(endpoint.id);
    const [during] = await claim('worker-a', expiresAt - 1000);
    expect(during!.secrets).toEqual([rotated.secret, endpoint.secret]);
    await settle('worker-a', during!, success, expiresAt - 1000);
    await ping(endpoint.id);
    const [after] = await claim('worker-a', expiresAt + 1);
    expect(after!.secrets).toEqual([rotated.secret]);
    // The admin API says so too.
    await sql`UPDATE webhook_endpoints SET previous_secret_expires_at = ${isoFromMillis(Date.now() - 1)}::timestamptz WHERE id = ${endpoint.id}::uuid`.execute(
      db,
    );
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/secret`)).body.data.previous_secret_expires_at).toBeNull();
  });
});
