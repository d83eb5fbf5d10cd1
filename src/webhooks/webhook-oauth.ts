/**
 * OAuth 2.0 access tokens of endpoints with client credentials (RFC 6749 §4.4, decision 0058): the
 * worker asks the endpoint's token server for a token (`grant_type=client_credentials`, the scope
 * if set, the client authenticated by HTTP Basic or in the form body, §2.3.1) and sends it as
 * `Authorization: Bearer`. A token is kept per endpoint in the worker's memory until shortly before
 * its `expires_in` (without one, until the receiver refuses it); attempts that need a token while
 * one is being fetched share that fetch. A receiver's 401 makes the transport drop the token it
 * used (`invalidate`) and fetch a new one, once per attempt.
 *
 * A token server's failure (refusal, error, no `access_token`, not a bearer token) is an
 * OAuthTokenError whose message names the token URL and what went wrong, never the client secret nor
 * the token server's body: it is recorded with the attempt.
 */
import { createHash } from 'node:crypto';
import type { OAuthClientCredentials } from './endpoint-credentials.ts';

/** What the HTTP client answers for a token request. */
export interface TokenResponse {
  readonly statusCode: number;
  readonly body: string;
}

/** POSTs a form to the token server; throws on a connection failure or timeout (with a reason). */
export type TokenRequester = (url: string, form: string, headers: Record<string, string>) => Promise<TokenResponse>;

export class OAuthTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OAuthTokenError';
  }
}

/** How long before its expiry a token stops being used: 30 s, at most half its lifetime. */
const EXPIRY_MARGIN_MS = 30_000;
/** Endpoints whose token is kept (more: the cache starts over, tokens are fetched again). */
const TOKENS_KEPT = 10_000;

interface CachedToken {
  /** Which client credentials it was fetched with (a hash): changed ones fetch anew. */
  readonly config: string;
  readonly token: string;
  /** Epoch ms after which it is no longer used; null: until a receiver refuses it. */
  readonly usableUntil: number | null;
}

export class OAuthTokens {
  readonly #request: TokenRequester;
  readonly #now: () => number;
  readonly #tokens = new Map<string, CachedToken>();
  readonly #fetching = new Map<string, { config: string; token: Promise<CachedToken> }>();

  constructor(request: TokenRequester, now: () => number = Date.now) {
    this.#request = request;
    this.#now = now;
  }

  /** A usable access token of endpoint `endpointId` (cached, or fetched now); throws OAuthTokenError. */
  async token(endpointId: string, oauth: OAuthClientCredentials): Promise<string> {
    const config = configHash(oauth);
    const cached = this.#tokens.get(endpointId);
    if (cached && cached.config === config && (cached.usableUntil === null || cached.usableUntil > this.#now())) return cached.token;
    let fetching = this.#fetching.get(endpointId);
    if (!fetching || fetching.config !== config) {
      const token = this.#fetch(oauth, config);
      fetching = { config, token };
      this.#fetching.set(endpointId, fetching);
      const entry = fetching;
      token.then(
        (fetched) => {
          if (this.#fetching.get(endpointId) !== entry) return;
          this.#fetching.delete(endpointId);
          if (this.#tokens.size >= TOKENS_KEPT) this.#tokens.clear();
          this.#tokens.set(endpointId, fetched);
        },
        () => {
          if (this.#fetching.get(endpointId) === entry) this.#fetching.delete(endpointId);
        },
      );
    }
    return (await fetching.token).token;
  }

  /** The receiver refused `token`: it is not used again (a newer one fetched meanwhile stays). */
  invalidate(endpointId: string, token: string): void {
    if (this.#tokens.get(endpointId)?.token === token) this.#tokens.delete(endpointId);
  }

  async #fetch(oauth: OAuthClientCredentials, config: string): Promise<CachedToken> {
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (oauth.scope) form.set('scope', oauth.scope);
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
    if (oauth.client_auth === 'body') {
      form.set('client_id', oauth.client_id);
      form.set('client_secret', oauth.client_secret);
    } else {
      // RFC 6749 §2.3.1: each part form-encoded before the Basic scheme's base64.
      const basic = `${formEncode(oauth.client_id)}:${formEncode(oauth.client_secret)}`;
      headers.authorization = `Basic ${Buffer.from(basic, 'utf8').toString('base64')}`;
    }
    const where = tokenUrlShown(oauth.token_url);
    const requestedAt = this.#now();
    let response: TokenResponse;
    try {
      response = await this.#request(oauth.token_url, form.toString(), headers);
    } catch (error) {
      throw new OAuthTokenError(scrub(`OAuth token request to ${where} failed: ${(error as Error).message}`, oauth));
    }
    let answer: { access_token?: unknown; token_type?: unknown; expires_in?: unknown; error?: unknown } = {};
    try {
      answer = JSON.parse(response.body) as typeof answer;
    } catch {
      // Not JSON: said below by status or the missing token.
    }
    if (response.statusCode < 200 || response.statusCode >= 300) {
      const code = typeof answer.error === 'string' && /^[\x20-\x7e]{1,100}$/.test(answer.error) ? ` (${answer.error})` : '';
      throw new OAuthTokenError(scrub(`OAuth token request to ${where} failed: HTTP ${response.statusCode}${code}`, oauth));
    }
    if (typeof answer.access_token !== 'string' || answer.access_token.length === 0) {
      throw new OAuthTokenError(`OAuth token server ${where} answered without an access_token`);
    }
    if (typeof answer.token_type !== 'string' || answer.token_type.toLowerCase() !== 'bearer') {
      throw new OAuthTokenError(`OAuth token server ${where} answered a token_type other than Bearer`);
    }
    const expiresIn = Number(answer.expires_in);
    const lifetimeMs = Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn * 1000 : null;
    return {
      config,
      token: answer.access_token,
      usableUntil: lifetimeMs === null ? null : requestedAt + lifetimeMs - Math.min(EXPIRY_MARGIN_MS, lifetimeMs / 2),
    };
  }
}

function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

function configHash(oauth: OAuthClientCredentials): string {
  return createHash('sha256')
    .update(JSON.stringify([oauth.token_url, oauth.client_id, oauth.client_secret, oauth.scope, oauth.client_auth]))
    .digest('hex');
}

/** The token URL as a failure names it: origin and path (a query could hold anything). */
function tokenUrlShown(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

function scrub(text: string, oauth: OAuthClientCredentials): string {
  let safe = text;
  for (const secret of new Set([oauth.client_secret, formEncode(oauth.client_secret)])) safe = safe.split(secret).join('****');
  return safe;
}
