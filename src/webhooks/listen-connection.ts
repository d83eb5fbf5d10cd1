/**
 * The LISTEN connection of a worker on PostgreSQL: NOTIFY on `store_events` wakes its poller, on
 * `webhook_deliveries` its dispatcher (webhook-wakeup.ts). It is a dedicated client outside the
 * pool, so its faults are ours to handle: when it fails to open, errors or ends (a terminated
 * backend, a failover), the worker keeps polling on its interval and a new one is opened after a
 * backoff (listenBackoffMs).
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { CONNECT_TIMEOUT_MS } from '../db/database.ts';
import { DELIVERIES_CHANNEL, EVENTS_CHANNEL } from './webhook-wakeup.ts';

/** Wait before reopening the LISTEN connection after its `failures`-th consecutive loss. */
export function listenBackoffMs(failures: number, intervalMs: number): number {
  return Math.min(30_000, Math.min(intervalMs, 1000) * 2 ** Math.min(Math.max(0, failures - 1), 10));
}

export interface ListenConnectionOptions {
  readonly url: string;
  /** WEBHOOK_POLL_INTERVAL_MS: the backoff starts below it. */
  readonly intervalMs: number;
  readonly logger: Pick<Logger, 'warn' | 'info'>;
  /** New events were appended. */
  readonly onEvents: () => void;
  /** Deliveries were made due by hand. */
  readonly onDeliveries: () => void;
  /** The connection is open (at start or after a reconnect): what was written meanwhile is looked at now. */
  readonly onListening: () => void;
}

export class ListenConnection {
  readonly #options: ListenConnectionOptions;
  #client: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #failures = 0;
  #closed = false;

  constructor(options: ListenConnectionOptions) {
    this.#options = options;
  }

  /** Opens the connection; resolves when it listens or has failed (then it retries by itself). */
  async open(): Promise<void> {
    const { url, intervalMs, logger } = this.#options;
    const client = new pg.Client({ connectionString: url, application_name: 'store-api-webhook-listener', connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    let lost = false;
    const onLost = (error?: Error) => {
      if (lost) return;
      lost = true;
      if (this.#client === client) this.#client = undefined;
      client.end().catch(() => {});
      if (this.#closed) return;
      this.#failures++;
      const delay = listenBackoffMs(this.#failures, intervalMs);
      logger.warn({ err: error, retryInMs: delay }, 'webhook LISTEN connection lost; polling only until it is back');
      this.#retry = setTimeout(() => void this.open(), delay);
      this.#retry.unref();
    };
    client.on('notification', (message) => {
      if (message.channel === EVENTS_CHANNEL) this.#options.onEvents();
      else this.#options.onDeliveries();
    });
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      await client.query(`LISTEN ${DELIVERIES_CHANNEL}`);
    } catch (error) {
      onLost(error as Error);
      return;
    }
    if (this.#closed || lost) {
      await client.end().catch(() => {});
      return;
    }
    if (this.#failures > 0) logger.info('webhook LISTEN connection restored');
    this.#failures = 0;
    this.#client = client;
    this.#options.onListening();
  }

  /** Closes the connection and stops reopening it. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    await this.#client?.end().catch(() => {});
    this.#client = undefined;
  }
}
