/**
 * NATS JetStream connections for endpoints `nats://` / `nats+tls://` (@nats-io/transport-node and
 * @nats-io/jetstream). One connection per endpoint, no automatic reconnect (the pool opens a new one
 * for the next attempt, so the library buffers nothing to send after its attempt was recorded as
 * failed). A message is published to the subject `<prefix>.<event type>` with the Standard
 * Webhooks headers as NATS headers and the delivery id as JetStream message id (a retry the stream
 * already holds is dropped by its duplicate window), and counts as delivered only on the stream's
 * PubAck. No stream capturing the subject ("no responders") fails the attempt.
 * Credentials: `user:password@` or a token as the user name alone (`nats://<token>@host`).
 */
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { BrokerFailure, type BrokerConnection, type BrokerConnector, type BrokerMessage } from './broker-publisher.ts';

export const connectNats: BrokerConnector = async (destination, address, timeoutMs, clientTls) => {
  // Every connection goes to the address the policy allowed (the client looking the name up again
  // would open a DNS-rebinding window); over TLS the name is the server name its certificate is
  // checked against (SNI), as for AMQP and MQTT.
  const server = address.includes(':') ? `[${address}]:${destination.port}` : `${address}:${destination.port}`;
  // The Node transport hands `tls` to tls.connect (its type does not list `servername`).
  const tls = { rejectUnauthorized: true, servername: destination.host, ...(clientTls && { cert: clientTls.cert, key: clientTls.key }) };
  const auth = destination.password ? { user: destination.username, pass: destination.password } : destination.username ? { token: destination.username } : {};
  let connection: NatsConnection;
  try {
    connection = await connect({
      servers: server,
      ...auth,
      tls: destination.tls ? tls : undefined,
      reconnect: false,
      timeout: timeoutMs,
      name: 'store-api webhooks',
    });
  } catch (error) {
    const message = (error as Error)?.message ?? String(error);
    throw new BrokerFailure('connection_error', /authoriz|auth/i.test(message) ? `the broker refused the credentials (${message})` : message);
  }
  return new NatsJetStreamConnection(connection, timeoutMs);
};

class NatsJetStreamConnection implements BrokerConnection {
  readonly #connection: NatsConnection;
  readonly #jetstream: JetStreamClient;
  readonly #timeoutMs: number;

  constructor(connection: NatsConnection, timeoutMs: number) {
    this.#connection = connection;
    this.#timeoutMs = timeoutMs;
    this.#jetstream = jetstream(connection, { timeout: timeoutMs });
  }

  get closed(): boolean {
    return this.#connection.isClosed();
  }

  async publish(message: BrokerMessage): Promise<void> {
    if (this.closed) throw new BrokerFailure('connection_error', 'NATS connection closed');
    const headers = natsHeaders();
    for (const [name, value] of Object.entries(message.headers)) headers.set(name, value);
    headers.set('content-type', 'application/json');
    try {
      await this.#jetstream.publish(message.address, message.body, { headers, msgID: message.deliveryId, timeout: this.#timeoutMs });
    } catch (error) {
      const text = (error as Error)?.message ?? String(error);
      const name = (error as Error)?.name ?? '';
      // The server answers "no responders" (the client says "jetstream is not enabled") when no stream takes the subject.
      if (/no responders|503|jetstream is not enabled/i.test(text) || name === 'NoRespondersError') {
        throw new BrokerFailure('broker_rejected', `no JetStream stream captures subject '${message.address}', or JetStream is off on the server (${text})`);
      }
      if (/timeout/i.test(text) || name === 'TimeoutError') throw new BrokerFailure('timeout', `no JetStream ack within ${this.#timeoutMs} ms`);
      if (this.closed || /closed|disconnect/i.test(text)) throw new BrokerFailure('connection_error', `NATS connection lost (${text})`);
      throw new BrokerFailure('broker_rejected', `the stream refused the message (${text})`);
    }
  }

  async close(): Promise<void> {
    try {
      await this.#connection.close();
    } catch {
      // Already closed.
    }
  }
}
