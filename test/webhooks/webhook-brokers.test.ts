/**
 * Broker destinations (decision 0031) against the machine's real brokers — RabbitMQ
 * 127.0.0.1:5672, Mosquitto 127.0.0.1:1883, NATS JetStream 127.0.0.1:4222 — on both back ends: an
 * endpoint per broker receives every subscribed event, signed (verified with the public
 * `standardwebhooks` package from the message's headers and body) and equal to the read API's
 * record; a broker that is down, refuses the credentials, lacks the exchange or stream, or drops
 * the message is a failed attempt with its reason recorded; the password is never shown; bad URLs
 * are 400 naming `url`; connections close when the endpoint changes and on shutdown.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDeepStrictEqual } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { createCustomer } from '../../src/customers/customer.service.ts';
import { sql } from 'kysely';
import client from 'prom-client';
import { startWebhookWorker, type WebhookWorker } from '../../src/webhooks/webhook-worker.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import { amqpConsumer, mqttConsumer, natsConsumer, sparePort, TcpProxy, RABBITMQ, MOSQUITTO, NATS, type MessageLog } from './broker-kit.ts';

/** Checks every message of `log`: signed with `secret`, body = the read API's record, address as the kind says. */
async function expectSignedRecords(log: MessageLog, secret: string, address: (type: string) => string, read: (id: string) => Promise<unknown>) {
  for (const message of log.messages) {
    const verified = new Webhook(secret).verify(message.body, message.headers) as { id: string; type: string; data: { id: string } };
    expect(verified.id).toBe(message.headers['webhook-id']);
    expect(message.address).toBe(address(verified.type));
    expect(isDeepStrictEqual(verified.data, await read(verified.data.id)), `${verified.type} ${verified.data.id} equals the read API's record`).toBe(true);
    // A tampered body does not verify.
    expect(() => new Webhook(secret).verify(message.body.replace('"data"', '"dat4"'), message.headers)).toThrow();
  }
}

