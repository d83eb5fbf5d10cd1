/**
 * An endpoint's credentials beyond its signature (decision 0058): extra request headers, OAuth 2.0
 * client credentials (RFC 6749 §4.4) and a client certificate with its key for mutual TLS. What
 * corporate gateways in front of a receiver (or a broker) want besides the Standard Webhooks
 * signature.
 *
 * At rest they are two columns of the endpoint's row: `credentials`, the summary the admin API shows
 * (header names, token URL, client id, scope, the certificate's subject, issuer, expiry and
 * fingerprint: nothing secret), and `credentials_sealed`, the whole of them, sealed with AES-256-GCM
 * under WEBHOOK_CREDENTIALS_KEY and bound to the endpoint's id (a sealed value copied onto another
 * endpoint does not open). Header values, the client secret and the private key leave the process
 * only to the receiver, the token server and the TLS handshake: never in an answer, a log line or
 * an attempt row. Here: the checks of an admin's input (each refusal names its field), the sealing,
 * and the summary. Pure apart from `checkTokenUrl`'s host look-up.
 */
import { createCipheriv, createDecipheriv, createHash, createPrivateKey, randomBytes, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { ApiError } from '../shared/problem.ts';
import { isBrokerUrl, parseBrokerUrl } from './webhook-destination.ts';
import { validateWebhookUrl } from './webhook-url-policy.ts';

/** How the client authenticates to the token server (RFC 6749 §2.3.1): HTTP Basic (default) or in the form body. */
export const OAUTH_CLIENT_AUTH = ['basic', 'body'] as const;
export type OAuthClientAuth = (typeof OAUTH_CLIENT_AUTH)[number];

export interface OAuthClientCredentials {
  readonly token_url: string;
  readonly client_id: string;
  readonly client_secret: string;
  readonly scope: string | null;
  readonly client_auth: OAuthClientAuth;
}

export interface ClientCertificate {
  /** PEM: the certificate, then any intermediates the server needs to build the chain. */
  readonly certificate: string;
  /** PEM, unencrypted. */
  readonly private_key: string;
}

/** An endpoint's credentials, whole (what is sealed, and what the worker opens). */
export interface EndpointCredentials {
  readonly headers: Readonly<Record<string, string>>;
  readonly oauth: OAuthClientCredentials | null;
  readonly client_certificate: ClientCertificate | null;
}

/** What the admin API shows of them: secrets as "set". */
export interface CredentialsSummary {
  headers: Record<string, 'set'>;
  oauth: { token_url: string; client_id: string; scope: string | null; client_auth: OAuthClientAuth; client_secret: 'set' } | null;
  client_certificate: { subject: string; issuer: string; not_after: string; fingerprint_sha256: string; private_key: 'set' } | null;
}

/**
 * An admin's input: on create, what the endpoint gets; on update, the changes. A header set to null
 * is removed (others are kept); `oauth` or `client_certificate` null removes it; on update an
 * `oauth` without `client_secret` keeps the stored secret (an edit form never has it).
 */
export interface CredentialsInput {
  headers?: Record<string, string | null>;
  oauth?: { token_url: string; client_id: string; client_secret?: string; scope?: string | null; client_auth?: OAuthClientAuth } | null;
  client_certificate?: ClientCertificate | null;
}

export const NO_CREDENTIALS: EndpointCredentials = { headers: {}, oauth: null, client_certificate: null };

/** Most extra headers per endpoint (20). */
export const MAX_EXTRA_HEADERS = 20;

/** An RFC 9110 field name. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Names an extra header may not take: the signature's and the body's own, and those that frame the request. */
const RESERVED_HEADER =
  /^(webhook-.*|content-type|content-length|content-encoding|transfer-encoding|host|connection|keep-alive|upgrade|te|trailer|traceparent|tracestate)$/i;

function refuse(field: string, message: string): ApiError {
  return new ApiError('invalid_parameter', `credentials: ${field} ${message}.`, [{ param: field, message }]);
}

/**
 * The credentials an endpoint of `url` has after `input` is applied to `current` (its stored ones,
 * or none for a new endpoint), every part checked; throws a 400 naming the field at fault.
 * `allowPrivate` is WEBHOOK_ALLOW_PRIVATE_URLS: the token URL's host policy, as the endpoint URL's.
 */
export async function applyCredentialsInput(
  url: string,
  current: EndpointCredentials,
  input: CredentialsInput | undefined,
  allowPrivate: boolean,
): Promise<EndpointCredentials> {
  let headers = { ...current.headers };
  if (input?.headers !== undefined) {
    for (const [name, value] of Object.entries(input.headers)) {
      const field = `credentials.headers.${name}`;
      if (!TOKEN.test(name)) throw refuse(field, 'is not a valid header name');
      if (RESERVED_HEADER.test(name)) throw refuse(field, 'would override a header the delivery sets itself (webhook-*, content-type, host and the like)');
      // Names are case-insensitive: a new spelling replaces the old one.
      for (const existing of Object.keys(headers)) if (existing.toLowerCase() === name.toLowerCase()) delete headers[existing];
      if (value === null) continue;
      if (value.length === 0 || value.length > 4096 || /[\0\r\n]/.test(value)) throw refuse(field, 'must be 1 to 4096 characters without line breaks');
      headers[name] = value;
    }
    if (Object.keys(headers).length > MAX_EXTRA_HEADERS) throw refuse('credentials.headers', `may hold at most ${MAX_EXTRA_HEADERS} headers`);
    headers = Object.fromEntries(Object.entries(headers).sort(([a], [b]) => a.localeCompare(b)));
  }

  let oauth = current.oauth;
  if (input?.oauth === null) oauth = null;
  else if (input?.oauth !== undefined) {
    const given = input.oauth;
    const secret = given.client_secret ?? current.oauth?.client_secret;
    if (secret === undefined) throw refuse('credentials.oauth.client_secret', 'is required');
    oauth = {
      token_url: await checkTokenUrl(given.token_url, allowPrivate),
      client_id: given.client_id,
      client_secret: secret,
      scope: given.scope === undefined ? (current.oauth?.scope ?? null) : given.scope,
      client_auth: given.client_auth ?? current.oauth?.client_auth ?? 'basic',
    };
  }

  let clientCertificate = current.client_certificate;
  if (input?.client_certificate === null) clientCertificate = null;
  else if (input?.client_certificate !== undefined) {
    certificateSummary(input.client_certificate);
    clientCertificate = { certificate: input.client_certificate.certificate, private_key: input.client_certificate.private_key };
  }

  const broker = isBrokerUrl(url);
  if (broker && Object.keys(headers).length > 0) {
    throw refuse('credentials.headers', 'apply to HTTPS endpoints only (a broker takes its user and password in the URL)');
  }
  if (broker && oauth) throw refuse('credentials.oauth', 'applies to HTTPS endpoints only');
  if (oauth) {
    for (const name of Object.keys(headers)) {
      if (name.toLowerCase() === 'authorization') throw refuse(`credentials.headers.${name}`, 'would override the OAuth access token');
    }
  }
  if (clientCertificate && !(broker ? parseBrokerUrl(url).tls : url.toLowerCase().startsWith('https:'))) {
    throw refuse('credentials.client_certificate', 'needs a TLS endpoint: https, amqps, mqtts or nats+tls');
  }
  return { headers, oauth, client_certificate: clientCertificate };
}

/**
 * A token URL as the worker may use it: HTTPS, or plain HTTP to a loopback address where private
 * addresses are allowed (WEBHOOK_ALLOW_PRIVATE_URLS, the tests' policy); its host under the same
 * policy as endpoint URLs. Returns it normalised.
 */
export async function checkTokenUrl(url: string, allowPrivate: boolean): Promise<string> {
  const field = 'credentials.oauth.token_url';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refuse(field, 'must be an absolute https URL');
  }
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  const loopback = host === 'localhost' || (isIP(host) === 4 && host.startsWith('127.')) || host === '::1';
  if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && allowPrivate && loopback)) {
    throw refuse(field, allowPrivate ? 'must be https (or http on a loopback address)' : 'must be https');
  }
  try {
    return await validateWebhookUrl(parsed.toString(), allowPrivate);
  } catch (error) {
    throw refuse(field, (error as Error).message);
  }
}

