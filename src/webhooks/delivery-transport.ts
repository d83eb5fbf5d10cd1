/**
 * The delivery step of an attempt, by the endpoint URL's scheme (decision 0031): `http(s)` is a
 * signed POST (webhook-http-client.ts); `amqp(s)`, `mqtt(s)` and `nats` / `nats+tls` publish the
 * same body with the same headers to a broker (amqp-publisher.ts, mqtt-publisher.ts,
 * nats-publisher.ts). Every transport answers with the same attempt result, so the worker's retry
 * schedule, breaker, dead letters and metrics treat a broker like any receiver.
 *
 * Broker connections are pooled per endpoint: one connection, opened by the first attempt and shared
 * by the ones in flight alongside it; a lost one (broker restart, network) is dropped and the next
 * attempt opens a new one. An endpoint's connection is closed when its URL changes (the next attempt
 * sees a new URL), when the endpoint changes or goes (`closeEndpoint`, and `reconcile` for changes
 * made by another process), after an attempt timed out on it (its state is unknown), and on close().
 * Every connection goes to an address the URL policy allows (resolveBrokerHost), and no failure
 * text recorded or logged carries the URL's password.
 */
import { addressOf, parseBrokerUrl, isBrokerUrl, type BrokerDestination } from './webhook-destination.ts';
import { resolveBrokerHost } from './webhook-url-policy.ts';
import { DELIVERY_HEADERS, REDACTED, type AttemptOutcome, type HttpAttemptResult, type WebhookHttpClient } from './webhook-http-client.ts';
import { BrokerFailure, type BrokerConnection, type BrokerConnector } from './broker-publisher.ts';
import { createHash } from 'node:crypto';
import { openCredentials, type CredentialKeys, type EndpointCredentials } from './endpoint-credentials.ts';
import { OAuthTokens } from './webhook-oauth.ts';
import type { ClientTls } from './webhook-http-client.ts';

/** What a transport needs of a claimed delivery. */
export interface DeliveryTarget {
  readonly id: string;
  readonly endpointId: string;
  readonly url: string;
  readonly event: { readonly type: string };
  readonly body: string;
  /** The endpoint's credentials, sealed (decision 0058); null or absent: none. */
  readonly sealedCredentials?: string | null;
}

export interface DeliveryTransportOptions {
  http: WebhookHttpClient;
  timeoutMs: number;
  allowPrivate: boolean;
  /** WEBHOOK_CREDENTIALS_KEY's keys, which open endpoints' credentials; undefined: unset. */
  credentialKeys?: CredentialKeys;
  /** Epoch ms, for OAuth tokens' expiry. */
  now?: () => number;
  /** Broker clients by kind; default the real ones (tests may wrap them). */
  connectors?: Partial<Record<BrokerDestination['kind'], BrokerConnector>>;
}

/**
 * The real broker clients, each loaded by its first connection: a process with no broker endpoint
 * (most, and the embedded default) never holds amqplib, mqtt or nats in memory (decision 0043:
 * ~5 MiB of heap and ~25 MiB of resident memory at start).
 */
const CONNECTORS: Record<BrokerDestination['kind'], BrokerConnector> = {
  amqp: async (...args) => (await import('./amqp-publisher.ts')).connectAmqp(...args),
  mqtt: async (...args) => (await import('./mqtt-publisher.ts')).connectMqtt(...args),
  nats: async (...args) => (await import('./nats-publisher.ts')).connectNats(...args),
};

/** One endpoint's pooled broker connection. */
interface PooledBroker {
  readonly url: string;
  readonly destination: BrokerDestination;
  /** The sealed credentials it was opened with (a client certificate): changed ones open a new connection. */
  readonly sealedCredentials: string | null;
  /** The connection being opened or open; undefined after a failure or loss (the next attempt opens one). */
  connection: Promise<BrokerConnection> | undefined;
  /** The connection once open (to tell whether a failed attempt's connection is still the pooled one). */
  open: BrokerConnection | undefined;
  /** Taken out of the pool (endpoint changed, transport closing): a connection it opens is closed at once. */
  retired: boolean;
}

