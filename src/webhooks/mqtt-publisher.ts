/**
 * MQTT 5 connections for endpoints `mqtt://` / `mqtts://` (MQTT.js). One client per endpoint, clean
 * start, no automatic reconnect (the pool opens a new client for the next attempt, so nothing is
 * queued inside the library to be sent after its attempt was recorded as failed). A message is
 * published QoS 1 to `<prefix>/<event type>` with the Standard Webhooks headers as user
 * properties, and counts as delivered only on its PUBACK. A PUBACK saying "no matching subscribers"
 * (reason 0x10: the broker dropped the message) or any error reason fails the attempt.
 */
import { randomUUID } from 'node:crypto';
import { connect, type IPublishPacket, type MqttClient, type Packet } from 'mqtt';
import { BrokerFailure, type BrokerConnection, type BrokerConnector, type BrokerMessage } from './broker-publisher.ts';

/** PUBACK reason "No matching subscribers" (MQTT 5, 0x10). */
const NO_MATCHING_SUBSCRIBERS = 0x10;
/** Keep-alive asked of the broker (seconds). */
const KEEPALIVE_S = 30;

export const connectMqtt: BrokerConnector = (destination, address, timeoutMs, clientTls) =>
  new Promise<BrokerConnection>((resolve, reject) => {
    const client = connect({
      protocol: destination.tls ? 'mqtts' : 'mqtt',
      host: address,
      port: destination.port,
      servername: destination.tls ? destination.host : undefined,
      // MQTT.js hands these to tls.connect: the client certificate of mutual TLS.
      ...(destination.tls && clientTls && { cert: clientTls.cert, key: clientTls.key }),
      username: destination.username || undefined,
      password: destination.username ? destination.password : undefined,
      protocolVersion: 5,
      clean: true,
      clientId: `store-api-webhooks-${randomUUID().slice(0, 12)}`,
      keepalive: KEEPALIVE_S,
      reconnectPeriod: 0,
      connectTimeout: timeoutMs,
      queueQoSZero: false,
    });
    let settled = false;
    const fail = (error: unknown) => {
      if (settled) return;
      settled = true;
      client.end(true);
      const message = (error as Error)?.message ?? String(error);
      const code = (error as { code?: number | string }).code;
      reject(
        new BrokerFailure(
          'connection_error',
          code === 134 || code === 135 || /Bad username|Not authorized/i.test(message) ? `the broker refused the credentials (${message})` : message,
        ),
      );
    };
    client.once('error', fail);
    client.once('close', () => fail(new Error('connection closed before CONNACK')));
    client.once('connect', () => {
      if (settled) return;
      settled = true;
      client.off('error', fail);
      resolve(new MqttConnection(client));
    });
  });

class MqttConnection implements BrokerConnection {
  readonly #client: MqttClient;
  #closed = false;
  /** Message ids whose PUBACK said "no matching subscribers" (seen before the publish callback runs). */
  readonly #unmatched = new Set<number>();

  constructor(client: MqttClient) {
    this.#client = client;
    client.on('error', () => {});
    client.on('packetreceive', (packet: Packet) => {
      if (packet.cmd === 'puback' && packet.reasonCode === NO_MATCHING_SUBSCRIBERS && packet.messageId !== undefined) this.#unmatched.add(packet.messageId);
    });
    client.on('close', () => {
      this.#closed = true;
      // Fails the publishes still waiting for their PUBACK at once (no reconnect would send them).
      client.end(true);
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  async publish(message: BrokerMessage): Promise<void> {
    if (this.#closed || !this.#client.connected) throw new BrokerFailure('connection_error', 'MQTT connection closed');
    let packet: Packet | undefined;
    try {
      packet = await this.#client.publishAsync(message.address, message.body, {
        qos: 1,
        properties: { userProperties: message.headers, contentType: 'application/json', payloadFormatIndicator: true },
      });
    } catch (error) {
      const text = (error as Error).message ?? String(error);
      const reason = (error as { code?: number }).code;
      throw new BrokerFailure(typeof reason === 'number' ? 'broker_rejected' : 'connection_error', `no PUBACK (${text})`);
    }
    const messageId = (packet as IPublishPacket | undefined)?.messageId;
    if (messageId !== undefined && this.#unmatched.delete(messageId)) {
      throw new BrokerFailure('broker_rejected', `no subscriber matches topic '${message.address}': the broker dropped the message (PUBACK 0x10)`);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    try {
      await this.#client.endAsync(true);
    } catch {
      // Already closed.
    }
  }
}