/** The certificate's summary; throws a 400 when it does not parse, the key does not, or they do not match. */
export function certificateSummary(input: ClientCertificate): NonNullable<CredentialsSummary['client_certificate']> {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(input.certificate);
  } catch {
    throw refuse('credentials.client_certificate.certificate', 'is not a PEM X.509 certificate');
  }
  let key: ReturnType<typeof createPrivateKey>;
  try {
    key = createPrivateKey(input.private_key);
  } catch {
    throw refuse('credentials.client_certificate.private_key', 'is not an unencrypted PEM private key');
  }
  if (!certificate.checkPrivateKey(key)) throw refuse('credentials.client_certificate.private_key', 'does not match the certificate');
  return {
    subject: certificate.subject.replace(/\n/g, ', '),
    issuer: certificate.issuer.replace(/\n/g, ', '),
    not_after: new Date(certificate.validTo).toISOString(),
    fingerprint_sha256: certificate.fingerprint256,
    private_key: 'set',
  };
}

/** What the admin API shows of `credentials` (null: the endpoint has none). */
export function summarizeCredentials(credentials: EndpointCredentials): CredentialsSummary | null {
  if (!hasCredentials(credentials)) return null;
  const { oauth, client_certificate: certificate } = credentials;
  return {
    headers: Object.fromEntries(Object.keys(credentials.headers).map((name) => [name, 'set' as const])),
    oauth: oauth && { token_url: oauth.token_url, client_id: oauth.client_id, scope: oauth.scope, client_auth: oauth.client_auth, client_secret: 'set' },
    client_certificate: certificate && certificateSummary(certificate),
  };
}

