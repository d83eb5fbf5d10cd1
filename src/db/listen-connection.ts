/**
 * A dedicated LISTEN connection on PostgreSQL, outside the pool, so its faults are ours to handle:
 * when it fails to open, errors or ends (a terminated backend, a failover), it is reopened after a
 * backoff, and `live` says whether notifications are being received meanwhile. Used by the webhook
 * worker (its poller and dispatcher wake on NOTIFY, webhooks/webhook-wakeup.ts; they poll on their
 * interval while it is down) and by the read caches (db/read-cache-signals.ts; bypassed while it is
 * down).
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { CONNECT_TIMEOUT_MS } from './database.ts';

/** Wait before reopening after the `failures`-th consecutive loss: from min(intervalMs, 1 s), doubling, at most 30 s. */
export function listenBackoffMs(failures: number, intervalMs: number): number {
  return Math.min(30_000, Math.min(intervalMs, 1000) * 2 ** Math.min(Math.max(0, failures - 1), 10));
}

export interface ListenConnectionOptions {
  readonly url: string;
  readonly channels: readonly string[];
  readonly applicationName: string;
  /** The backoff starts at min(intervalMs, 1 s). */
  readonly intervalMs: number;
  readonly logger: Pick<Logger, 'warn' | 'info'>;
  /** What the warning of a lost connection says (who it is and what happens until it is back). */
  readonly lostMessage: string;
  /** What the note of a restored connection says. */
  readonly restoredMessage: string;
  /** `payload`: what the NOTIFY said ('' when nothing). */
  readonly onNotification: (channel: string, payload: string) => void;
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

  /** True while the connection listens. */
  get live(): boolean {
    return this.#client !== undefined;
  }

  /** Opens the connection; resolves when it listens or has failed (then it retries by itself). */
  async open(): Promise<void> {
    const { url, channels, applicationName, intervalMs, logger } = this.#options;
    const client = new pg.Client({ connectionString: url, application_name: applicationName, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    let lost = false;
    const onLost = (error?: Error) => {
      if (lost) return;
      lost = true;
      if (this.#client === client) this.#client = undefined;
      client.end().catch(() => {});
      if (this.#closed) return;
      this.#failures++;
      const delay = listenBackoffMs(this.#failures, intervalMs);
      logger.warn({ err: error, retryInMs: delay }, this.#options.lostMessage);
      this.#retry = setTimeout(() => void this.open(), delay);
      this.#retry.unref();
    };
    client.on('notification', (message) => this.#options.onNotification(message.channel, message.payload ?? ''));
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      for (const channel of channels) await client.query(`LISTEN ${channel}`);
    } catch (error) {
      onLost(error as Error);
      return;
    }
    if (this.#closed || lost) {
      await client.end().catch(() => {});
      return;
    }
    if (this.#failures > 0) logger.info(this.#options.restoredMessage);
    this.#failures = 0;
    this.#client = client;
    this.#options.onListening();
  }

  /** Closes the connection and stops reopening it. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }
}
