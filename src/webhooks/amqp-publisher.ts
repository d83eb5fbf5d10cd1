/**
 * AMQP 0-9-1 (RabbitMQ) connections for endpoints `amqp://` / `amqps://` (amqplib). One connection
 * and one confirm channel per endpoint; a message is published to the URL's exchange with the event
 * type as routing key, persistent, `mandatory`, with the Standard Webhooks headers as message
 * headers, and counts as delivered only on the broker's publisher confirm. A message the exchange
 * cannot route to any queue comes back (basic.return, before its confirm) and fails the attempt:
 * RabbitMQ would otherwise drop it and still confirm it.
 */
import { connect, type ConfirmChannel, type ChannelModel, type Message } from 'amqplib';
import { BrokerFailure, type BrokerConnection, type BrokerConnector, type BrokerMessage } from './broker-publisher.ts';
import type { BrokerDestination } from './webhook-destination.ts';

/** Heartbeat asked of the broker (seconds): a dead connection is noticed within about twice this. */
const HEARTBEAT_S = 15;

export const connectAmqp: BrokerConnector = async (destination, address, timeoutMs, clientTls) => {
  let model: ChannelModel;
  try {
    model = await connect(
      {
        protocol: destination.tls ? 'amqps' : 'amqp',
        hostname: address,
        port: destination.port,
        username: destination.username || undefined,
        password: destination.username ? destination.password : undefined,
        vhost: destination.vhost,
        heartbeat: HEARTBEAT_S,
      },
      {
        timeout: timeoutMs,
        servername: destination.tls ? destination.host : undefined,
        // amqplib hands its socket options to tls.connect: the client certificate of mutual TLS.
        ...(destination.tls && clientTls && { cert: clientTls.cert, key: clientTls.key }),
        clientProperties: { connection_name: 'store-api webhooks' },
      },
    );
  } catch (error) {
    throw connectFailure(error, destination);
  }
  const connection = new AmqpConnection(model, destination);
  try {
    await connection.open();
  } catch (error) {
    await connection.close();
    throw error;
  }
  return connection;
};

class AmqpConnection implements BrokerConnection {
  readonly #model: ChannelModel;
  readonly #destination: BrokerDestination;
  #channel: ConfirmChannel | undefined;
  #closed = false;
  /** Publishes awaiting their confirm, by webhook-id, oldest first: a return marks the oldest. */
  readonly #pending = new Map<string, Array<{ returned: boolean }>>();

  constructor(model: ChannelModel, destination: BrokerDestination) {
    this.#model = model;
    this.#destination = destination;
    model.on('error', () => {});
    model.on('close', () => {
      this.#closed = true;
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  async open(): Promise<void> {
    const channel = await this.#model.createConfirmChannel();
    channel.on('error', () => {});
    channel.on('close', () => {
      this.#closed = true;
    });
    channel.on('return', (message: Message) => {
      const id = message.properties.headers?.['webhook-id'];
      const waiting = typeof id === 'string' ? this.#pending.get(id)?.find((p) => !p.returned) : undefined;
      if (waiting) waiting.returned = true;
    });
    try {
      await channel.checkExchange(this.#destination.exchange);
    } catch (error) {
      throw new BrokerFailure(
        'broker_rejected',
        `exchange '${this.#destination.exchange}' not found in virtual host '${this.#destination.vhost}' (${messageOf(error)})`,
      );
    }
    this.#channel = channel;
  }

  publish(message: BrokerMessage): Promise<void> {
    const channel = this.#channel;
    if (!channel || this.#closed) return Promise.reject(new BrokerFailure('connection_error', 'AMQP connection closed'));
    const id = message.headers['webhook-id'] ?? message.deliveryId;
    const entry = { returned: false };
    const list = this.#pending.get(id) ?? [];
    list.push(entry);
    this.#pending.set(id, list);
    const done = () => {
      const at = list.indexOf(entry);
      if (at !== -1) list.splice(at, 1);
      if (list.length === 0) this.#pending.delete(id);
    };
    return new Promise<void>((resolve, reject) => {
      try {
        channel.publish(
          this.#destination.exchange,
          message.address,
          message.body,
          {
            persistent: true,
            mandatory: true,
            contentType: 'application/json',
            contentEncoding: 'utf-8',
            messageId: id,
            timestamp: Number(message.headers['webhook-timestamp']) || undefined,
            type: message.address,
            headers: message.headers,
          },
          (error: unknown) => {
            done();
            if (error) reject(confirmFailure(error));
            else if (entry.returned) {
              reject(
                new BrokerFailure(
                  'broker_rejected',
                  `unroutable: no queue is bound to exchange '${this.#destination.exchange}' for routing key '${message.address}' (the broker returned the message)`,
                ),
              );
            } else resolve();
          },
        );
      } catch (error) {
        done();
        reject(new BrokerFailure('connection_error', `AMQP channel closed (${messageOf(error)})`));
      }
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    try {
      await this.#model.close();
    } catch {
      // Already closed (the broker went away): nothing to release.
    }
  }
}

/**
 * A publish whose confirm failed: a negative acknowledgement is the broker refusing the message
 * (`broker_rejected`); a channel closed while the confirm was awaited (a connection lost, or closed
 * after another attempt on it timed out) says nothing of the message, which may have been
 * delivered: `connection_error`, so the history does not claim a refusal (retried either way).
 */
export function confirmFailure(error: unknown): BrokerFailure {
  const message = messageOf(error);
  if (/nack/i.test(message)) return new BrokerFailure('broker_rejected', `the broker refused the message (${message})`);
  return new BrokerFailure(
    'connection_error',
    `the connection closed before the broker confirmed the message; it may have been delivered (consumers deduplicate on webhook-id) (${message})`,
  );
}

function connectFailure(error: unknown, destination: BrokerDestination): BrokerFailure {
  const message = messageOf(error);
  if (/ACCESS_REFUSED|auth/i.test(message)) return new BrokerFailure('connection_error', `the broker refused the credentials (${message})`);
  // RabbitMQ answers an open of a virtual host that does not exist, or that the user has no
  // permission on, by closing the connection; amqplib reports that without the broker's reason.
  if (/vhost|NOT_ALLOWED|Expected ConnectionOpenOk; got <ConnectionClose/i.test(message)) {
    return new BrokerFailure(
      'connection_error',
      `virtual host '${destination.vhost}' does not exist on the broker, or the user may not use it (the URL's path names it, url-encoded: %2F for the default '/'; ${message})`,
    );
  }
  return new BrokerFailure('connection_error', message);
}

function messageOf(error: unknown): string {
  const err = error as NodeJS.ErrnoException;
  return [err?.code, err?.message ?? String(error)].filter(Boolean).join(': ');
}