export function hasCredentials(credentials: EndpointCredentials): boolean {
  return Object.keys(credentials.headers).length > 0 || credentials.oauth !== null || credentials.client_certificate !== null;
}

/** The keys of WEBHOOK_CREDENTIALS_KEY: the first seals, each opens. */
export interface CredentialKeys {
  readonly keys: readonly Buffer[];
}

/** Parses WEBHOOK_CREDENTIALS_KEY (comma-separated base64 keys of 32 bytes); undefined when unset. */
export function credentialKeys(setting: string | undefined): CredentialKeys | undefined {
  if (!setting) return undefined;
  return { keys: setting.split(',').map((k) => Buffer.from(k, 'base64')) };
}

/** Format v1: `v1:` key id (8 hex of the key's SHA-256) `:` base64 of nonce (12) ‖ ciphertext ‖ tag (16). */
const PREFIX = 'v1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

function boundData(endpointId: string): string {
  return `webhook endpoint credentials\n${endpointId}`;
}

/**
 * Seals any JSON value under the first key, bound to `context` (what it belongs to, e.g. an
 * endpoint's or a store's id with a label): sealed for one context, it does not open for another.
 * The one cipher of sealed settings (endpoint credentials here, a store's SSO client secret).
 */
export function sealValue(keys: CredentialKeys, context: string, value: unknown): string {
  const key = keys.keys[0]!;
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const sealed = Buffer.concat([nonce, cipher.update(JSON.stringify(value), 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return `${PREFIX}:${keyId(key)}:${sealed.toString('base64')}`;
}

/** Seals `credentials` for endpoint `endpointId` under the first key. */
export function sealCredentials(keys: CredentialKeys, endpointId: string, credentials: EndpointCredentials): string {
  return sealValue(keys, boundData(endpointId), credentials);
}

/** Thrown when sealed credentials cannot be opened (no key, another key, altered, or another endpoint's). */
export class SealedCredentialsError extends Error {}

/**
 * Opens a value sealed by `sealValue` for `context`; `what` names it in the SealedCredentialsError
 * thrown when it does not open (no key, another key, altered, or another context's).
 */
export function openValue<T>(keys: CredentialKeys | undefined, context: string, sealed: string, what: string): T {
  if (!keys) throw new SealedCredentialsError(`${what} is sealed but WEBHOOK_CREDENTIALS_KEY is not set`);
  const [prefix, id, body] = sealed.split(':');
  const key = keys.keys.find((k) => keyId(k) === id);
  if (prefix !== PREFIX || body === undefined) throw new SealedCredentialsError(`${what} is in an unknown format`);
  if (!key) throw new SealedCredentialsError(`${what} was sealed with a key (id ${id}) that WEBHOOK_CREDENTIALS_KEY does not hold`);
  const bytes = Buffer.from(body, 'base64');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    const text = Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    return JSON.parse(text) as T;
  } catch {
    throw new SealedCredentialsError(`${what} does not open (altered, or sealed for another owner)`);
  }
}

/** Opens credentials sealed by `sealCredentials` for `endpointId`. */
export function openCredentials(keys: CredentialKeys | undefined, endpointId: string, sealed: string): EndpointCredentials {
  if (!keys) throw new SealedCredentialsError('the endpoint has credentials but WEBHOOK_CREDENTIALS_KEY is not set');
  try {
    return openValue<EndpointCredentials>(keys, boundData(endpointId), sealed, "the endpoint's credentials");
  } catch (error) {
    if (error instanceof SealedCredentialsError && error.message.endsWith('(altered, or sealed for another owner)')) {
      throw new SealedCredentialsError("the endpoint's credentials do not open (altered, or sealed for another endpoint)");
    }
    throw error;
  }
}
