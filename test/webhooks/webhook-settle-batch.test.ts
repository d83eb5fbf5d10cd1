/**
 * Settle batches: attempts that finish together are settled in one transaction (one commit per
 * batch, not per delivery), and each still gets its own attempt record and final state.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { WebhookReceiver, ok } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';

/** The receiver answers in groups of this many, so that many attempts finish at the same moment. */
const GROUP = 8;

describe.each(backends)('webhook settle batches (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, { WEBHOOK_CONCURRENCY: '16', WEBHOOK_ENDPOINT_CONCURRENCY: '16' });
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
  });

  it('attempts finishing together share one settle transaction, each with its own attempt record', async () => {
    const held: Array<() => void> = [];
    receiver.respond = (req, n, res, socket) => {
      held.push(() => ok(req, n, res, socket));
      if (held.length === GROUP) for (const answer of held.splice(0)) answer();
    };
    const endpoint = await kit.createEndpoint(receiver.url);
    const deliveries = GROUP * 5;
    const done = waitForAttempts(kit.worker, deliveries, (r) => r.endpointId === endpoint.id);
    for (let i = 0; i < deliveries; i++) await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/ping`);
    const reports = await done;
    expect(reports.map((r) => r.settlement?.status)).toEqual(Array(deliveries).fill('succeeded'));

    const { rows } = await sql<{ attempts: number; deliveries: number; succeeded: number; transactions: number }>`
      SELECT count(*)::int AS attempts, count(DISTINCT a.delivery_id)::int AS deliveries,
        count(*) FILTER (WHERE d.status = 'succeeded' AND a.outcome = 'success')::int AS succeeded,
        count(DISTINCT a.xmin::text)::int AS transactions
      FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
      WHERE d.endpoint_id = ${endpoint.id}::uuid
    `.execute(kit.t.database.db);
    expect(rows[0]).toMatchObject({ attempts: deliveries, deliveries, succeeded: deliveries });
    // Rows written by one transaction share its xmin: fewer transactions than attempts means batches
    // (one per delivery before; here at most two per group of GROUP answered together). PostgreSQL
    // only: PGlite runs a settle transaction in-process before the next answer is even read off its
    // socket, so there attempts rarely wait for one another (and a commit costs no round trip).
    if (backend === 'postgres') expect(rows[0]!.transactions).toBeLessThan(deliveries);
    else expect(rows[0]!.transactions).toBeLessThanOrEqual(deliveries);
  });
});