describe.each(backends)('broker destinations (%s)', (backend) => {
  let kit: WebhookTestKit;
  let reader: { authorization: string };
  const read = async (id: string) => {
    const res = await kit.t.app.inject({ url: `/api/v1/customers/${id}`, headers: reader });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().data;
  };

  beforeAll(async () => {
    kit = await webhookTestKit(backend, { WEBHOOK_RETRY_SCHEDULE_MS: '200,400,800,1600,3200', WEBHOOK_BREAKER_THRESHOLD: '1000', WEBHOOK_TIMEOUT_MS: '4000' });
    reader = await kit.t.auth();
  });
  afterAll(async () => {
    await kit?.close();
  });

  it('a FIFO endpoint on RabbitMQ gets one confirmed message per event, in the order the events were written', { timeout: 120_000 }, async () => {
    const amqp = await amqpConsumer();
    try {
      const endpoint = await kit.createEndpoint(`amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=${amqp.exchange}`, {
        event_types: ['customer.created'],
        delivery_order: 'fifo',
        batch_size: 4,
      });
      const n = 10;
      const first = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id, 60_000);
      for (let i = 0; i < n; i++) await createCustomer(kit.t.database.db, { name: `FIFO broker ${i}`, email: `fifo-broker${i}@example.com` });
      // A broken path fails here, on the recorded attempt, not by the wait for messages timing out.
      const [firstAttempt] = await first;
      expect(firstAttempt!.result, `the first attempt: ${JSON.stringify(firstAttempt!.result)}`).toMatchObject({ outcome: 'success' });
      await amqp.log.waitFor((l) => l.distinct().size >= n);
      const { rows } = await sql<{ event_id: string }>`
        SELECT d.event_id FROM webhook_deliveries d JOIN events ev ON ev.store_id = d.store_id AND ev.id = d.event_id
        WHERE d.endpoint_id = ${endpoint.id}::uuid ORDER BY ev.created_at, ev.seq
      `.execute(kit.t.database.db);
      expect([...amqp.log.distinct()]).toEqual(rows.map((r) => r.event_id));
      for (const message of amqp.log.messages) expect(() => new Webhook(endpoint.secret).verify(message.body, message.headers)).not.toThrow();
      await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    } finally {
      await amqp.close();
    }
  });

  it('delivers every subscribed event to RabbitMQ, Mosquitto and NATS JetStream, signed and equal to the read API record', { timeout: 120_000 }, async () => {
    const amqp = await amqpConsumer();
    const mqtt = await mqttConsumer();
    const nats = await natsConsumer();
    try {
      const subscribed = { event_types: ['customer.created'] };
      const toAmqp = await kit.createEndpoint(`amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=${amqp.exchange}`, subscribed);
      const toMqtt = await kit.createEndpoint(`mqtt://${MOSQUITTO.host}:${MOSQUITTO.port}/${mqtt.prefix}`, subscribed);
      const toNats = await kit.createEndpoint(`nats://${NATS.host}:${NATS.port}/${nats.prefix}`, subscribed);
      const n = 12;
      const attempts = waitForAttempts(kit.worker, 3 * n, (r) => [toAmqp.id, toMqtt.id, toNats.id].includes(r.endpointId), 90_000);
      const ids: string[] = [];
      for (let i = 0; i < n; i++)
        ids.push(((await createCustomer(kit.t.database.db, { name: `Broker ${i}`, email: `broker${i}@example.com` })) as { id: string }).id);
      const reports = await attempts;
      expect(reports.filter((r) => r.result.outcome !== 'success').map((r) => r.result)).toEqual([]);
      await amqp.log.waitFor((l) => l.distinct().size >= n);
      await mqtt.log.waitFor((l) => l.distinct().size >= n);
      await nats.readAll();

      await expectSignedRecords(amqp.log, toAmqp.secret, (type) => type, read);
      await expectSignedRecords(mqtt.log, toMqtt.secret, (type) => `${mqtt.prefix}/${type}`, read);
      await expectSignedRecords(nats.log, toNats.secret, (type) => `${nats.prefix}.${type}`, read);
      for (const log of [amqp.log, mqtt.log, nats.log]) {
        expect(log.messages).toHaveLength(n);
        expect([...log.messages.map((m) => (JSON.parse(m.body) as { data: { id: string } }).data.id)].sort()).toEqual([...ids].sort());
      }
      // The admin API records them as any delivery: succeeded, one attempt, no status code.
      for (const endpoint of [toAmqp, toMqtt, toNats]) {
        const list = await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint.id}&limit=200`);
        expect(list.body.data).toHaveLength(n);
        expect(list.body.data.every((d: { status: string; attempt_count: number }) => d.status === 'succeeded' && d.attempt_count === 1)).toBe(true);
        // The broker's acknowledgement is its answer: the endpoint's statistics show its latency.
        const stats = (await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/stats`)).body.data.last_24h;
        expect(stats).toMatchObject({ attempts: n, succeeded: n, responses: n });
        expect(stats.latency_p50_ms).toEqual(expect.any(Number));
        expect(stats.latency_p95_ms).toEqual(expect.any(Number));
      }
      // On /metrics each attempt counts under its destination kind (this file's deliveries add up across back ends).
      const attempted = (await client.register.getSingleMetric('store_api_webhook_deliveries_attempted_total')!.get()).values;
      for (const kind of ['amqp', 'mqtt', 'nats']) {
        const counted = attempted.filter((v) => v.labels.destination_kind === kind && v.labels.outcome === 'success').reduce((sum, v) => sum + v.value, 0);
        expect(counted, kind).toBeGreaterThanOrEqual(n);
      }
      const shown = await kit.api('GET', '/webhooks/endpoints');
      expect(Object.fromEntries(shown.body.data.map((e: { id: string; destination: string }) => [e.id, e.destination]))).toMatchObject({
        [toAmqp.id]: 'amqp',
        [toMqtt.id]: 'mqtt',
        [toNats.id]: 'nats',
      });

      // A test event and a ping go out the same way, marked as a test by a header.
      const testSent = waitForAttempts(kit.worker, 1, (r) => r.endpointId === toNats.id);
      const test = await kit.api('POST', `/webhooks/endpoints/${toNats.id}/test-events`, { type: 'customer.created' });
      expect(test.status).toBe(202);
      const [testAttempt] = await testSent;
      expect(testAttempt!.deliveryId).toBe(test.body.data.delivery_id);
      expect(testAttempt!.result.outcome).toBe('success');
      await nats.readAll();
      const testMessage = nats.log.messages.find((m) => m.headers['webhook-id'] === test.body.data.event_id)!;
      expect(testMessage.headers['webhook-test']).toBe('true');
      expect(new Webhook(toNats.secret).verify(testMessage.body, testMessage.headers)).toMatchObject({ type: 'customer.created', test: true });
      for (const endpoint of [toAmqp, toMqtt, toNats]) await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    } finally {
      await amqp.close();
      await mqtt.close();
      await nats.close();
    }
  });

  it('records a failed attempt with its reason when the broker is down, refuses the credentials, lacks the exchange or stream, or drops the message; retries on the schedule', {
    timeout: 90_000,
  }, async () => {
    const amqp = await amqpConsumer();
    const nowhere = await sparePort();
    const unbound = `store-test-unbound-${Date.now()}`;
    await amqp.channel.assertExchange(unbound, 'topic', { durable: false, autoDelete: false });
    try {
      const cases = [
        { url: `amqp://${RABBITMQ.host}:${nowhere}/?exchange=x`, outcome: 'connection_error', error: /ECONNREFUSED/ },
        {
          url: `amqp://guest:not-the-Pa55word@${RABBITMQ.host}:${RABBITMQ.port}/?exchange=${amqp.exchange}`,
          outcome: 'connection_error',
          error: /refused the credentials/,
        },
        {
          url: `amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/no-such-vhost?exchange=${amqp.exchange}`,
          outcome: 'connection_error',
          error: /virtual host 'no-such-vhost' does not exist on the broker, or the user may not use it/,
        },
        {
          url: `amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/?exchange=no-such-exchange-${Date.now()}`,
          outcome: 'broker_rejected',
          error: /exchange 'no-such-exchange-\d+' not found/,
        },
        {
          url: `amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/?exchange=${unbound}`,
          outcome: 'broker_rejected',
          error: /unroutable: no queue is bound/,
        },
        { url: `mqtt://${MOSQUITTO.host}:${nowhere}/store-test`, outcome: 'connection_error', error: /ECONNREFUSED/ },
        { url: `mqtt://${MOSQUITTO.host}:${MOSQUITTO.port}/store-test-nobody-${Date.now()}`, outcome: 'broker_rejected', error: /no subscriber matches topic/ },
        { url: `nats://${NATS.host}:${nowhere}/store_test`, outcome: 'connection_error', error: /CONNECTION_REFUSED|ECONNREFUSED|refused/i },
        {
          url: `nats://${NATS.host}:${NATS.port}/store_test_nostream_${Date.now()}`,
          outcome: 'broker_rejected',
          error: /no JetStream stream captures subject/,
        },
      ];
      for (const c of cases) {
        const endpoint = await kit.createEndpoint(c.url, { event_types: ['customer.created'] });
        const two = waitForAttempts(kit.worker, 2, (r) => r.endpointId === endpoint.id, 60_000);
        await createCustomer(kit.t.database.db, { name: 'Failing broker' });
        const [first, second] = await two;
        expect(first!.result, c.url).toMatchObject({ outcome: c.outcome, statusCode: null });
        expect(first!.result.error, c.url).toMatch(c.error);
        expect(first!.result.error).not.toContain('not-the-Pa55word');
        // Failed, then retried on the schedule (the second attempt of the same delivery), counted by the breaker.
        expect(first!.settlement).toMatchObject({ status: 'failed' });
        expect(second!.deliveryId).toBe(first!.deliveryId);
        expect(second!.attemptNumber).toBe(2);
        const delivery = await kit.api('GET', `/webhooks/deliveries/${first!.deliveryId}`);
        expect(delivery.body.data.attempts[0]).toMatchObject({ outcome: c.outcome, status_code: null });
        expect(delivery.body.data.attempts[0].error).toMatch(c.error);
        const shown = await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`);
        expect(shown.body.data.consecutive_failures).toBeGreaterThanOrEqual(2);
        await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
      }
    } finally {
      await amqp.channel.deleteExchange(unbound);
      await amqp.close();
    }
  });

  it('dead-letters after the last retry, and a bulk retry and a replay deliver once the stream exists; stats count the attempts', {
    timeout: 90_000,
  }, async () => {
    const prefix = `store_test_dead_${Date.now()}`;
    const endpoint = await kit.createEndpoint(`nats://${NATS.host}:${NATS.port}/${prefix}`, { event_types: ['customer.created'] });
    const six = waitForAttempts(kit.worker, 6, (r) => r.endpointId === endpoint.id, 60_000);
    const customer = (await createCustomer(kit.t.database.db, { name: 'Dead letter' })) as { id: string };
    const attempts = await six;
    expect(attempts.map((r) => r.settlement?.status)).toEqual(['failed', 'failed', 'failed', 'failed', 'failed', 'dead']);
    expect(attempts.every((r) => r.result.outcome === 'broker_rejected')).toBe(true);

    const nats = await natsConsumer(NATS.port, prefix);
    try {
      const retried = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
      const bulk = await kit.api('POST', '/webhooks/deliveries/retry', { endpoint_id: endpoint.id, all_dead: true });
      expect(bulk.body.data).toEqual({ retried: 1 });
      expect((await retried)[0]).toMatchObject({ result: { outcome: 'success' }, settlement: { status: 'succeeded' } });

      const replayed = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
      // The replay's range holds just this event: from its instant to the next millisecond.
      const createdAt = (await kit.api('GET', `/webhooks/deliveries/${attempts[0]!.deliveryId}`)).body.data.event.created_at as string;
      const to = new Date(Math.floor(Date.parse(createdAt)) + 1).toISOString();
      const replay = await kit.api('POST', `/webhooks/endpoints/${endpoint.id}/replay`, { from: createdAt, to });
      expect(replay.body.data).toEqual({ queued: 1 });
      expect((await replayed)[0]!.result.outcome).toBe('success');

      await nats.readAll();
      // The retried dead letter and the replay: two deliveries of the one event, each signed, the same event id.
      expect(nats.log.messages).toHaveLength(2);
      for (const m of nats.log.messages) {
        expect(new Webhook(endpoint.secret).verify(m.body, m.headers)).toMatchObject({ type: 'customer.created', data: { id: customer.id } });
      }
      expect(nats.log.distinct().size).toBe(1);
      const stats = await kit.api('GET', `/webhooks/endpoints/${endpoint.id}/stats`);
      expect(stats.body.data.last_24h).toMatchObject({ attempts: 8, succeeded: 2 });
      await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    } finally {
      await nats.close();
    }
  });

  it('a NATS re-publish of one delivery (its worker published, then lost the lease before settling) is dropped by the stream: the delivery id is the JetStream message id', {
    timeout: 60_000,
  }, async () => {
    const nats = await natsConsumer();
    try {
      const endpoint = await kit.createEndpoint(`nats://${NATS.host}:${NATS.port}/${nats.prefix}`, { event_types: ['customer.created'] });
      const first = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
      await createCustomer(kit.t.database.db, { name: 'Published twice' });
      const [published] = await first;
      expect(published!.result).toMatchObject({ outcome: 'success' });
      // As if the publish had gone out but its settle never came: the delivery is due again.
      const again = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
      await sql`UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now() WHERE id = ${published!.deliveryId}::uuid`.execute(kit.t.database.db);
      const [republished] = await again;
      expect(republished).toMatchObject({ deliveryId: published!.deliveryId, result: { outcome: 'success' } });
      // Both publishes carried the delivery id as Nats-Msg-Id; the stream kept one message.
      await nats.readAll();
      expect(nats.log.messages).toHaveLength(1);
      expect(nats.log.messages[0]!.headers['Nats-Msg-Id']).toBe(published!.deliveryId);
      await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
    } finally {
      await nats.close();
    }
  });

  it('never shows the password after creation: admin API, deliveries and audit log; an edit sent back as shown keeps it', { timeout: 60_000 }, async () => {
    const proxy = await new TcpProxy(RABBITMQ).start();
    const amqp = await amqpConsumer();
    try {
      const url = `amqp://guest:guest@127.0.0.1:${proxy.port}/%2F?exchange=${amqp.exchange}`;
      const created = await kit.api('POST', '/webhooks/endpoints', { url, event_types: ['customer.created'] });
      expect(created.status).toBe(201);
      const shownUrl = `amqp://guest:****@127.0.0.1:${proxy.port}/%2F?exchange=${amqp.exchange}`;
      expect(created.body.data).toMatchObject({ url: shownUrl, destination: 'amqp' });
      const id = created.body.data.id as string;
      expect((await kit.api('GET', `/webhooks/endpoints/${id}`)).body.data.url).toBe(shownUrl);
      const first = waitForAttempts(kit.worker, 1, (r) => r.endpointId === id);
      await createCustomer(kit.t.database.db, { name: 'Redacted' });
      expect((await first)[0]!.result.outcome).toBe('success');
      expect(proxy.open).toBe(1);

      // The dashboard's edit form sends the URL back as shown: the stored password stays, deliveries go on.
      const edited = await kit.api('PATCH', `/webhooks/endpoints/${id}`, { url: shownUrl, description: 'ERP bus' });
      expect(edited.status).toBe(200);
      const second = waitForAttempts(kit.worker, 1, (r) => r.endpointId === id);
      await createCustomer(kit.t.database.db, { name: 'Still delivered' });
      expect((await second)[0]!.result.outcome).toBe('success');

      const deliveries = await kit.api('GET', `/webhooks/deliveries?endpoint_id=${id}`);
      expect(deliveries.body.data[0].endpoint_url).toBe(shownUrl);
      const audit = await kit.t.app.inject({ url: '/admin/api/v1/audit-log?limit=200', headers: kit.admin });
      expect(audit.statusCode, audit.body).toBe(200);
      expect(audit.body).toContain(`guest:****@127.0.0.1:${proxy.port}`);
      for (const body of [audit.body, JSON.stringify(deliveries.body), JSON.stringify((await kit.api('GET', '/webhooks/endpoints')).body)]) {
        expect(body).not.toContain('guest:guest@');
      }

      // A new URL closes the endpoint's connection at once; the next delivery opens one to the new URL.
      const moved = await kit.api('PATCH', `/webhooks/endpoints/${id}`, { url: `amqp://guest:guest@127.0.0.1:${RABBITMQ.port}/%2F?exchange=${amqp.exchange}` });
      expect(moved.status).toBe(200);
      await waitUntil(() => proxy.open === 0);
      await kit.api('PATCH', `/webhooks/endpoints/${id}`, { enabled: false });
    } finally {
      await proxy.close();
      await amqp.close();
    }
  });

  it('closes broker connections at once when the endpoint is deleted or changed in this process, within the reconcile interval when elsewhere, and when the worker stops (runs last: it stops the workers)', {
    timeout: 60_000,
  }, async () => {
    const proxy = await new TcpProxy(RABBITMQ).start();
    const amqp = await amqpConsumer();
    // One worker that learns of changes only in-process (its reconcile interval is an hour).
    await kit.worker.stop();
    const worker = await startWebhookWorker(kit.t.ctx, { listenUrl: kit.t.database.url, brokerReconcileMs: 3_600_000 });
    let elsewhere: WebhookWorker | undefined;
    try {
      const deliverOne = async (w: WebhookWorker) => {
        const endpoint = await kit.createEndpoint(`amqp://guest:guest@127.0.0.1:${proxy.port}/?exchange=${amqp.exchange}`, {
          event_types: ['customer.created'],
        });
        const attempt = waitForAttempts(w, 1, (r) => r.endpointId === endpoint.id);
        await createCustomer(kit.t.database.db, { name: 'Pooled' });
        expect((await attempt)[0]!.result.outcome).toBe('success');
        return endpoint;
      };
      const deleted = await deliverOne(worker);
      expect(proxy.open).toBe(1);
      expect((await kit.t.app.inject({ method: 'DELETE', url: `/admin/api/v1/webhooks/endpoints/${deleted.id}`, headers: kit.admin })).statusCode).toBe(200);
      await waitUntil(() => proxy.open === 0);
      const disabled = await deliverOne(worker);
      expect(proxy.open).toBe(1);
      await kit.api('PATCH', `/webhooks/endpoints/${disabled.id}`, { enabled: false });
      await waitUntil(() => proxy.open === 0);

      // A change made where the worker does not hear it (another process): the row is changed
      // directly, and the worker's reconcile (every poll here) closes the connection.
      elsewhere = await startWebhookWorker(kit.t.ctx, { listenUrl: kit.t.database.url, brokerReconcileMs: 0 });
      await worker.stop();
      const changed = await deliverOne(elsewhere);
      await waitUntil(() => proxy.open === 1);
      await sql`UPDATE webhook_endpoints SET enabled = false WHERE id = ${changed.id}::uuid`.execute(kit.t.database.db);
      await waitUntil(() => proxy.open === 0);

      await deliverOne(elsewhere);
      await waitUntil(() => proxy.open === 1);
      await elsewhere.stop();
      await waitUntil(() => proxy.open === 0);
    } finally {
      await worker.stop();
      await elsewhere?.stop();
      await proxy.close();
      await amqp.close();
    }
  });
});

