/**
 * What a request log line may say about the request without leaking a credential: the URL with
 * secret-looking query values and path segments replaced, and the request id only when it cannot be
 * a secret. Callers put tokens where they should not (`?access_token=` in a browser bookmark, a
 * token pasted into X-Request-Id); the log must not keep them.
 */

/** Replacement text of a redacted value. */
export const REDACTED = '[redacted]';

/**
 * Query parameters whose value is a credential, whatever it looks like (lower case; `-` and `_`
 * ignored when comparing, so `api-key`, `apiKey` and `API_KEY` all match).
 */
export const SECRET_QUERY_PARAMS = [
  'token',
  'accesstoken',
  'refreshtoken',
  'idtoken',
  'apikey',
  'key',
  'secret',
  'clientsecret',
  'password',
  'passwd',
  'pwd',
  'auth',
  'authorization',
  'bearer',
  'session',
  'sessionid',
  'signature',
  'sig',
  'code',
  'csrf',
  'csrftoken',
  'xcsrftoken',
  'jwt',
  'credential',
  'credentials',
];

/**
 * Values that are credentials wherever they appear: our API tokens (`sia_`), webhook secrets
 * (`whsec_`), JWTs, other services' well-known token prefixes, and the password of a broker URL
 * (`amqp://user:<password>@…`, mqtt, nats: an endpoint URL's credentials, decision 0031).
 */
const SECRET_VALUE =
  /(?:sia_|whsec_|sk_live_|sk_test_|rk_live_|ghp_|gho_|github_pat_|xox[abpr]-|AKIA)[A-Za-z0-9_\-+/=.%]*|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)?|(?<=(?:amqps?|mqtts?|nats(?:\+tls)?):\/\/[^\s/:@]*:)[^\s/@]+(?=@)/g;

/**
 * A long run (32+) of letters and digits with several upper-case and several lower-case letters:
 * how random secrets look (base64 of random bytes), and how request ids and cursors (UUIDs, hex
 * trace ids, ULIDs, timestamps with a `Z`, words) do not. A digit is asked for only of a run with
 * few letters of either case: one random 43-character token body in ~1,500 holds no digit (a CI
 * run logged such a body), and with 8 of each case a run is random text, not an identifier.
 */
const LONG_RUN = /[A-Za-z0-9_+/=-]{32,}/g;
function looksRandom(value: string): boolean {
  for (const [run] of value.matchAll(LONG_RUN)) {
    const upper = run.replace(/[^A-Z]/g, '').length,
      lower = run.replace(/[^a-z]/g, '').length;
    if (upper >= 4 && lower >= 4 && /[0-9]/.test(run)) return true;
    if (upper >= 8 && lower >= 8) return true;
  }
  return false;
}

const normaliseName = (name: string) => name.toLowerCase().replace(/[-_]/g, '');

/** `value` with every credential-looking part replaced by [redacted]. */
export function redactSecrets(value: string): string {
  return value.replace(SECRET_VALUE, REDACTED);
}

/**
 * The request target as it may be logged: values of credential query parameters and any
 * credential-looking text (path segments included) replaced; the rest as the client sent it.
 */
export function redactUrl(url: string): string {
  const at = url.indexOf('?');
  const path = at === -1 ? url : url.slice(0, at);
  const query = at === -1 ? undefined : url.slice(at + 1);
  const safePath = path
    .split('/')
    .map((segment) => (isSecretShaped(segment) ? REDACTED : segment))
    .join('/');
  if (query === undefined) return safePath;
  const safeQuery = query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      // A credential can be sent as a bare name (`?<token>`, `?<token>=1`), with its prefix
      // percent-encoded (`?%73ia_…`): names are judged decoded, like values.
      const safeName = isSecretShaped(name) ? REDACTED : name;
      if (eq === -1) return safeName;
      const value = pair.slice(eq + 1);
      if (SECRET_QUERY_PARAMS.includes(normaliseName(safeDecode(name)))) return `${safeName}=${REDACTED}`;
      return `${safeName}=${isSecretShaped(value) ? REDACTED : value}`;
    })
    .join('&');
  return `${safePath}?${safeQuery}`;
}

/**
 * True when `text` (raw or percent-decoded) holds a credential by its shape: a known token prefix,
 * a JWT, or a long random-looking run. Judged on the decoded text too, so `%73ia_…` is `sia_…`.
 */
export function isSecretShaped(text: string): boolean {
  const decoded = safeDecode(text);
  for (const candidate of decoded === text ? [text] : [text, decoded]) {
    if (redactSecrets(candidate) !== candidate || looksRandom(candidate)) return true;
  }
  return false;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/** True when a caller-supplied request id may be kept: not a credential, not random-looking. */
export function isSafeRequestId(value: string): boolean {
  return redactSecrets(value) === value && !looksRandom(value);
}

interface LoggableRequest {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * Pino serializer of `req` on request log lines (replaces Fastify's): method, redacted URL, host,
 * client address and port. No headers, no body.
 */
export function requestLogSerializer(req: LoggableRequest) {
  return {
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
    // A token pasted as Host (or a Host made of one without its prefix) is not logged either.
    host: typeof req.host === 'string' && isSecretShaped(req.host) ? REDACTED : req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}
