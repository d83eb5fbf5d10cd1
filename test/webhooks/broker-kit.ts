/**
 * Broker-side helpers of the broker destination tests: a consumer per protocol that records every
 * message (body, Standard Webhooks headers, routing key / topic / subject), brokers of the test's
 * own on spare ports (mosquitto, nats-server) that it can restart, and a TCP proxy it can cut and
 * restore (in front of the machine's RabbitMQ). Tests wait on a consumer's count or a process's
 * ready line, never a sleep. The machine's brokers: RabbitMQ 127.0.0.1:5672 guest/guest, Mosquitto
 * 127.0.0.1:1883, NATS with JetStream 127.0.0.1:4222 (.ci/run starts them when they are down).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect as tcpConnect, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { connect as amqpConnect, type ChannelModel } from 'amqplib';
import { connect as mqttConnect, type MqttClient } from 'mqtt';
import { connect as natsConnect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';

export const RABBITMQ = { host: '127.0.0.1', port: 5672 };
export const MOSQUITTO = { host: '127.0.0.1', port: 1883 };
export const NATS = { host: '127.0.0.1', port: 4222 };

/** One message as a consumer received it. */
export interface ConsumedMessage {
  /** Routing key, topic or subject. */
  readonly address: string;
  readonly body: string;
  /** The Standard Webhooks headers (and any other) as the protocol carried them. */
  readonly headers: Record<string, string>;
  /**
   * The broker says it delivered this message to the consumer before (MQTT's DUP flag, AMQP's
   * `redelivered`): a duplicate of the broker-to-consumer leg, not of our publishing.
   */
  readonly redelivered?: boolean;
}

/** Records messages; `waitFor(n)` resolves once n have arrived (or rejects after timeoutMs). */
export class MessageLog {
  readonly messages: ConsumedMessage[] = [];
  readonly #events = new EventEmitter();

  add(message: ConsumedMessage): void {
    this.messages.push(message);
    this.#events.emit('message');
  }

  /** Distinct webhook-ids received. */
  distinct(): Set<string> {
    return new Set(this.messages.map((m) => m.headers['webhook-id']!));
  }

  async waitFor(predicate: (log: MessageLog) => boolean, timeoutMs = 60_000, what = 'messages'): Promise<void> {
    if (predicate(this)) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#events.off('message', check);
        reject(new Error(`waited ${timeoutMs} ms for ${what}; have ${this.messages.length} (${this.distinct().size} distinct)`));
      }, timeoutMs);
      const check = () => {
        if (!predicate(this)) return;
        clearTimeout(timer);
        this.#events.off('message', check);
        resolve();
      };
      this.#events.on('message', check);
    });
  }
}

const headerText = (value: unknown) => (Buffer.isBuffer(value) ? value.toString('utf8') : String(value));

/** A topic exchange of its own, with a durable queue bound to every routing key, consumed. */
export async function amqpConsumer(exchange = `store-test-${randomUUID()}`) {
  const log = new MessageLog();
  const model: ChannelModel = await amqpConnect(`amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/`);
  const channel = await model.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: true });
  const queue = `${exchange}.queue`;
  await channel.assertQueue(queue, { durable: true });
  await channel.bindQueue(queue, exchange, '#');
  await channel.consume(queue, (msg) => {
    if (!msg) return;
    const headers = Object.fromEntries(Object.entries(msg.properties.headers ?? {}).map(([k, v]) => [k, headerText(v)]));
    log.add({ address: msg.fields.routingKey, body: msg.content.toString('utf8'), headers, redelivered: msg.fields.redelivered });
    channel.ack(msg);
  });
  return {
    exchange,
    log,
    /** The channel, for tests that declare more (an exchange with nothing bound). */
    channel,
    async close() {
      await channel.deleteQueue(queue);
      await channel.deleteExchange(exchange);
      await model.close();
    },
  };
}

/**
 * An MQTT 5 subscriber of `<prefix>/#` at QoS 1 with a persistent session (clean start off, a
 * session expiry), so messages the broker acknowledged while the subscriber was away reach it.
 */
export async function mqttConsumer(port = MOSQUITTO.port, prefix = `store-test/${randomUUID()}`) {
  const log = new MessageLog();
  const client: MqttClient = mqttConnect({
    host: MOSQUITTO.host,
    port,
    protocolVersion: 5,
    clean: false,
    clientId: `store-test-${randomUUID().slice(0, 12)}`,
    properties: { sessionExpiryInterval: 600 },
    reconnectPeriod: 100,
  });
  client.on('error', () => {});
  client.on('message', (topic, payload, packet) => {
    const props = (packet.properties?.userProperties ?? {}) as Record<string, string | string[]>;
    const headers = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, Array.isArray(v) ? v.join(' ') : v]));
    log.add({ address: topic, body: payload.toString('utf8'), headers, redelivered: packet.dup === true });
  });
  await new Promise<void>((resolve) => client.once('connect', () => resolve()));
  await client.subscribeAsync(`${prefix}/#`, { qos: 1 });
  return {
    prefix,
    log,
    async close() {
      await client.endAsync(true);
    },
  };
}

