/**
 * Where an endpoint's URL sends its deliveries (decision 0031): an HTTPS receiver, or a message
 * broker named by the URL's scheme. Pure: parsing, the form's rules, the kind shown to admins and
 * the URL with its password redacted. The host policy (private addresses) is webhook-url-policy.ts.
 *
 * | scheme | published to |
 * |---|---|
 * | `amqp://user:pass@host:5672/<vhost, url-encoded>?exchange=<name>` (`amqps://`) | the exchange, routing key = event type |
 * | `mqtt://user:pass@host:1883/<topic prefix>` (`mqtts://`) | topic `<prefix>/<event type>` |
 * | `nats://user:pass@host:4222/<subject prefix>` (`nats+tls://`) | JetStream subject `<prefix>.<event type>` |
 */

/** The kind of destination, as the admin API and the dashboard show it. */
export type DestinationKind = 'https' | 'amqp' | 'mqtt' | 'nats';

/** A broker URL, parsed. */
export interface BrokerDestination {
  readonly kind: Exclude<DestinationKind, 'https'>;
  readonly tls: boolean;
  /** Host name or IP literal (no brackets). */
  readonly host: string;
  readonly port: number;
  /** Decoded user name and password from the URL's user-info; empty when absent. */
  readonly username: string;
  readonly password: string;
  /** AMQP: the virtual host (decoded; `/` when the path is empty). */
  readonly vhost: string;
  /** AMQP: the exchange. */
  readonly exchange: string;
  /** MQTT: the topic prefix; NATS: the subject prefix. */
  readonly prefix: string;
}

/** Thrown for a URL the policy refuses; `message` says why (shown to the admin, naming `url`). */
export class WebhookUrlError extends Error {}

const SCHEMES: Record<string, { kind: BrokerDestination['kind']; tls: boolean; port: number }> = {
  'amqp:': { kind: 'amqp', tls: false, port: 5672 },
  'amqps:': { kind: 'amqp', tls: true, port: 5671 },
  'mqtt:': { kind: 'mqtt', tls: false, port: 1883 },
  'mqtts:': { kind: 'mqtt', tls: true, port: 8883 },
  'nats:': { kind: 'nats', tls: false, port: 4222 },
  'nats+tls:': { kind: 'nats', tls: true, port: 4222 },
};

/** Schemes an endpoint URL may have. */
export const DESTINATION_SCHEMES = ['https', 'http', ...Object.keys(SCHEMES).map((s) => s.slice(0, -1))] as const;

/** Query parameter names that carry credentials: refused in a broker URL (they belong in user:password@). */
const CREDENTIAL_PARAMS = /^(user(name)?|pass(word|wd)?|pwd|token|auth|authorization|credentials?|secret|key|api[-_]?key|jwt|nkey|seed)$/i;

/** The destination kind of a stored endpoint URL (an unknown scheme reads as https: it was validated). */
export function destinationKind(url: string): DestinationKind {
  const colon = url.indexOf(':');
  const scheme = colon === -1 ? '' : url.slice(0, colon + 1).toLowerCase();
  return SCHEMES[scheme]?.kind ?? 'https';
}

/** True when `url` names a broker (AMQP, MQTT or NATS) rather than an HTTP receiver. */
export function isBrokerUrl(url: string): boolean {
  return destinationKind(url) !== 'https';
}

/** What the password of a URL reads as wherever an endpoint is shown. */
export const REDACTED_PASSWORD = '****';

/**
 * `url` as it may be shown after creation: the password of a broker URL replaced by `****` (the
 * user name stays, so an admin can tell which account it uses), and a NATS token (a user name
 * without a password) too. HTTP URLs never carry credentials.
 */
export function redactDestinationUrl(url: string): string {
  if (!isBrokerUrl(url)) return url;
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = REDACTED_PASSWORD;
    else if (parsed.username && destinationKind(url) === 'nats') parsed.username = REDACTED_PASSWORD;
    else return url;
    return parsed.toString();
  } catch {
    // A stored URL was validated, so this is not reached; say nothing of it rather than leak it.
    return `${url.slice(0, url.indexOf(':') + 1)}//${REDACTED_PASSWORD}`;
  }
}

