/**
 * What the three broker clients (amqp-publisher.ts, mqtt-publisher.ts, nats-publisher.ts) have in
 * common: a connection that publishes one message and resolves only when the broker has taken
 * responsibility for it (publisher confirm, PUBACK, JetStream ack), and the failure they throw,
 * whose reason is recorded with the attempt as an HTTP failure's is.
 */
import type { BrokerDestination } from './webhook-destination.ts';
import type { AttemptOutcome } from './webhook-http-client.ts';

/** One webhook delivery as a broker message: the webhook body and the Standard Webhooks headers. */
export interface BrokerMessage {
  /** Routing key (AMQP), topic (MQTT) or subject (NATS): addressOf(destination, event type). */
  readonly address: string;
  readonly body: Buffer;
  /** webhook-id, webhook-timestamp, webhook-signature (and webhook-test on a test event). */
  readonly headers: Record<string, string>;
  /** The delivery's id: a JetStream message id, so the stream drops a retry it already holds. */
  readonly deliveryId: string;
}

/** An open connection to one endpoint's broker. */
export interface BrokerConnection {
  /** Resolves when the broker has the message; rejects with a BrokerFailure (or any error: a connection failure). */
  publish(message: BrokerMessage): Promise<void>;
  /** True once the connection was lost or closed: the pool opens a new one for the next attempt. */
  readonly closed: boolean;
  /** Closes the connection; pending publishes fail. Never throws. */
  close(): Promise<void>;
}

/** A client certificate and its key (PEM) presented in the TLS handshake (mutual TLS, decision 0058). */
export interface BrokerClientTls {
  readonly cert: string;
  readonly key: string;
}

/**
 * Opens a connection to `destination`'s broker at `address` (its host as resolved and allowed by
 * the URL policy), within `timeoutMs`; over TLS presenting `clientTls` when given.
 */
export type BrokerConnector = (destination: BrokerDestination, address: string, timeoutMs: number, clientTls?: BrokerClientTls) => Promise<BrokerConnection>;

/** A failed publish or connection, with the outcome recorded for the attempt. */
export class BrokerFailure extends Error {
  readonly outcome: AttemptOutcome;

  constructor(outcome: AttemptOutcome, message: string) {
    super(message);
    this.name = 'BrokerFailure';
    this.outcome = outcome;
  }
}
