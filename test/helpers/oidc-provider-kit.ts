/**
 * A real OpenID provider for tests: `oidc-provider` in-process on a loopback port, with clients and
 * people (their claims) chosen by the test. Its login needs no form: the person signs in as
 * whoever `signInAs` named last, and consent is given (a first-party client), so a browser or
 * `followToCallback` goes straight from the authorization URL to the client's redirect URI.
 * `tamper` rewrites the next ID tokens the token endpoint answers (another audience, issuer, an
 * expiry in the past, no signature), re-signed with the provider's own key unless told not to:
 * what a forged or mismatched answer looks like to the client.
 */
import { createServer, type Server } from 'node:http';
import { createSign, generateKeyPairSync, type JsonWebKey } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

export interface OidcClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

/**
 * Rewrites an ID token's header and claims; `unsigned` sends it with alg none and no signature,
 * `foreignKey` signs it with a key that is not the provider's (a forgery under its key id).
 */
export type IdTokenTamper = (token: { header: Record<string, unknown>; payload: Record<string, unknown> }) => {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  unsigned?: boolean;
  foreignKey?: boolean;
};

export interface OidcProviderKit {
  issuer: string;
  /** People by their subject: the claims the provider gives (email, email_verified, groups, …). */
  people: Map<string, Record<string, unknown>>;
  /** The subject the next sign-in at the provider is. */
  signInAs(subject: string): void;
  /** Set to rewrite the ID tokens of the token endpoint's answers; undefined: as issued. */
  tamper: IdTokenTamper | undefined;
  /**
   * Follows the provider's redirects from an authorization URL (its own cookies kept) until it
   * sends the browser elsewhere: that URL (the client's redirect URI with code and state).
   */
  followToCallback(authorizationUrl: string): Promise<URL>;
  close(): Promise<void>;
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export async function startOidcProvider(options: { clients: OidcClient[]; claimNames?: string[] }): Promise<OidcProviderKit> {
  const server: Server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const forger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const jwk = { ...(privateKey.export({ format: 'jwk' }) as JsonWebKey), kid: 'test-key', alg: 'RS256', use: 'sig' };
  const people = new Map<string, Record<string, unknown>>();
  let subject = '';
  const provider = new Provider(issuer, {
    clients: options.clients.map((c) => ({ ...c, grant_types: ['authorization_code'], response_types: ['code'] })),
    jwks: { keys: [jwk as never] },
    cookies: { keys: ['oidc-provider-kit-cookie-key'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', ...(options.claimNames ?? ['groups', 'role'])] },
    // Claims of the scopes asked for go into the ID token, as most providers' do.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx, sub) {
      const claims = people.get(sub);
      if (!claims) return undefined;
      return { accountId: sub, claims: async () => ({ sub, ...claims }) };
    },
    async loadExistingGrant(ctx) {
      const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session!.grantIdFor(ctx.oidc.client!.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId });
      grant.addOIDCScope('openid email profile');
      await grant.save();
      return grant;
    },
  });
  const handle = provider.callback();
  const kit: OidcProviderKit = {
    issuer,
    people,
    tamper: undefined,
    signInAs(sub) {
      subject = sub;
    },
    async followToCallback(authorizationUrl) {
      let url = new URL(authorizationUrl);
      const jar = new Map<string, string>();
      for (let hop = 0; hop < 10; hop++) {
        if (url.origin !== issuer) return url;
        const res = await fetch(url, { redirect: 'manual', headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
        for (const line of res.headers.getSetCookie()) {
          const [pair] = line.split(';');
          const eq = pair!.indexOf('=');
          jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
        }
        const location = res.headers.get('location');
        if (!location) throw new Error(`the provider answered ${res.status} without a redirect: ${await res.text()}`);
        url = new URL(location, url);
      }
      throw new Error('too many redirects at the provider');
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
  server.on('request', (req, res) => {
    void (async () => {
      if (req.url?.startsWith('/interaction/')) {
        await provider.interactionFinished(req, res, { login: { accountId: subject } }, { mergeWithLastSubmission: false });
        return;
      }
      const tamper = kit.tamper;
      if (tamper && req.method === 'POST' && req.url?.startsWith('/token')) {
        // The token endpoint's answer, rewritten before it leaves (its headers are not sent yet).
        const chunks: Buffer[] = [];
        const end = res.end.bind(res);
        res.write = ((chunk: Buffer | string) => {
          chunks.push(Buffer.from(chunk));
          return true;
        }) as typeof res.write;
        res.end = ((chunk?: Buffer | string) => {
          if (chunk) chunks.push(Buffer.from(chunk));
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
          if (typeof body.id_token === 'string') body.id_token = rewrite(body.id_token, tamper);
          const text = JSON.stringify(body);
          res.setHeader('content-length', Buffer.byteLength(text));
          return end(text);
        }) as typeof res.end;
      }
      handle(req, res);
    })().catch((error: unknown) => {
      res.statusCode = 500;
      res.end(String(error));
    });
  });

  function rewrite(idToken: string, tamper: IdTokenTamper): string {
    const [h, p] = idToken.split('.');
    const out = tamper({ header: JSON.parse(Buffer.from(h!, 'base64url').toString()), payload: JSON.parse(Buffer.from(p!, 'base64url').toString()) });
    if (out.unsigned) return `${b64url({ ...out.header, alg: 'none' })}.${b64url(out.payload)}.`;
    const input = `${b64url(out.header)}.${b64url(out.payload)}`;
    return `${input}.${createSign('RSA-SHA256')
      .update(input)
      .sign(out.foreignKey ? forger : privateKey)
      .toString('base64url')}`;
  }
  return kit;
}
