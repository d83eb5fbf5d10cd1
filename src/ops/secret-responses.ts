/**
 * Responses that carry a secret are never stored by a cache: an API token
 * (`POST /tokens`, `POST /tokens/:id/roll`), a webhook signing secret (`POST /webhooks/endpoints`,
 * `GET …/secret`, `POST …/rotate-secret`) get `Cache-Control: no-store`.
 *
 * Only the routes that can return a secret pay for the check (decision 0037): such a
 * route says `config: { returnsSecret: true }`, and its serialised body is scanned for the shape of
 * a whole `sia_` token or `whsec_` secret. Every other body (a list page of ~200 KiB, an export)
 * passes untouched: scanning each one was decoding and searching every byte the read API sends.
 * A route cannot forget the flag: one whose response schema has a string field named `token` or
 * `secret` is refused at start-up without it (the route table is checked as it is built).
 * Token prefixes shown in lists (`sia_` + 8 characters) are not secrets and do not match.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's answer can hold a secret (an API token, a signing secret): scanned, and `no-store` when it does. */
    returnsSecret?: boolean;
  }
}

/** A whole API token (`sia_` + 43 base64url characters) or a webhook signing secret. */
export const SECRET_IN_BODY = /sia_[A-Za-z0-9_-]{40,}|whsec_[A-Za-z0-9+/=_-]{20,}/;

/** Field names that hold a secret in an answer's schema. */
const SECRET_FIELDS = new Set(['token', 'secret']);

/** Whether a JSON schema (of a response) has, at any depth, a string property named like a secret. */
export function schemaHoldsSecret(schema: unknown, seen = new Set<unknown>()): boolean {
  if (schema === null || typeof schema !== 'object' || seen.has(schema)) return false;
  seen.add(schema);
  const node = schema as Record<string, unknown>;
  const properties = node.properties as Record<string, { type?: unknown }> | undefined;
  if (properties && typeof properties === 'object') {
    for (const [name, property] of Object.entries(properties)) {
      if (SECRET_FIELDS.has(name) && property && (property.type === 'string' || (Array.isArray(property.type) && property.type.includes('string'))))
        return true;
    }
  }
  return Object.values(node).some((child) => schemaHoldsSecret(child, seen));
}

export const secretResponsesPlugin = fp(
  async function secretResponses(app: FastifyInstance) {
    app.addHook('onRoute', (route: RouteOptions) => {
      const flagged = (route.config as { returnsSecret?: boolean } | undefined)?.returnsSecret === true;
      const response = (route.schema as { response?: unknown } | undefined)?.response;
      if (!flagged && schemaHoldsSecret(response)) {
        throw new Error(
          `${String(route.method)} ${route.url}: its response schema has a secret field (token/secret) but the route lacks config.returnsSecret (decision 0037)`,
        );
      }
    });
    // Registered before compression and ETags, so the body is still the serialised text here.
    app.addHook('onSend', async (request, reply, payload) => {
      if (request.routeOptions.config.returnsSecret !== true) return payload;
      const text = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('latin1') : undefined;
      if (text !== undefined && SECRET_IN_BODY.test(text)) reply.header('Cache-Control', 'no-store');
      return payload;
    });
  },
  { name: 'store-api-secret-responses' },
);