/** Most characters of a failure's text kept with the attempt. */
const ERROR_CHARS = 500;
/** Opened credentials kept, by their sealed text (more: opened again). */
const CREDENTIALS_KEPT = 1000;

/** An endpoint's credentials as the transport uses them. */
interface OpenedCredentials {
  readonly credentials: EndpointCredentials;
  readonly tls: ClientTls | undefined;
}

export class DeliveryTransport {
  readonly #http: WebhookHttpClient;
  readonly #timeoutMs: number;
  readonly #allowPrivate: boolean;
  readonly #connectors: Record<BrokerDestination['kind'], BrokerConnector>;
  readonly #brokers = new Map<string, PooledBroker>();
  readonly #credentialKeys: CredentialKeys | undefined;
  readonly #opened = new Map<string, OpenedCredentials>();
  readonly #tokens: OAuthTokens;
  #closing = false;

  constructor(options: DeliveryTransportOptions) {
    this.#http = options.http;
    this.#timeoutMs = options.timeoutMs;
    this.#allowPrivate = options.allowPrivate;
    this.#connectors = { ...CONNECTORS, ...options.connectors };
    this.#credentialKeys = options.credentialKeys;
    this.#tokens = new OAuthTokens((url, form, headers) => this.#http.requestToken(url, form, headers), options.now);
  }

