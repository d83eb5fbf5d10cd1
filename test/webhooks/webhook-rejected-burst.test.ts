/**
 * Healthy events never wait behind a burst of rejected payloads (decision 0029).
 * While an endpoint is paused, 40 events its receiver rejects (by payload: 422) are written before
 * 10 it accepts. When the pause ends the probe is a healthy one; after it, the 40 rejected first
 * attempts must not pause the endpoint again: the 10 healthy ones are delivered with no further
 * pause (the pause is 10 minutes, so one more would stall this test), and each rejected payload
 * gets its first attempt now and its retry on the retry schedule, not one attempt per pause.
 * Events written afterwards flow at once. Fan-out is driven by hand (pollEvents), then one worker.
 * Every order of writes is covered: rejected first, healthy first (the mirror), interleaved (runs of
 * refusals longer than the threshold between healthy events) and no healthy traffic at all.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import type { Database } from '../../src/db/schema.ts';
import { pollEvents } from '../../src/webhooks/event-poller.ts';
import { isoFromMillis } from '../../src/shared/time.ts';

const THRESHOLD = 10;
const PAUSE_MS = 600_000;
const RETRY_MS = 600_000;

describe.each(backends)('a burst of rejected payloads after a pause (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  let db: Kysely<Database>;

  beforeAll(async () => {
    kit = await webhookTestKit(
      backend,
      {
        WEBHOOK_BREAKER_THRESHOLD: String(THRESHOLD),
        WEBHOOK_BREAKER_PAUSE_MS: String(PAUSE_MS),
        WEBHOOK_RETRY_SCHEDULE_MS: Array(5).fill(RETRY_MS).join(','),
      },
      { worker: false },
    );
    db = kit.t.ctx.database.db;
    receiver = await new WebhookReceiver().start();
    // The receiver rejects some payloads and accepts the rest: it is up throughout.
    receiver.respond = (req, n, res, socket) =>
      String(req.json.data?.email).startsWith('rejected') ? res.writeHead(422).end('unprocessable') : ok(req, n, res, socket);
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  const customer = async (email: string) => {
    const res = await kit.api('POST', '/customers', { name: email, email });
    expect(res.status).toBe(201);
  };
  const fanOut = async (now: number) => {
    for (;;) if (!(await pollEvents(db, now)).more) return;
  };
  const endpointRow = async (id: string) =>
    (
      await sql<{ consecutive_failures: number; paused_until: string | null; recovered_at: string | null }>`
        SELECT consecutive_failures, paused_until, recovered_at FROM webhook_endpoints WHERE id = ${id}::uuid`.execute(db)
    ).rows[0]!;

  it('the healthy events go out after the probe with no further pause, and each rejected payload gets its first attempt, then the retry schedule', async () => {
    const endpoint = await kit.createEndpoint(receiver.url, { event_types: ['customer.created'] });
    // Paused by earlier failures: the events below pile up.
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${THRESHOLD}, paused_until = ${isoFromMillis(Date.now() + PAUSE_MS)}::timestamptz
      WHERE id = ${endpoint.id}::uuid`.execute(db);
    // Each event fanned out on its own, a millisecond apart: the queue holds them oldest first.
    const start = Date.now() - 1000;
    const emails = [...Array.from({ length: 40 }, (_, i) => `rejected-${i}@example.com`), ...Array.from({ length: 10 }, (_, i) => `healthy-${i}@example.com`)];
    for (const [i, email] of emails.entries()) {
      await customer(email);
      await fanOut(start + i);
    }
    const { rows: queued } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}::uuid AND status = 'pending'`.execute(db);
    expect(queued[0]!.n).toBe(50);

    // The pause ends.
    await sql`UPDATE webhook_endpoints SET paused_until = ${isoFromMillis(Date.now() - 1)}::timestamptz WHERE id = ${endpoint.id}::uuid`.execute(db);
    const worker = await kit.startWorker();
    // Fails at once if the endpoint is paused again (a further pause would be 10 minutes).
    const pausedAgain = new Promise<never>((_, reject) =>
      worker.events.on('attempt', (r) => {
        if (r.endpointId !== endpoint.id) return;
        void endpointRow(endpoint.id).then((row) => {
          if (row.consecutive_failures >= THRESHOLD) reject(new Error(`paused again after ${r.deliveryId}: ${JSON.stringify(row)}`));
        });
      }),
    );
    pausedAgain.catch(() => {});
    const attempts = await Promise.race([waitForAttempts(worker, 50, (r) => r.endpointId === endpoint.id, 60_000), pausedAgain]);

    // The probe was the newest event, a healthy one, and it closed the breaker; then the backlog
    // went out oldest first: the 40 rejected payloads, then the other 9 healthy ones.
    expect(attempts[0]!.result.outcome).toBe('success');
    expect(attempts.slice(1, 30).every((a) => a.result.outcome === 'http_error')).toBe(true);
    const byOutcome = (outcome: string) => attempts.filter((a) => a.result.outcome === outcome);
    expect(byOutcome('success')).toHaveLength(10);
    expect(byOutcome('http_error')).toHaveLength(40);
    expect(new Set(attempts.map((a) => a.deliveryId)).size).toBe(50);
    // Every healthy event reached the receiver once.
    expect(receiver.requests.filter((r) => String(r.json.data.email).startsWith('healthy'))).toHaveLength(10);
    // No further pause: the 40 refused first attempts of the backlog did not count.
    const after = await endpointRow(endpoint.id);
    expect(after).toMatchObject({ consecutive_failures: 0, paused_until: null });
    expect(after.recovered_at).not.toBeNull();
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data.state).toBe('active');
    // Each rejected payload was tried once and waits for its retry on the schedule.
    const { rows: rejected } = await sql<{ status: string; attempt_count: number; retry_in_ms: number }>`
      SELECT d.status, d.attempt_count,
        (extract(epoch FROM d.next_attempt_at - a.started_at) * 1000)::float8 AS retry_in_ms
      FROM webhook_deliveries d JOIN webhook_attempts a ON a.delivery_id = d.id
      WHERE d.endpoint_id = ${endpoint.id}::uuid AND d.status <> 'succeeded'`.execute(db);
    expect(rejected).toHaveLength(40);
    for (const r of rejected) {
      expect(r).toMatchObject({ status: 'failed', attempt_count: 1 });
      // Retry after the schedule's first delay, counted from the end of the attempt.
      expect(r.retry_in_ms).toBeGreaterThanOrEqual(RETRY_MS);
      expect(r.retry_in_ms).toBeLessThan(RETRY_MS + 60_000);
    }

    // Healthy events written now go out at once.
    const next = waitForAttempts(worker, 3, (r) => r.endpointId === endpoint.id && r.result.outcome === 'success', 60_000);
    for (let i = 10; i < 13; i++) await customer(`healthy-${i}@example.com`);
    expect(await next).toHaveLength(3);
    await worker.stop();
  });

  it('the mirror: healthy events written first, rejected ones after; the probe is a rejected payload, and its refusal closes the breaker instead of costing the healthy events another pause', async () => {
    // The first case's endpoint (same receiver) no longer listens.
    await sql`UPDATE webhook_endpoints SET enabled = false`.execute(db);
    const endpoint = await kit.createEndpoint(receiver.url, { event_types: ['customer.created'] });
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${THRESHOLD}, paused_until = ${isoFromMillis(Date.now() + PAUSE_MS)}::timestamptz
      WHERE id = ${endpoint.id}::uuid`.execute(db);
    const start = Date.now() - 1000;
    const emails = [...Array.from({ length: 10 }, (_, i) => `healthy-m${i}@example.com`), ...Array.from({ length: 8 }, (_, i) => `rejected-m${i}@example.com`)];
    for (const [i, email] of emails.entries()) {
      await customer(email);
      await fanOut(start + i);
    }
    await sql`UPDATE webhook_endpoints SET paused_until = ${isoFromMillis(Date.now() - 1)}::timestamptz WHERE id = ${endpoint.id}::uuid`.execute(db);
    const worker = await kit.startWorker();
    const pausedAgain = new Promise<never>((_, reject) =>
      worker.events.on('attempt', (r) => {
        if (r.endpointId !== endpoint.id) return;
        void endpointRow(endpoint.id).then((row) => {
          if (row.paused_until !== null && Date.parse(row.paused_until) > Date.now())
            reject(new Error(`paused again after ${r.deliveryId}: ${JSON.stringify(row)}`));
        });
      }),
    );
    pausedAgain.catch(() => {});
    const attempts = await Promise.race([waitForAttempts(worker, 18, (r) => r.endpointId === endpoint.id, 60_000), pausedAgain]);
    // The probe: the newest event, a rejected payload (422). Before the fix each such probe re-paused
    // the endpoint for the whole pause (10 minutes here: this wait would time out).
    expect(attempts[0]!.result).toMatchObject({ outcome: 'http_error', statusCode: 422 });
    expect(attempts.filter((a) => a.result.outcome === 'success')).toHaveLength(10);
    expect(receiver.requests.filter((r) => String(r.json.data.email).startsWith('healthy-m'))).toHaveLength(10);
    // Each rejected payload once, then its retry schedule; the endpoint active, recovered.
    expect(attempts.filter((a) => a.result.outcome === 'http_error')).toHaveLength(8);
    const after = await endpointRow(endpoint.id);
    expect(after).toMatchObject({ consecutive_failures: 0, paused_until: null });
    expect(after.recovered_at).not.toBeNull();
    await worker.stop();
  });

  /**
   * Pauses a fresh endpoint, writes `emails` in that order (each fanned out on its own), ends the
   * pause and starts one worker; fails at once if the endpoint is paused again (a further pause is
   * 10 minutes: one attempt per pause would time this wait out too). Returns the attempts.
   */
  const burstAfterPause = async (emails: readonly string[]) => {
    await sql`UPDATE webhook_endpoints SET enabled = false`.execute(db);
    const endpoint = await kit.createEndpoint(receiver.url, { event_types: ['customer.created'] });
    await sql`UPDATE webhook_endpoints SET consecutive_failures = ${THRESHOLD}, paused_until = ${isoFromMillis(Date.now() + PAUSE_MS)}::timestamptz
      WHERE id = ${endpoint.id}::uuid`.execute(db);
    const start = Date.now() - 1000;
    for (const [i, email] of emails.entries()) {
      await customer(email);
      await fanOut(start + i);
    }
    await sql`UPDATE webhook_endpoints SET paused_until = ${isoFromMillis(Date.now() - 1)}::timestamptz WHERE id = ${endpoint.id}::uuid`.execute(db);
    const worker = await kit.startWorker();
    const pausedAgain = new Promise<never>((_, reject) =>
      worker.events.on('attempt', (r) => {
        if (r.endpointId !== endpoint.id) return;
        void endpointRow(endpoint.id).then((row) => {
          if (row.paused_until !== null && Date.parse(row.paused_until) > Date.now())
            reject(new Error(`paused again after ${r.deliveryId}: ${JSON.stringify(row)}`));
        });
      }),
    );
    pausedAgain.catch(() => {});
    try {
      const attempts = await Promise.race([waitForAttempts(worker, emails.length, (r) => r.endpointId === endpoint.id, 60_000), pausedAgain]);
      return { endpoint, attempts };
    } finally {
      await worker.stop();
    }
  };
  /** Each rejected payload of `endpointId` was tried once and waits for its retry; the endpoint is active, recovered. */
  const expectRejectedTriedOnce = async (endpointId: string, rejected: number) => {
    const { rows } = await sql<{ status: string; attempt_count: number }>`
      SELECT status, attempt_count FROM webhook_deliveries WHERE endpoint_id = ${endpointId}::uuid AND status <> 'succeeded'`.execute(db);
    expect(rows).toHaveLength(rejected);
    for (const r of rows) expect(r).toMatchObject({ status: 'failed', attempt_count: 1 });
    const after = await endpointRow(endpointId);
    expect(after).toMatchObject({ consecutive_failures: 0, paused_until: null });
    expect(after.recovered_at).not.toBeNull();
  };

  it('interleaved: runs of rejected payloads longer than the threshold between healthy events; no further pause, each rejected payload tried once', async () => {
    // 12 rejected, 2 healthy, three times over: each run of refusals alone would reach the threshold.
    const emails = [0, 1, 2].flatMap((run) => [
      ...Array.from({ length: THRESHOLD + 2 }, (_, i) => `rejected-i${run}-${i}@example.com`),
      ...Array.from({ length: 2 }, (_, i) => `healthy-i${run}-${i}@example.com`),
    ]);
    const { endpoint, attempts } = await burstAfterPause(emails);
    expect(new Set(attempts.map((a) => a.deliveryId)).size).toBe(emails.length);
    expect(attempts.filter((a) => a.result.outcome === 'success')).toHaveLength(6);
    expect(attempts.filter((a) => a.result.outcome === 'http_error')).toHaveLength(3 * (THRESHOLD + 2));
    expect(receiver.requests.filter((r) => String(r.json.data.email).startsWith('healthy-i'))).toHaveLength(6);
    await expectRejectedTriedOnce(endpoint.id, 3 * (THRESHOLD + 2));
  });

  it('no healthy traffic: every untried rejected payload is tried at the end of the pause, together, not one per pause', async () => {
    const count = 3 * THRESHOLD;
    const emails = Array.from({ length: count }, (_, i) => `rejected-n${i}@example.com`);
    const { endpoint, attempts } = await burstAfterPause(emails);
    // The probe (a refusal) shows the receiver is up; the rest of the backlog follows at once.
    expect(attempts.every((a) => a.result.outcome === 'http_error' && a.result.statusCode === 422)).toBe(true);
    expect(new Set(attempts.map((a) => a.deliveryId)).size).toBe(count);
    await expectRejectedTriedOnce(endpoint.id, count);
  });
});