/**
 * Parses a broker URL and checks its form: a host, a port in range, an exchange (AMQP) or prefix
 * (MQTT, NATS) that is a valid name, no fragment, no credentials in the query string and no other
 * query parameters. Throws WebhookUrlError.
 */
export function parseBrokerUrl(url: string): BrokerDestination {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new WebhookUrlError('must be an absolute URL');
  }
  const scheme = SCHEMES[parsed.protocol];
  if (!scheme) throw new WebhookUrlError(`scheme must be one of ${DESTINATION_SCHEMES.join(', ')}`);
  if (!parsed.hostname) throw new WebhookUrlError('must have a host');
  // `hash` is empty for a bare trailing '#' (an empty fragment: `mqtt://…/prefix/#` parsed as the
  // prefix alone), so the text is looked at. For MQTT a '#' is the wildcard the user meant.
  if (url.includes('#')) {
    throw new WebhookUrlError(
      scheme.kind === 'mqtt' ? "the topic prefix must not hold the wildcards '+' or '#', nor start with '$'" : 'must not have a fragment',
    );
  }
  const names = [...parsed.searchParams.keys()];
  const credential = names.find((n) => CREDENTIAL_PARAMS.test(n));
  if (credential)
    throw new WebhookUrlError(`must not carry credentials in the query string ('${credential}'): put them in the user-info part, user:password@host`);
  const allowed = scheme.kind === 'amqp' ? ['exchange'] : [];
  const unknown = names.find((n) => !allowed.includes(n));
  if (unknown) {
    throw new WebhookUrlError(
      allowed.length > 0 ? `unknown query parameter '${unknown}' (only ${allowed.join(', ')})` : `must not have a query string ('${unknown}')`,
    );
  }
  const decode = (text: string, what: string) => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw new WebhookUrlError(`${what} is not valid percent-encoding`);
    }
  };
  const base = {
    kind: scheme.kind,
    tls: scheme.tls,
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port: parsed.port ? Number(parsed.port) : scheme.port,
    username: decode(parsed.username, 'the user name'),
    password: decode(parsed.password, 'the password'),
  };
  if (parsed.password && !parsed.username) throw new WebhookUrlError('a password needs a user name (user:password@host)');
  const path = parsed.pathname.replace(/^\//, '');
  if (scheme.kind === 'amqp') {
    if (path.includes('/')) throw new WebhookUrlError('the path is the virtual host, url-encoded: a / inside it is written %2F');
    const exchange = parsed.searchParams.get('exchange') ?? '';
    if (!exchange) throw new WebhookUrlError('an AMQP URL needs ?exchange=<name>: the exchange events are published to');
    if (exchange.length > 255 || !/^[A-Za-z0-9_.:-]+$/.test(exchange) || exchange.startsWith('amq.')) {
      throw new WebhookUrlError("the exchange must be 1–255 letters, digits, '-', '_', '.', ':' and not a reserved amq.* exchange");
    }
    return { ...base, vhost: path === '' ? '/' : decode(path, 'the virtual host'), exchange, prefix: '' };
  }
  const prefix = decode(path, 'the prefix');
  if (scheme.kind === 'mqtt') {
    const topic = prefix.replace(/\/+$/, '');
    if (!topic) throw new WebhookUrlError('an MQTT URL needs a topic prefix as its path: mqtt://host:1883/<prefix>');
    if (/[+#]/.test(topic) || topic.includes(String.fromCharCode(0)) || topic.startsWith('$'))
      throw new WebhookUrlError("the topic prefix must not hold the wildcards '+' or '#', nor start with '$'");
    return { ...base, vhost: '', exchange: '', prefix: topic };
  }
  if (!prefix) throw new WebhookUrlError('a NATS URL needs a subject prefix as its path: nats://host:4222/<prefix>');
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(prefix)) {
    throw new WebhookUrlError("the subject prefix must be tokens of letters, digits, '-', '_' separated by '.' (no wildcards '*' or '>')");
  }
  return { ...base, vhost: '', exchange: '', prefix };
}

/** Where a message of `eventType` goes: the routing key (AMQP), topic (MQTT) or subject (NATS). */
export function addressOf(destination: BrokerDestination, eventType: string): string {
  if (destination.kind === 'amqp') return eventType;
  if (destination.kind === 'mqtt') return `${destination.prefix}/${eventType}`;
  return `${destination.prefix}.${eventType}`;
}