  /**
   * Sends `delivery` with `headers` (the signature headers) by its URL's transport. Never throws.
   * `bytes`: the body's UTF-8 bytes when the caller has them already (it signed them).
   */
  async send(delivery: DeliveryTarget, headers: Record<string, string>, bytes: Buffer = Buffer.from(delivery.body)): Promise<HttpAttemptResult> {
    const sealed = delivery.sealedCredentials ?? null;
    if (!isBrokerUrl(delivery.url)) {
      if (sealed === null) return sent(await this.#http.post(delivery.url, bytes, headers), { ...DELIVERY_HEADERS, ...headers });
      return this.#postWithCredentials(delivery, sealed, headers, bytes);
    }
    // A broker message carries the signature headers as its own (AMQP headers, MQTT user properties, NATS headers).
    return sent(await this.#publish(delivery, headers, bytes), headers);
  }

  /**
   * A POST with the endpoint's credentials: its extra headers (the signature's own win), a bearer
   * token when it has OAuth client credentials, its client certificate. A 401 answer drops the
   * token it carried and the request is sent once more with a new one.
   */
  async #postWithCredentials(delivery: DeliveryTarget, sealed: string, signature: Record<string, string>, bytes: Buffer): Promise<HttpAttemptResult> {
    const started = performance.now();
    let opened: OpenedCredentials;
    try {
      opened = this.#open(delivery.endpointId, sealed);
    } catch (error) {
      return result('credentials_error', (error as Error).message, started);
    }
    const { credentials, tls } = opened;
    const headers = { ...credentials.headers, ...signature };
    // What the attempt records: the extra headers' values are credentials (stored sealed, never shown).
    const recorded = { ...DELIVERY_HEADERS, ...redactedValues(credentials.headers), ...signature };
    const oauth = credentials.oauth;
    if (!oauth) return sent(await this.#http.post(delivery.url, bytes, headers, tls), recorded);
    let answer: HttpAttemptResult | undefined;
    for (let round = 0; round < 2; round++) {
      let token: string;
      try {
        token = await this.#tokens.token(delivery.endpointId, oauth);
      } catch (error) {
        return result('credentials_error', (error as Error).message, started);
      }
      answer = await this.#http.post(delivery.url, bytes, { ...headers, authorization: `Bearer ${token}` }, tls);
      if (answer.statusCode !== 401) break;
      this.#tokens.invalidate(delivery.endpointId, token);
    }
    return sent({ ...answer!, durationMs: Math.round(performance.now() - started) }, { ...recorded, authorization: `Bearer ${REDACTED}` });
  }

  /** `sealed` opened (kept by its text: the same sealed text is opened once). Throws SealedCredentialsError. */
  #open(endpointId: string, sealed: string): OpenedCredentials {
    const found = this.#opened.get(sealed);
    if (found) return found;
    const credentials = openCredentials(this.#credentialKeys, endpointId, sealed);
    const certificate = credentials.client_certificate;
    const tls = certificate
      ? {
          id: createHash('sha256').update(certificate.certificate).update('\0').update(certificate.private_key).digest('hex'),
          cert: certificate.certificate,
          key: certificate.private_key,
        }
      : undefined;
    if (this.#opened.size >= CREDENTIALS_KEPT) this.#opened.clear();
    const opened = { credentials, tls };
    this.#opened.set(sealed, opened);
    return opened;
  }

  /** Prepares the transport of `url` (an HTTP endpoint's: the HTTP client loaded before its first delivery). */
  async prepare(url: string): Promise<boolean> {
    return isBrokerUrl(url) ? false : this.#http.warm();
  }

  get httpClientLoaded(): boolean {
    return this.#http.loaded;
  }

  /** Endpoints holding a pooled broker connection, with the URL it was opened for. */
  brokerEndpoints(): Map<string, string> {
    return new Map([...this.#brokers].map(([id, pooled]) => [id, pooled.url]));
  }

  /** Closes `endpointId`'s broker connection, if any (its URL changed, it was disabled or deleted). */
  async closeEndpoint(endpointId: string): Promise<void> {
    const pooled = this.#brokers.get(endpointId);
    if (!pooled) return;
    this.#brokers.delete(endpointId);
    await closePooled(pooled);
  }

  /**
   * Closes the connections of endpoints whose current URL (`current`: endpoint id → URL of the
   * enabled endpoints among those asked for) differs from the pooled one, or that are gone or disabled.
   */
  async reconcile(current: ReadonlyMap<string, string>): Promise<void> {
    const stale = [...this.#brokers].filter(([id, pooled]) => current.get(id) !== pooled.url).map(([id]) => id);
    await Promise.all(stale.map((id) => this.closeEndpoint(id)));
  }

  /** Closes every broker connection and the HTTP pool (call after the attempts in flight finished). */
  async close(): Promise<void> {
    this.#closing = true;
    const pooled = [...this.#brokers.values()];
    this.#brokers.clear();
    await Promise.all([...pooled.map(closePooled), this.#http.close()]);
  }

  async #publish(delivery: DeliveryTarget, headers: Record<string, string>, bytes: Buffer): Promise<HttpAttemptResult> {
    const started = performance.now();
    const sealed = delivery.sealedCredentials ?? null;
    let pooled = this.#brokers.get(delivery.endpointId);
    if (pooled && (pooled.url !== delivery.url || pooled.sealedCredentials !== sealed)) {
      // The endpoint's URL or credentials changed since its connection was opened.
      await this.closeEndpoint(delivery.endpointId);
      pooled = undefined;
    }
    let tls: ClientTls | undefined;
    try {
      tls = sealed === null ? undefined : this.#open(delivery.endpointId, sealed).tls;
    } catch (error) {
      return result('credentials_error', (error as Error).message, started);
    }
    let destination: BrokerDestination;
    try {
      destination = pooled?.destination ?? parseBrokerUrl(delivery.url);
    } catch (error) {
      return result('connection_error', `invalid broker URL: ${(error as Error).message}`, started);
    }
    if (!pooled) {
      pooled = { url: delivery.url, sealedCredentials: sealed, destination, connection: undefined, open: undefined, retired: this.#closing };
      if (!this.#closing) this.#brokers.set(delivery.endpointId, pooled);
    }
    const entry = pooled;
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(new BrokerFailure('timeout', `the broker did not acknowledge within ${this.#timeoutMs} ms`));
      }, this.#timeoutMs);
    });
    deadline.catch(() => {});
    let connection: BrokerConnection | undefined;
    try {
      connection = await Promise.race([this.#connection(entry, tls), deadline]);
      await Promise.race([
        connection.publish({
          address: addressOf(destination, delivery.event.type),
          body: bytes,
          headers,
          deliveryId: delivery.id,
        }),
        deadline,
      ]);
      return {
        outcome: 'success',
        statusCode: null,
        responseExcerpt: null,
        error: null,
        retryAfterMs: null,
        durationMs: Math.round(performance.now() - started),
      };
    } catch (error) {
      // A connection that failed a publish may be broken in ways its events did not show (a lost
      // confirm, a hung socket): the next attempt starts on a new one.
      if (connection && (timedOut || !(error instanceof BrokerFailure) || error.outcome !== 'broker_rejected')) this.#drop(entry, connection);
      const outcome: AttemptOutcome = error instanceof BrokerFailure ? error.outcome : classify(error);
      return result(outcome, scrub(messageOf(error), destination), started);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The pooled connection of `entry`, opened now when there is none or it was lost. Attempts that
   * arrive while it is being opened share the opening, and its failure.
   */
  async #connection(entry: PooledBroker, tls: ClientTls | undefined): Promise<BrokerConnection> {
    const open = entry.connection;
    if (open) {
      const connection = await open;
      if (!connection.closed) return connection;
      if (entry.connection === open) entry.connection = undefined;
      return this.#connection(entry, tls);
    }
    const opening = (async () => {
      const address = await resolveBrokerHost(entry.destination.host, this.#allowPrivate);
      return this.#connectors[entry.destination.kind](entry.destination, address, this.#timeoutMs, tls && { cert: tls.cert, key: tls.key });
    })();
    entry.connection = opening;
    opening.then(
      (connection) => {
        entry.open = connection;
        // Retired meanwhile (endpoint changed, worker stopping): this one is not kept.
        if (entry.retired) void connection.close();
      },
      () => {
        if (entry.connection === opening) entry.connection = undefined;
      },
    );
    return opening;
  }

  /** Closes `connection`, and takes it out of `entry` if it is still the pooled one (the next attempt reopens). */
  #drop(entry: PooledBroker, connection: BrokerConnection): void {
    if (entry.open === connection) {
      entry.open = undefined;
      entry.connection = undefined;
    }
    void connection.close();
  }
}

async function closePooled(pooled: PooledBroker): Promise<void> {
  pooled.retired = true;
  const connection = pooled.connection;
  pooled.connection = undefined;
  if (!connection) return;
  try {
    await (await connection).close();
  } catch {
    // It never opened: nothing to close.
  }
}

/**
 * `answer` with the headers its request carried, when a request went out: not for an address the
 * policy refused or credentials that could not be used (nothing was sent).
 */
function sent(answer: HttpAttemptResult, headers: Readonly<Record<string, string>>): HttpAttemptResult {
  if (answer.outcome === 'blocked_address' || answer.outcome === 'credentials_error') return answer;
  return { ...answer, requestHeaders: headers };
}

function redactedValues(headers: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.keys(headers).map((name) => [name, REDACTED]));
}

function result(outcome: AttemptOutcome, error: string, started: number): HttpAttemptResult {
  return {
    outcome,
    statusCode: null,
    responseExcerpt: null,
    error: error.slice(0, ERROR_CHARS) || outcome,
    retryAfterMs: null,
    durationMs: Math.round(performance.now() - started),
  };
}

function classify(error: unknown): AttemptOutcome {
  const code = (error as NodeJS.ErrnoException)?.code;
  return code === 'EWEBHOOKPRIVATE' ? 'blocked_address' : 'connection_error';
}

function messageOf(error: unknown): string {
  const err = error as NodeJS.ErrnoException;
  if (err instanceof BrokerFailure || err?.code === 'EWEBHOOKPRIVATE') return err.message;
  return [err?.code, err?.message ?? String(error)].filter(Boolean).join(': ');
}

/** `text` without the destination's password (as written, or percent-encoded as in its URL). */
function scrub(text: string, destination: BrokerDestination): string {
  let safe = text;
  for (const secret of new Set([destination.password, encodeURIComponent(destination.password)])) {
    if (secret.length > 0) safe = safe.split(secret).join('****');
  }
  return safe;
}