/** A JetStream stream of its own capturing `<prefix>.>`, read by an ordered consumer. */
export async function natsConsumer(port = NATS.port, prefix = `store_test.${randomUUID().replaceAll('-', '')}`) {
  const log = new MessageLog();
  const connection: NatsConnection = await natsConnect({ servers: `${NATS.host}:${port}`, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  const manager: JetStreamManager = await jetstreamManager(connection);
  const stream = `STORE_TEST_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
  await manager.streams.add({ name: stream, subjects: [`${prefix}.>`] });
  return {
    prefix,
    stream,
    log,
    /** Reads every message the stream holds into the log (after the publishers are done). */
    async readAll() {
      const info = await manager.streams.info(stream);
      const consumer = await jetstream(connection).consumers.get(stream);
      const total = info.state.messages;
      log.messages.length = 0;
      if (total === 0) return;
      const messages = await consumer.consume();
      for await (const m of messages) {
        const headers: Record<string, string> = {};
        for (const key of m.headers?.keys() ?? []) headers[key] = m.headers!.get(key);
        log.add({ address: m.subject, body: m.string(), headers });
        if (log.messages.length >= total) break;
      }
      await messages.close();
    },
    async close() {
      await manager.streams.delete(stream).catch(() => {});
      await connection.close();
    },
  };
}

/** A port nothing listens on right now. */
export async function sparePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A broker process of the test's own, restartable on the same port and data directory: it is ready
 * when its output shows `ready` (a regular expression).
 */
export class BrokerProcess {
  readonly dir = mkdtempSync(join(tmpdir(), 'store-broker-'));
  #child: ChildProcess | undefined;

  constructor(
    readonly command: string,
    readonly args: (dir: string) => string[],
    readonly ready: RegExp,
  ) {
    // Started as root, mosquitto drops to its own user: its store must stay writable.
    chmodSync(this.dir, 0o777);
  }

  async start(): Promise<void> {
    const child = spawn(this.command, this.args(this.dir), { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (this.ready.test(output)) {
          child.stdout!.off('data', onData);
          child.stderr!.off('data', onData);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code) => reject(new Error(`${this.command} exited (${code}) before it was ready:\n${output}`)));
    });
    // Keep draining its output so it never blocks on a full pipe.
    child.stdout!.resume();
    child.stderr!.resume();
  }

  /** SIGTERM (the broker saves its state) and wait for the exit. */
  async stop(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Mosquitto on `port`, anonymous, persisting its sessions and queued messages in its own directory. */
export function mosquittoOn(port: number): BrokerProcess {
  return new BrokerProcess(
    'mosquitto',
    (dir) => {
      const conf = join(dir, 'mosquitto.conf');
      writeFileSync(
        conf,
        [
          `listener ${port} 127.0.0.1`,
          'allow_anonymous true',
          'persistence true',
          `persistence_location ${dir}/`,
          'log_dest stderr',
          'log_type error',
          'log_type warning',
          'log_type notice',
          'log_type information',
        ].join('\n'),
      );
      return ['-c', conf];
    },
    /mosquitto version .* running/,
  );
}

/** nats-server with JetStream on `port`, its store in its own directory. */
export function natsServerOn(port: number): BrokerProcess {
  return new BrokerProcess('nats-server', (dir) => ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], /Server is ready/);
}

/**
 * A TCP proxy on a spare loopback port to `target`: `cut()` resets every connection and refuses
 * (resets at once) new ones until `restore()`; `open` counts live connections.
 */
export class TcpProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #down = false;
  port = 0;

  constructor(readonly target: { host: string; port: number }) {
    this.#server = createServer((client) => {
      if (this.#down) {
        client.resetAndDestroy();
        return;
      }
      const upstream = tcpConnect(target.port, target.host);
      this.#sockets.add(client);
      this.#sockets.add(upstream);
      const end = () => {
        this.#sockets.delete(client);
        this.#sockets.delete(upstream);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  /** Client connections open through the proxy. */
  get open(): number {
    return this.#sockets.size / 2;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  cut(): void {
    this.#down = true;
    for (const socket of this.#sockets) socket.resetAndDestroy();
    this.#sockets.clear();
  }

  restore(): void {
    this.#down = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
