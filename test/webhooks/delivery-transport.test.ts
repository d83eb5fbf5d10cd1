/**
 * The delivery step's broker pool (delivery-transport.ts) with connectors of the test's own: one
 * connection per endpoint shared by its attempts, a lost one replaced by the next attempt, closed
 * on a URL change, on closeEndpoint, on reconcile and on close(), dropped after a timeout; failures
 * become attempt results with the password scrubbed; the URL's form and the SSRF policy hold at
 * connect time. The real brokers: webhook-brokers.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { DeliveryTransport, type DeliveryTarget } from '../../src/webhooks/delivery-transport.ts';
import { BrokerFailure, type BrokerConnection, type BrokerConnector, type BrokerMessage } from '../../src/webhooks/broker-publisher.ts';
import { WebhookHttpClient } from '../../src/webhooks/webhook-http-client.ts';
import { destinationKind, parseBrokerUrl, redactDestinationUrl } from '../../src/webhooks/webhook-destination.ts';

class FakeConnection implements BrokerConnection {
  closed = false;
  readonly published: BrokerMessage[] = [];
  /** What the next publish does: resolve, throw, or never answer. */
  next: 'ok' | Error | 'hang' = 'ok';

  async publish(message: BrokerMessage): Promise<void> {
    if (this.closed) throw new BrokerFailure('connection_error', 'closed');
    const next = this.next;
    if (next === 'hang') return new Promise(() => {});
    if (next instanceof Error) throw next;
    this.published.push(message);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

function fakeBroker() {
  const opened: FakeConnection[] = [];
  const addresses: string[] = [];
  let refuse: Error | undefined;
  const connector: BrokerConnector = async (_destination, address) => {
    addresses.push(address);
    if (refuse) throw refuse;
    const connection = new FakeConnection();
    opened.push(connection);
    return connection;
  };
  return {
    opened,
    addresses,
    connector,
    refuseWith(error: Error | undefined) {
      refuse = error;
    },
  };
}

function transport(connector: BrokerConnector, { timeoutMs = 2000, allowPrivate = true } = {}) {
  const http = new WebhookHttpClient({ timeoutMs, allowPrivate, connectionsPerOrigin: 1 });
  return new DeliveryTransport({ http, timeoutMs, allowPrivate, connectors: { amqp: connector, mqtt: connector, nats: connector } });
}

let n = 0;
const delivery = (url: string, endpointId = 'e1', type = 'customer.created'): DeliveryTarget => ({
  id: `d${++n}`,
  endpointId,
  url,
  event: { type },
  body: '{"id":"x"}',
});
const headers = { 'webhook-id': 'x', 'webhook-timestamp': '1', 'webhook-signature': 'v1,abc' };

describe('the broker delivery step', () => {
  it('publishes to the address the kind says, with the headers and the body as sent, on one pooled connection', async () => {
    const broker = fakeBroker();
    const t = transport(broker.connector);
    const results = await Promise.all([
      t.send(delivery('nats://127.0.0.1:4222/erp.store'), headers),
      t.send(delivery('nats://127.0.0.1:4222/erp.store', 'e1', 'order.updated'), headers),
    ]);
    expect(results.map((r) => r.outcome)).toEqual(['success', 'success']);
    expect(results[0]).toMatchObject({ statusCode: null, error: null });
    expect(broker.opened).toHaveLength(1);
    expect(broker.opened[0]!.published.map((m) => m.address).sort()).toEqual(['erp.store.customer.created', 'erp.store.order.updated']);
    expect(broker.opened[0]!.published[0]).toMatchObject({ headers, body: Buffer.from('{"id":"x"}') });
    await t.send(delivery('mqtt://127.0.0.1:1883/erp/store', 'e2'), headers);
    await t.send(delivery('amqp://127.0.0.1/?exchange=store', 'e3'), headers);
    expect(broker.opened.slice(1).map((c) => c.published.at(-1)!.address)).toEqual(['erp/store/customer.created', 'customer.created']);
    expect([...t.brokerEndpoints().keys()]).toEqual(['e1', 'e2', 'e3']);
    await t.close();
    expect(broker.opened.every((c) => c.closed)).toBe(true);
  });

  it('opens a new connection after one was lost, a failed attempt that left it unknown, or a timeout; keeps it after a broker refusal', async () => {
    const broker = fakeBroker();
    const t = transport(broker.connector, { timeoutMs: 200 });
    const url = 'amqp://127.0.0.1/?exchange=store';
    await t.send(delivery(url), headers);
    broker.opened[0]!.closed = true; // the broker restarted
    expect((await t.send(delivery(url), headers)).outcome).toBe('success');
    expect(broker.opened).toHaveLength(2);

    broker.opened[1]!.next = new BrokerFailure('broker_rejected', 'unroutable');
    expect(await t.send(delivery(url), headers)).toMatchObject({ outcome: 'broker_rejected', error: 'unroutable' });
    broker.opened[1]!.next = 'ok';
    await t.send(delivery(url), headers);
    expect(broker.opened).toHaveLength(2);

    broker.opened[1]!.next = new Error('socket hang up');
    expect(await t.send(delivery(url), headers)).toMatchObject({ outcome: 'connection_error', error: 'socket hang up' });
    expect(broker.opened[1]!.closed).toBe(true);
    broker.opened.length = 2;
    await t.send(delivery(url), headers);
    expect(broker.opened).toHaveLength(3);

    broker.opened[2]!.next = 'hang';
    expect(await t.send(delivery(url), headers)).toMatchObject({ outcome: 'timeout', error: 'the broker did not acknowledge within 200 ms' });
    expect(broker.opened[2]!.closed).toBe(true);
    expect((await t.send(delivery(url), headers)).outcome).toBe('success');
    expect(broker.opened).toHaveLength(4);
    await t.close();
  });

  it('closes the connection when the URL changes, on closeEndpoint and on reconcile', async () => {
    const broker = fakeBroker();
    const t = transport(broker.connector);
    await t.send(delivery('nats://127.0.0.1:4222/a', 'e1'), headers);
    await t.send(delivery('nats://127.0.0.1:4222/b', 'e1'), headers);
    expect(broker.opened.map((c) => c.closed)).toEqual([true, false]);
    await t.closeEndpoint('e1');
    expect(broker.opened[1]!.closed).toBe(true);
    expect(t.brokerEndpoints().size).toBe(0);

    await t.send(delivery('nats://127.0.0.1:4222/a', 'keep'), headers);
    await t.send(delivery('nats://127.0.0.1:4222/a', 'moved'), headers);
    await t.send(delivery('nats://127.0.0.1:4222/a', 'gone'), headers);
    await t.reconcile(
      new Map([
        ['keep', 'nats://127.0.0.1:4222/a'],
        ['moved', 'nats://127.0.0.1:4222/elsewhere'],
      ]),
    );
    expect(broker.opened.slice(2).map((c) => c.closed)).toEqual([false, true, true]);
    expect([...t.brokerEndpoints().keys()]).toEqual(['keep']);
    await t.close();
  });

  it('records a refused connection with its reason and without the password; refuses private hosts unless allowed', async () => {
    const broker = fakeBroker();
    const t = transport(broker.connector);
    broker.refuseWith(new Error('ACCESS_REFUSED for guest:s3cr%2Ft@127.0.0.1 using password s3cr/t'));
    const refused = await t.send(delivery('amqp://guest:s3cr%2Ft@127.0.0.1/?exchange=x'), headers);
    expect(refused.outcome).toBe('connection_error');
    expect(refused.error).toContain('ACCESS_REFUSED');
    expect(refused.error).not.toContain('s3cr');
    await t.close();

    const strict = transport(fakeBroker().connector, { allowPrivate: false });
    const blocked = await strict.send(delivery('mqtt://10.1.2.3:1883/erp'), headers);
    expect(blocked).toMatchObject({ outcome: 'blocked_address', error: 'refused: 10.1.2.3 is a private address' });
    await strict.close();
  });
});

describe('broker URLs', () => {
  it('parse into their destination: vhost, exchange, prefixes, default ports, credentials decoded', () => {
    expect(parseBrokerUrl('amqps://erp:p%40ss@mq.example.com/erp%2Fprod?exchange=store')).toMatchObject({
      kind: 'amqp',
      tls: true,
      host: 'mq.example.com',
      port: 5671,
      username: 'erp',
      password: 'p@ss',
      vhost: 'erp/prod',
      exchange: 'store',
    });
    expect(parseBrokerUrl('amqp://mq.example.com?exchange=store')).toMatchObject({ vhost: '/', port: 5672, username: '' });
    expect(parseBrokerUrl('mqtt://mq.example.com/erp/store/')).toMatchObject({ kind: 'mqtt', prefix: 'erp/store', port: 1883 });
    expect(parseBrokerUrl('nats+tls://tok@nats.example.com/erp.store')).toMatchObject({ kind: 'nats', tls: true, prefix: 'erp.store', username: 'tok' });
  });

  it('show their kind and never their password', () => {
    expect(destinationKind('https://hooks.example.com/in')).toBe('https');
    expect(destinationKind('AMQPS://mq/?exchange=x')).toBe('amqp');
    expect(destinationKind('mqtts://mq/erp')).toBe('mqtt');
    expect(destinationKind('nats+tls://mq/erp')).toBe('nats');
    expect(redactDestinationUrl('amqp://erp:s3cret@mq.example.com/%2F?exchange=x')).toBe('amqp://erp:****@mq.example.com/%2F?exchange=x');
    // A NATS token is the user name alone: a secret too.
    expect(redactDestinationUrl('nats://s3cretToken@nats.example.com/erp')).toBe('nats://****@nats.example.com/erp');
    expect(redactDestinationUrl('mqtt://reader@mq.example.com/erp')).toBe('mqtt://reader@mq.example.com/erp');
    expect(redactDestinationUrl('https://hooks.example.com/in')).toBe('https://hooks.example.com/in');
  });
});
