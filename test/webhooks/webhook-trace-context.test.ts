/**
 * Every webhook request and broker message continues the trace of the write that made its event
 * (decision 0052): with a tracer provider registered in this process (spans kept in memory), a
 * customer written inside a span reaches an HTTPS receiver, RabbitMQ, Mosquitto and NATS JetStream
 * with a `traceparent` of that span's trace, whose parent is the attempt's span (linked to the
 * worker's claim or poll); the event keeps the writer's context. With tracing off the same
 * deliveries carry no traceparent and the event keeps none. A FIFO endpoint's batch (HTTPS) and its
 * line's messages (a broker) are sent in an attempt span the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { sql } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { createCustomer } from '../../src/customers/customer.service.ts';
import { setActiveTracing } from '../../src/shared/tracing.ts';
import { WebhookReceiver } from './webhook-receiver.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import { amqpConsumer, mqttConsumer, natsConsumer, MOSQUITTO, NATS, RABBITMQ } from './broker-kit.ts';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;

describe.each(backends)('trace context of deliveries (%s)', (backend) => {
  let kit: WebhookTestKit;
  let receiver: WebhookReceiver;
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

  beforeAll(async () => {
    kit = await webhookTestKit(backend, { WEBHOOK_TIMEOUT_MS: '4000' });
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    setActiveTracing(undefined);
    await kit?.close();
    await receiver?.close();
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  });

  it('without tracing: no traceparent, no context kept with the event', async () => {
    const endpoint = await kit.createEndpoint(receiver.url, { event_types: ['customer.created'] });
    const base = receiver.requests.length;
    await createCustomer(kit.t.database.db, { name: 'Untraced', email: 'untraced@example.com' });
    const [request] = (await receiver.waitForRequests(base + 1)).slice(base);
    expect(request!.headers.traceparent).toBeUndefined();
    const { rows } = await sql<{ trace_parent: string | null }>`SELECT trace_parent FROM events WHERE id = ${request!.json.id}::uuid`.execute(
      kit.t.database.db,
    );
    expect(rows[0]!.trace_parent).toBeNull();
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });

  it("a traced write's webhook and broker messages carry its trace, through the attempt's span", { timeout: 120_000 }, async () => {
    provider.register();
    setActiveTracing({ fastifyPlugin: () => undefined, shutdown: async () => {} });
    const amqp = await amqpConsumer();
    const mqtt = await mqttConsumer();
    const nats = await natsConsumer();
    try {
      const subscribed = { event_types: ['customer.created'] };
      const endpoints = [
        await kit.createEndpoint(receiver.url, subscribed),
        await kit.createEndpoint(`amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=${amqp.exchange}`, subscribed),
        await kit.createEndpoint(`mqtt://${MOSQUITTO.host}:${MOSQUITTO.port}/${mqtt.prefix}`, subscribed),
        await kit.createEndpoint(`nats://${NATS.host}:${NATS.port}/${nats.prefix}`, subscribed),
      ];
      const ids = endpoints.map((e) => e.id);
      const attempts = waitForAttempts(kit.worker, 4, (r) => ids.includes(r.endpointId), 90_000);
      const base = receiver.requests.length;
      const writer = trace.getTracer('test').startSpan('erp write');
      const customer = (await context.with(trace.setSpan(context.active(), writer), () =>
        createCustomer(kit.t.database.db, { name: 'Traced', email: 'traced@example.com' }),
      )) as { id: string };
      writer.end();
      const { traceId } = writer.spanContext();
      expect((await attempts).map((a) => a.result.outcome)).toEqual(['success', 'success', 'success', 'success']);

      const { rows } = await sql<{ trace_parent: string | null }>`
        SELECT trace_parent FROM events WHERE type = 'customer.created' AND resource_id = ${customer.id}`.execute(kit.t.database.db);
      expect(rows[0]!.trace_parent).toBe(`00-${traceId}-${writer.spanContext().spanId}-01`);

      const [request] = (await receiver.waitForRequests(base + 1)).slice(base);
      await amqp.log.waitFor((l) => l.messages.length >= 1);
      await mqtt.log.waitFor((l) => l.messages.length >= 1);
      await nats.readAll();
      const carried = [request!.headers, amqp.log.messages[0]!.headers, mqtt.log.messages[0]!.headers, nats.log.messages[0]!.headers].map(
        (h) => h.traceparent ?? '',
      );
      const spans = exporter.getFinishedSpans();
      for (const traceparent of carried) {
        const [, carriedTrace, parent] = TRACEPARENT.exec(traceparent) ?? [];
        expect(carriedTrace).toBe(traceId);
        // The message's parent is its attempt's span: a child of the writer's span, linked to the claim or poll.
        const attempt = spans.find((s) => s.spanContext().spanId === parent);
        expect(attempt?.name).toBe('webhook attempt');
        expect(attempt!.parentSpanContext?.spanId).toBe(writer.spanContext().spanId);
        const link = attempt!.links[0]!.context.spanId;
        expect(['webhook claim', 'webhook poll']).toContain(spans.find((s) => s.spanContext().spanId === link)?.name);
      }
      const kinds = spans.filter((s) => s.name === 'webhook attempt').map((s) => s.attributes['store_api.destination.kind']);
      expect([...kinds].sort()).toEqual(['amqp', 'https', 'mqtt', 'nats']);
      for (const e of endpoints) await kit.api('PATCH', `/webhooks/endpoints/${e.id}`, { enabled: false });
    } finally {
      await amqp.close();
      await mqtt.close();
      await nats.close();
    }
  });

  it("a FIFO endpoint's batch and broker line are sent in an attempt span too, carrying the writer's trace", { timeout: 120_000 }, async () => {
    provider.register();
    setActiveTracing({ fastifyPlugin: () => undefined, shutdown: async () => {} });
    const amqp = await amqpConsumer();
    try {
      const fifo = { event_types: ['customer.created'], delivery_order: 'fifo', batch_size: 4 };
      const endpoints = [
        await kit.createEndpoint(receiver.url, fifo),
        await kit.createEndpoint(`amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=${amqp.exchange}`, fifo),
      ];
      const ids = endpoints.map((e) => e.id);
      const attempts = waitForAttempts(kit.worker, 2, (r) => ids.includes(r.endpointId), 90_000);
      const base = receiver.requests.length;
      exporter.reset();
      const writer = trace.getTracer('test').startSpan('erp write (fifo)');
      await context.with(trace.setSpan(context.active(), writer), () =>
        createCustomer(kit.t.database.db, { name: 'Traced FIFO', email: 'traced-fifo@example.com' }),
      );
      writer.end();
      const { traceId } = writer.spanContext();
      expect((await attempts).map((a) => a.result.outcome)).toEqual(['success', 'success']);
      const [request] = (await receiver.waitForRequests(base + 1)).slice(base);
      await amqp.log.waitFor((l) => l.messages.length >= 1);
      const spans = exporter.getFinishedSpans();
      for (const headers of [request!.headers, amqp.log.messages[0]!.headers]) {
        const [, carriedTrace, parent] = TRACEPARENT.exec(headers.traceparent ?? '') ?? [];
        expect(carriedTrace).toBe(traceId);
        const attempt = spans.find((s) => s.spanContext().spanId === parent);
        expect(attempt?.name).toBe('webhook attempt');
        expect(attempt!.parentSpanContext?.spanId).toBe(writer.spanContext().spanId);
      }
      const kinds = spans.filter((s) => s.name === 'webhook attempt').map((s) => s.attributes['store_api.destination.kind']);
      expect([...kinds].sort()).toEqual(['amqp', 'https']);
      for (const e of endpoints) await kit.api('PATCH', `/webhooks/endpoints/${e.id}`, { enabled: false });
    } finally {
      await amqp.close();
    }
  });
});
