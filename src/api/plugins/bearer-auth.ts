/**
 * Bearer-token authentication for the read API and the admin API.
 * Missing or malformed header: 401 with `WWW-Authenticate: Bearer`. Unknown, revoked or expired
 * token: 401. Valid token without the route's scope (route config `scope`): 403.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { looksLikeToken, type AuthenticatedToken, type Scope } from '../../tokens/token.service.ts';
import { authenticateCached } from '../../tokens/token-cache.ts';
import { ApiError } from '../../shared/problem.ts';
import { setScope } from '../../db/store-scope.ts';
import { presentsPlatformCredential } from '../../stores/platform-credential.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The token that authenticated this request (set by bearer-auth). */
    token?: AuthenticatedToken;
  }
  interface FastifyContextConfig {
    /** Scope a token needs for this route. */
    scope?: Scope;
    /** Scopes of which a token needs at least one (the route narrows what each one sees). */
    anyScope?: readonly Scope[];
    /** A route under /api/v1 that needs no credential (the OpenAPI document); the authorization matrix test holds it to that. */
    public?: boolean;
    /** Which rate-limit budget the route counts against. */
    rateLimitClass?: 'standard' | 'export';
  }
}

const challenge = (error?: string) => ({
  'WWW-Authenticate': error ? `Bearer realm="store-api", error="${error}"` : 'Bearer realm="store-api"',
});

/** Parses `Authorization: Bearer <token>`; throws the 401 of a missing or malformed header. */
export function bearerTokenOf(request: FastifyRequest): string {
  const header = request.headers.authorization;
  if (!header) {
    throw new ApiError('unauthorized', 'Missing Authorization header. Send "Authorization: Bearer <API token>".', undefined, challenge());
  }
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!match || !looksLikeToken(match[1]!)) {
    throw new ApiError('unauthorized', 'Malformed Authorization header. Expected "Bearer sia_…".', undefined, challenge('invalid_request'));
  }
  return match[1]!;
}

/** Authenticates the request's bearer token and checks `scope`; sets request.token. */
export async function requireToken(
  db: Kysely<Database>,
  request: FastifyRequest,
  scope: Scope | undefined,
  anyScope?: readonly Scope[],
): Promise<AuthenticatedToken> {
  if (presentsPlatformCredential(request)) {
    throw new ApiError(
      'unauthorized',
      "This is the platform credential: it creates and manages stores and reads no store's data. Send one of the store's API keys.",
      undefined,
      challenge('invalid_token'),
    );
  }
  const presented = bearerTokenOf(request);
  const result = await authenticateCached(db, presented);
  if (typeof result === 'string') {
    const detail = { unknown: 'The API token is not valid.', revoked: 'The API token has been revoked.', expired: 'The API token has expired.' }[result];
    throw new ApiError('unauthorized', detail, undefined, challenge('invalid_token'));
  }
  if (result.storeStatus !== 'active') {
    throw new ApiError(
      'store_suspended',
      result.storeStatus === 'suspended'
        ? "The store of this API token is suspended by the platform's operator; its API answers again once it is resumed."
        : 'The store of this API token is being deleted.',
    );
  }
  request.token = result;
  // Every statement of this request from here on sees and writes this store's rows only.
  setScope({ kind: 'store', storeId: result.storeId });
  if (scope && !result.scopes.includes(scope)) {
    throw new ApiError('forbidden', `The API token lacks the scope '${scope}' this endpoint needs.`, undefined, challenge('insufficient_scope'));
  }
  if (anyScope && !anyScope.some((s) => result.scopes.includes(s))) {
    throw new ApiError(
      'forbidden',
      `The API token needs at least one of the scopes ${anyScope.map((s) => `'${s}'`).join(', ')} for this endpoint.`,
      undefined,
      challenge('insufficient_scope'),
    );
  }
  return result;
}

/**
 * onRequest hook for the scope it is registered in (fastify-plugin: the caller's scope): every route
 * there needs a token. `request.token` is decorated once by the app factory.
 */
export const bearerAuthPlugin = fp<{ db: Kysely<Database> }>(async function bearerAuth(app: FastifyInstance, { db }) {
  app.addHook('onRequest', async (request: FastifyRequest, _reply: FastifyReply) => {
    const { scope, anyScope } = request.routeOptions.config;
    await requireToken(db, request, scope, anyScope);
  });
});
