/**
 * Which URLs a webhook may target, so the service cannot be aimed at its own network (SSRF):
 * http or https, a host, no credentials in the URL — or a broker URL (AMQP, MQTT, NATS) of the form
 * webhook-destination.ts checks, whose credentials sit in its user-info part; and unless the deployment allows it
 * (WEBHOOK_ALLOW_PRIVATE_URLS=true), no loopback, private, link-local, CGNAT, multicast or reserved
 * address, whether written as an IP (in any IPv6 spelling that embeds an IPv4 address) or reached
 * through a hostname. Checked when an endpoint is
 * saved and again on every connection (`guardedLookup`), so a hostname re-pointed after
 * registration (DNS rebinding) is refused too.
 */
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { lookup as dnsLookup } from 'node:dns';
import { promises as dns } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { isBrokerUrl, parseBrokerUrl, WebhookUrlError } from './webhook-destination.ts';

export { WebhookUrlError };

/**
 * IPv4 networks refused on top of everything ipaddr.js does not class as plain `unicast` (kept as
 * data so the policy reads at a glance; ipaddr.js's ranges cover them too).
 */
const blockedIPv4 = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blockedIPv4.addSubnet(net, prefix, 'ipv4');

/**
 * IPv6 networks refused outright: the local-use NAT64 prefix (RFC 8215, which embeds IPv4 at
 * operator-chosen positions, so it cannot be decoded) and the newer documentation prefix.
 */
const blockedIPv6 = new BlockList();
for (const [net, prefix] of [
  ['64:ff9b:1::', 48],
  ['3fff::', 20],
] as const)
  blockedIPv6.addSubnet(net, prefix, 'ipv6');

/**
 * The IPv4 addresses an IPv6 address carries, decided on its bytes (never on its spelling, which
 * the URL parser rewrites: `[::127.0.0.1]` becomes `[::7f00:1]`): IPv4-compatible `::/96`,
 * IPv4-mapped `::ffff:0:0/96`, IPv4-translated `::ffff:0:0:0/96`, NAT64 `64:ff9b::/96` (last 32
 * bits), 6to4 `2002::/16` (bits 16–48), Teredo `2001::/32` (server bits 32–64, client last 32 bits
 * inverted). Empty for any other address.
 */
export function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] {
  const b = address.toByteArray();
  const v4 = (at: number, xor = 0) => new ipaddr.IPv4([b[at]! ^ xor, b[at + 1]! ^ xor, b[at + 2]! ^ xor, b[at + 3]! ^ xor]);
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const range = address.range();
  if (range === 'ipv4Mapped' || range === 'rfc6145' || range === 'rfc6052' || zeros(0, 12)) return [v4(12)];
  if (range === '6to4') return [v4(2)];
  if (range === 'teredo') return [v4(4), v4(12, 0xff)];
  return [];
}

function isPrivateIPv4(address: ipaddr.IPv4): boolean {
  return address.range() !== 'unicast' || blockedIPv4.check(address.toString(), 'ipv4');
}

/**
 * True when `address` (an IPv4 or IPv6 literal, brackets and zone allowed) is not a public unicast
 * address: loopback, private, link-local, CGNAT, ULA, multicast, unspecified, documentation and
 * other reserved ranges, and any IPv6 form whose embedded IPv4 address is one of those.
 */
export function isPrivateAddress(address: string): boolean {
  const host = address.replace(/^\[|\]$/g, '');
  if (!isIP(host) || !ipaddr.isValid(host)) return false;
  const parsed = ipaddr.parse(host);
  if (parsed.kind() === 'ipv4') return isPrivateIPv4(parsed as ipaddr.IPv4);
  const v6 = parsed as ipaddr.IPv6;
  const embedded = embeddedIPv4(v6);
  if (embedded.length > 0) return embedded.some(isPrivateIPv4);
  const canonical = v6.toNormalizedString();
  return v6.range() !== 'unicast' || blockedIPv6.check(canonical, 'ipv6');
}

/**
 * Validates the form of `url` and, unless `allowPrivate`, that it does not name or resolve to a
 * private address. Returns the normalised URL; throws WebhookUrlError with a reason.
 */