describe.each(backends)('broker URLs refused (%s)', (backend) => {
  let t: TestApp;
  let admin: { authorization: string };

  beforeAll(async () => {
    t = await buildTestApp(backend); // the default policy: no private hosts
    admin = await t.auth(['admin']);
  });
  afterAll(async () => {
    await t?.close();
  });

  it.each([
    ['unsupported scheme', 'kafka://broker.example.com:9092/topic', /scheme must be/],
    ['AMQP without an exchange', 'amqp://user:pw@broker.example.com/%2F', /needs \?exchange=/],
    ['MQTT without a topic prefix', 'mqtts://user:pw@broker.example.com:8883/', /needs a topic prefix/],
    ['NATS without a subject prefix', 'nats://broker.example.com:4222', /needs a subject prefix/],
    ['NATS with a wildcard subject', 'nats://broker.example.com:4222/orders.>', /subject prefix/],
    ['private host under the default policy', 'amqp://guest:guest@127.0.0.1:5672/?exchange=erp', /private/],
    ['private host (MQTT)', 'mqtt://10.0.0.8:1883/erp', /private/],
    ['private host (NATS over TLS)', 'nats+tls://[::1]:4222/erp', /private/],
    ['credentials in the query string', 'amqp://broker.example.com/?exchange=erp&password=s3cret', /credentials in the query string/],
    ['credentials in the query string (MQTT)', 'mqtt://broker.example.com/erp?username=u&password=p', /credentials in the query string/],
    ['an HTTPS URL with credentials', 'https://user:pw@hooks.example.com/in', /credentials/],
    // A bare trailing '#' is an empty fragment the URL parser drops from `hash`: it was accepted as
    // `mqtt://…/prefix`.
    ['MQTT topic ending in a bare # wildcard', 'mqtt://broker.example.com:1883/prefix/#', /wildcards '\+' or '#'/],
    ['MQTT topic with a # fragment', 'mqtt://broker.example.com:1883/prefix#x', /wildcards '\+' or '#'/],
    ['NATS subject ending in a bare #', 'nats://broker.example.com:4222/erp#', /must not have a fragment/],
    ['AMQP URL ending in a bare #', 'amqp://broker.example.com/?exchange=erp#', /must not have a fragment/],
    ['an HTTPS URL ending in a bare #', 'https://hooks.example.com/in#', /must not have a fragment/],
  ])('%s: 400 naming url, nothing stored', async (_case, url, reason) => {
    const res = await t.app.inject({ method: 'POST', url: '/admin/api/v1/webhooks/endpoints', headers: admin, payload: { url } });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    const problem = res.json();
    expect(problem.errors).toEqual([expect.objectContaining({ param: 'url', message: expect.stringMatching(reason) })]);
    const list = await t.app.inject({ url: '/admin/api/v1/webhooks/endpoints', headers: admin });
    expect(list.json().data).toEqual([]);
  });
});

/**
 * Resolves once `condition` holds (a socket closing is seen by the proxy's own events, which this
 * checks every 20 ms: a wait for a condition, not a guess of how long it takes).
 */
async function waitUntil(condition: () => boolean, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
