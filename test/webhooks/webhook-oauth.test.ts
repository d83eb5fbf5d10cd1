/**
 * The OAuth token cache of the worker (webhooks/webhook-oauth.ts, decision 0058) against a real
 * token server on loopback, through the worker's HTTP client, with the cache's clock moved by hand:
 * a token is reused until 30 s before its expires_in (at most half its lifetime), attempts asking
 * at once share one request, changed client credentials fetch anew, a refused token is dropped only
 * if it is still the cached one, and a token server's odd answers are errors that say what was wrong.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OAuthTokens } from '../../src/webhooks/webhook-oauth.ts';
import { WebhookHttpClient } from '../../src/webhooks/webhook-http-client.ts';
import type { OAuthClientCredentials } from '../../src/webhooks/endpoint-credentials.ts';
import { TokenServer } from './tls-kit.ts';

describe('OAuth token cache', () => {
  let server: TokenServer;
  let http: WebhookHttpClient;
  let now = 1_000_000;
  let tokens: OAuthTokens;
  let oauth: OAuthClientCredentials;

  beforeAll(async () => {
    server = await new TokenServer('cache-client', 'cache-secret').start();
    http = new WebhookHttpClient({ timeoutMs: 10_000, allowPrivate: true, connectionsPerOrigin: 4 });
    tokens = new OAuthTokens(
      (url, form, headers) => http.requestToken(url, form, headers),
      () => now,
    );
    oauth = { token_url: server.url, client_id: 'cache-client', client_secret: 'cache-secret', scope: null, client_auth: 'basic' };
  });
  afterAll(async () => {
    await http?.close();
    await server?.close();
  });

  it('reuses a token until 30 s before it expires, at most half its lifetime', async () => {
    server.expiresIn = 120;
    const first = await tokens.token('e1', oauth);
    now += 89_000;
    expect(await tokens.token('e1', oauth)).toBe(first);
    now += 1_000;
    const second = await tokens.token('e1', oauth);
    expect(second).not.toBe(first);
    expect(server.issued.slice(-2)).toEqual([first, second]);

    // A 10 s token: 5 s of margin (half), not 30.
    server.expiresIn = 10;
    const short = await tokens.token('e2', oauth);
    now += 4_999;
    expect(await tokens.token('e2', oauth)).toBe(short);
    now += 1;
    expect(await tokens.token('e2', oauth)).not.toBe(short);
  });

  it('shares one request between callers, fetches anew for changed credentials, drops only the refused token', async () => {
    server.expiresIn = 3600;
    const before = server.requests.length;
    const [a, b, c] = await Promise.all([tokens.token('e3', oauth), tokens.token('e3', oauth), tokens.token('e3', oauth)]);
    expect(new Set([a, b, c]).size).toBe(1);
    expect(server.requests.length).toBe(before + 1);

    const rescoped = await tokens.token('e3', { ...oauth, scope: 'more' });
    expect(rescoped).not.toBe(a);
    expect(server.requests.at(-1)!.form.get('scope')).toBe('more');

    // A refusal of a token no longer cached leaves the newer one in place.
    tokens.invalidate('e3', a!);
    expect(await tokens.token('e3', { ...oauth, scope: 'more' })).toBe(rescoped);
    tokens.invalidate('e3', rescoped);
    expect(await tokens.token('e3', { ...oauth, scope: 'more' })).not.toBe(rescoped);
  });

  it('says what was wrong with a token server that refuses, answers no token or another kind', async () => {
    await expect(tokens.token('e4', { ...oauth, client_secret: 'wrong' })).rejects.toThrow(
      `OAuth token request to ${server.url} failed: HTTP 401 (invalid_client)`,
    );
    const odd = createServer((req, res) => {
      const body = req.url === '/mac' ? { access_token: 'x', token_type: 'mac' } : { token_type: 'Bearer' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => odd.listen(0, '127.0.0.1', resolve));
    try {
      const base = `http://127.0.0.1:${(odd.address() as AddressInfo).port}`;
      await expect(tokens.token('e5', { ...oauth, token_url: `${base}/none` })).rejects.toThrow(
        `OAuth token server ${base}/none answered without an access_token`,
      );
      await expect(tokens.token('e6', { ...oauth, token_url: `${base}/mac` })).rejects.toThrow('answered a token_type other than Bearer');
      // Nothing listening: the connection failure, named.
      const closed = await closedPort();
      await expect(tokens.token('e7', { ...oauth, token_url: `http://127.0.0.1:${closed}/token` })).rejects.toThrow(
        /^OAuth token request to .* failed: ECONNREFUSED/,
      );
    } finally {
      await new Promise((resolve) => odd.close(resolve));
    }
  });
});

async function closedPort(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
