/**
 * A broker restarted in the middle of a burst loses no event (decision 0031), on both back
 * ends. Mosquitto and nats-server are brokers of the test's own on a spare port (a persistent
 * store in a directory of their own), stopped with SIGTERM and started again; RabbitMQ is the
 * machine's, behind a TCP proxy of the test's own that resets every connection and refuses new
 * ones, then lets them through again (starting a second RabbitMQ node per test is too heavy for
 * this machine; to the publisher a proxy cut and a broker restart look the same: connections
 * reset, confirms lost, connects refused). The worker's attempts fail meanwhile, are retried on
 * the (shrunk) schedule, and every event arrives; duplicates are counted and bounded by the failed
 * attempts (we send a message twice only when the broker took it and its acknowledgement was lost)
 * plus the broker's own redeliveries to the consumer (a restarted Mosquitto re-sends what its
 * persistent session had in flight, with the DUP flag).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { backends } from '../helpers/test-database.ts';
import { createCustomer } from '../../src/customers/customer.service.ts';
import type { AttemptReport } from '../../src/webhooks/webhook-worker.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import { amqpConsumer, mosquittoOn, mqttConsumer, natsConsumer, natsServerOn, sparePort, TcpProxy, RABBITMQ, type MessageLog } from './broker-kit.ts';

const BURST = 60;

describe.each(backends)('a broker restarted mid-burst (%s)', (backend) => {
  let kit: WebhookTestKit;

  beforeAll(async () => {
    kit = await webhookTestKit(backend, {
      WEBHOOK_RETRY_SCHEDULE_MS: '100,200,400,800,1600',
      WEBHOOK_BREAKER_THRESHOLD: '10000',
      WEBHOOK_TIMEOUT_MS: '3000',
      WEBHOOK_LEASE_MS: '8000',
    });
  });
  afterAll(async () => {
    await kit?.close();
  });

  /**
   * Registers `url`, sends a burst of BURST customer.created events, runs `cut` after 10 have been
   * delivered and `restore` after an attempt failed, and waits until every delivery succeeded.
   * Returns the attempts to the endpoint.
   */
  async function burstAcrossRestart(url: string, cut: () => Promise<void> | void, restore: () => Promise<void> | void) {
    const endpoint = await kit.createEndpoint(url, { event_types: ['customer.created'] });
    const reports: AttemptReport[] = [];
    const succeeded = new Set<string>();
    let allDone: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      allDone = resolve;
    });
    const listener = (r: AttemptReport) => {
      if (r.endpointId !== endpoint.id) return;
      reports.push(r);
      if (r.settlement?.status === 'succeeded') succeeded.add(r.deliveryId);
      if (succeeded.size >= BURST) allDone();
    };
    kit.worker.events.on('attempt', listener);
    try {
      const first = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id, 60_000);
      const firstTen = waitForAttempts(kit.worker, 10, (r) => r.endpointId === endpoint.id && r.result.outcome === 'success', 60_000);
      const burst = (async () => {
        for (let i = 0; i < BURST; i++) await createCustomer(kit.t.database.db, { name: `Burst ${i}` });
      })();
      // A broken path fails here, on the recorded attempt, not by a wait for successes timing out.
      const [firstAttempt] = await first;
      expect(firstAttempt!.result, `the first attempt before the cut: ${JSON.stringify(firstAttempt!.result)}`).toMatchObject({ outcome: 'success' });
      await firstTen;
      const failed = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id && r.result.outcome !== 'success', 60_000);
      await cut();
      await failed;
      await restore();
      await burst;
      await done;
    } finally {
      kit.worker.events.off('attempt', listener);
    }
    const deliveries = await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint.id}&limit=200`);
    expect(deliveries.body.data).toHaveLength(BURST);
    expect(deliveries.body.data.filter((d: { status: string }) => d.status !== 'succeeded')).toEqual([]);
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    return { endpoint, reports };
  }

  /**
   * 0 lost, every message signed; duplicates counted and bounded: each is a re-send of ours (at most
   * one per failed attempt: an attempt whose acknowledgement was lost) or the broker delivering a
   * message to the consumer again after its restart (flagged as such by the protocol: at-least-once
   * holds on that leg too).
   */
  function expectNothingLost(name: string, log: MessageLog, secret: string, reports: AttemptReport[]) {
    const distinct = log.distinct();
    expect(distinct.size, `${name}: events received`).toBe(BURST);
    for (const message of log.messages) new Webhook(secret).verify(message.body, message.headers);
    const duplicates = log.messages.length - distinct.size;
    const failedAttempts = reports.filter((r) => r.result.outcome !== 'success').length;
    expect(failedAttempts).toBeGreaterThan(0);
    const redelivered = log.messages.filter((m) => m.redelivered).length;
    expect(
      duplicates,
      `${name}: duplicates (${duplicates}) bounded by the failed attempts (${failedAttempts}) and the broker's redeliveries (${redelivered})`,
    ).toBeLessThanOrEqual(failedAttempts + redelivered);
    console.info(
      `${name} (${backend}): ${BURST} events, 0 lost, ${duplicates} duplicates (${redelivered} redelivered by the broker), ${failedAttempts} failed attempts across the restart`,
    );
  }

  it('Mosquitto (own broker on a spare port, SIGTERM and start again)', { timeout: 180_000 }, async () => {
    const port = await sparePort();
    const broker = mosquittoOn(port);
    await broker.start();
    const consumer = await mqttConsumer(port);
    try {
      const endpointUrl = `mqtt://127.0.0.1:${port}/${consumer.prefix}`;
      const { endpoint, reports } = await burstAcrossRestart(
        endpointUrl,
        () => broker.stop(),
        () => broker.start(),
      );
      // Messages the restarted broker kept for the subscriber's session arrive once it is back.
      await consumer.log.waitFor((l) => l.distinct().size >= BURST, 60_000, 'every event at the subscriber');
      const secret = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/secret`)).body.data.secret;
      expectNothingLost('mosquitto', consumer.log, secret, reports);
    } finally {
      await consumer.close();
      await broker.close();
    }
  });

  it('NATS JetStream (own nats-server on a spare port, SIGTERM and start again)', { timeout: 180_000 }, async () => {
    const port = await sparePort();
    const broker = natsServerOn(port);
    await broker.start();
    const consumer = await natsConsumer(port);
    try {
      const { endpoint, reports } = await burstAcrossRestart(
        `nats://127.0.0.1:${port}/${consumer.prefix}`,
        () => broker.stop(),
        () => broker.start(),
      );
      await consumer.readAll();
      const secret = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/secret`)).body.data.secret;
      expectNothingLost('nats', consumer.log, secret, reports);
    } finally {
      await consumer.close();
      await broker.close();
    }
  });

  it('RabbitMQ (the machine broker behind a TCP proxy that is cut and restored)', { timeout: 180_000 }, async () => {
    const proxy = await new TcpProxy(RABBITMQ).start();
    const consumer = await amqpConsumer();
    try {
      const { endpoint, reports } = await burstAcrossRestart(
        `amqp://guest:guest@127.0.0.1:${proxy.port}/?exchange=${consumer.exchange}`,
        () => proxy.cut(),
        () => proxy.restore(),
      );
      await consumer.log.waitFor((l) => l.distinct().size >= BURST, 60_000, 'every event in the queue');
      const secret = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/secret`)).body.data.secret;
      expectNothingLost('rabbitmq', consumer.log, secret, reports);
    } finally {
      await consumer.close();
      await proxy.close();
    }
  });
});
