/**
 * Which URLs a webhook may target, so the service cannot be aimed at its own network (SSRF):
 * http or https, a host, no credentials in the URL; and unless the deployment allows it
 * (WEBHOOK_ALLOW_PRIVATE_URLS=true), no loopback, private, link-local, CGNAT, multicast or reserved
 * address, whether written as an IP or reached through a hostname. Checked when an endpoint is
 * saved and again on every connection (`guardedLookup`), so a hostname re-pointed after
 * registration (DNS rebinding) is refused too.
 */
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { lookup as dnsLookup } from 'node:dns';
import { promises as dns } from 'node:dns';

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16],
  ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['2001:db8::', 32], ['100::', 64],
] as const) blocked.addSubnet(net, prefix, 'ipv6');

/** True when `address` (an IPv4 or IPv6 literal) is not a public unicast address. */
export function isPrivateAddress(address: string): boolean {
  const host = address.replace(/^\[|\]$/g, '');
  const family = isIP(host);
  if (family === 4) return blocked.check(host, 'ipv4');
  if (family !== 6) return false;
  // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible and NAT64 (64:ff9b::/96) forms carry an IPv4 address.
  const embedded = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/i.exec(host);
  if (embedded) return blocked.check(embedded[1]!, 'ipv4');
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(host);
  if (hex) {
    const hi = parseInt(hex[1]!, 16), lo = parseInt(hex[2]!, 16);
    return blocked.check(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, 'ipv4');
  }
  return blocked.check(host, 'ipv6');
}

export class WebhookUrlError extends Error {}

/**
 * Validates the form of `url` and, unless `allowPrivate`, that it does not name or resolve to a
 * private address. Returns the normalised URL; throws WebhookUrlError with a reason.
 */
export async function validateWebhookUrl(url: string, allowPrivate: boolean, resolve: (host: string) => Promise<string[]> = resolveAll): Promise<string> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new WebhookUrlError('must be an absolute http or https URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new WebhookUrlError('scheme must be http or https');
  if (!parsed.hostname) throw new WebhookUrlError('must have a host');
  if (parsed.username || parsed.password) throw new WebhookUrlError('must not carry credentials');
  if (parsed.hash) throw new WebhookUrlError('must not have a fragment');
  if (allowPrivate) return parsed.toString();
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    if (isPrivateAddress(host)) throw new WebhookUrlError('private, loopback and link-local addresses are not allowed');
    return parsed.toString();
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
  return parsed.toString();
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