export async function validateWebhookUrl(url: string, allowPrivate: boolean, resolve: (host: string) => Promise<string[]> = resolveAll): Promise<string> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new WebhookUrlError('must be an absolute http or https URL (or amqp, amqps, mqtt, mqtts, nats, nats+tls)');
  }
  if (isBrokerUrl(url)) {
    // The broker's form (exchange, topic or subject prefix, no credentials in the query), then the same host policy.
    const broker = parseBrokerUrl(url);
    if (!allowPrivate) await checkHost(broker.host, resolve);
    return parsed.toString();
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new WebhookUrlError('scheme must be http or https, or a broker: amqp, amqps, mqtt, mqtts, nats, nats+tls');
  }
  if (!parsed.hostname) throw new WebhookUrlError('must have a host');
  if (parsed.username || parsed.password) throw new WebhookUrlError('must not carry credentials');
  // The text, not `hash`: an empty fragment (a bare trailing '#') leaves `hash` empty.
  if (url.includes('#')) throw new WebhookUrlError('must not have a fragment');
  if (allowPrivate) return parsed.toString();
  await checkHost(parsed.hostname.replace(/^\[|\]$/g, ''), resolve);
  return parsed.toString();
}

/** Refuses `host` (a name or an IP literal) when it is, or resolves to, a private address. */
async function checkHost(host: string, resolve: (host: string) => Promise<string[]>): Promise<void> {
  if (isIP(host)) {
    if (isPrivateAddress(host)) throw new WebhookUrlError('private, loopback and link-local addresses are not allowed');
    return;
  }
  if (host === 'localhost' || host.endsWith('.localhost')) throw new WebhookUrlError('private, loopback and link-local addresses are not allowed');
  let addresses: string[];
  try {
    addresses = await resolve(host);
  } catch {
    throw new WebhookUrlError(`host '${host}' does not resolve`);
  }
  if (addresses.length === 0) throw new WebhookUrlError(`host '${host}' does not resolve`);
  if (addresses.some(isPrivateAddress)) throw new WebhookUrlError(`host '${host}' resolves to a private, loopback or link-local address`);
}

/**
 * The address a broker connection to `host` goes to, checked like every HTTP connection is
 * (`guardedLookup`): the first address `host` resolves to that the policy allows. Broker clients
 * then connect to this address (TLS names the host for its certificate check), so a name
 * re-pointed after registration (DNS rebinding) is refused too. Throws an Error with code
 * EWEBHOOKPRIVATE when only private addresses are found.
 */
export async function resolveBrokerHost(host: string, allowPrivate: boolean): Promise<string> {
  if (isIP(host)) {
    if (!allowPrivate && isPrivateAddress(host)) throw Object.assign(new Error(`refused: ${host} is a private address`), { code: 'EWEBHOOKPRIVATE' });
    return host;
  }
  const addresses = await resolveAll(host);
  const allowed = allowPrivate ? addresses : addresses.filter((a) => !isPrivateAddress(a));
  if (allowed.length === 0) throw Object.assign(new Error(`refused: '${host}' resolves to a private address`), { code: 'EWEBHOOKPRIVATE' });
  return allowed[0]!;
}

async function resolveAll(host: string): Promise<string[]> {
  const results = await dns.lookup(host, { all: true, verbatim: true });
  return results.map((r) => r.address);
}

/**
 * A `lookup` for sockets that refuses private addresses unless `allowPrivate`: used by the
 * dispatcher's connection pool so every connection is checked when it is made.
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return (callback as (e: Error | null, a: unknown, f?: number) => void)(error, undefined as never);
      const list = addresses as unknown as { address: string; family: number }[];
      const allowed = allowPrivate ? list : list.filter((a) => !isPrivateAddress(a.address));
      const cb = callback as (e: NodeJS.ErrnoException | null, a: unknown, f?: number) => void;
      if (allowed.length === 0) {
        const refused = Object.assign(new Error(`refused: '${hostname}' resolves to a private address`), { code: 'EWEBHOOKPRIVATE' });
        return cb(refused, undefined);
      }
      if ((options as { all?: boolean }).all) return cb(null, allowed);
      return cb(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
}
