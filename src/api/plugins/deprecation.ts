/**
 * Deprecation of /api/v1 routes (docs/api-versioning.md, docs/decisions/0009). A route whose config
 * has `deprecated` answers every response with
 *   - `Deprecation: @<unix seconds>` (RFC 9745): since when it is deprecated;
 *   - `Sunset: <HTTP-date>` (RFC 8594): from when it may answer 410 Gone, when a date is set;
 *   - `Link: <…>; rel="deprecation"` to the policy and `<…>; rel="successor-version"` when there is
 *     a replacement, appended to any Link header the route set (pagination's rel="next");
 * and its OpenAPI operation is marked `deprecated: true`. Nothing is deprecated yet: the mechanism
 * is here so that the first deprecation is one line of route config.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

export interface RouteDeprecation {
  /** ISO 8601 date-time from which the route is deprecated. */
  since: string;
  /** ISO 8601 date-time from which the route may be removed (at least 6 months after `since`). */
  sunset?: string;
  /** Path or URL of the replacement. */
  successor?: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route is deprecated: Deprecation/Sunset/Link headers on every response. */
    deprecated?: RouteDeprecation;
  }
}

/** The API reference, where deprecated operations are marked (the policy itself: docs/api-versioning.md). */
export const DEPRECATION_POLICY_PATH = '/docs';

/** The minimum notice between a deprecation and its sunset (docs/api-versioning.md). */
export const MINIMUM_SUNSET_NOTICE_MS = 183 * 24 * 3_600_000;

/** The header values announcing `deprecation`; throws on a malformed or too-short schedule. */
export function deprecationHeaders(deprecation: RouteDeprecation): { deprecation: string; sunset?: string; links: string[] } {
  const since = Date.parse(deprecation.since);
  if (Number.isNaN(since)) throw new Error(`deprecation: "since" is not a date: ${deprecation.since}`);
  const links = [`<${DEPRECATION_POLICY_PATH}>; rel="deprecation"; type="text/html"`];
  if (deprecation.successor) links.push(`<${deprecation.successor}>; rel="successor-version"`);
  const headers: { deprecation: string; sunset?: string; links: string[] } = { deprecation: `@${Math.floor(since / 1000)}`, links };
  if (deprecation.sunset !== undefined) {
    const sunset = Date.parse(deprecation.sunset);
    if (Number.isNaN(sunset)) throw new Error(`deprecation: "sunset" is not a date: ${deprecation.sunset}`);
    if (sunset - since < MINIMUM_SUNSET_NOTICE_MS)
      throw new Error(`deprecation: the sunset ${deprecation.sunset} is less than 6 months after ${deprecation.since}`);
    headers.sunset = new Date(sunset).toUTCString();
  }
  return headers;
}

export const deprecationPlugin = fp(
  async function deprecation(app: FastifyInstance) {
    // Checked when the route is added, so a malformed schedule stops the start, not a request.
    app.addHook('onRoute', (route) => {
      const deprecated = route.config?.deprecated;
      if (!deprecated) return;
      deprecationHeaders(deprecated);
      route.schema = { ...route.schema, deprecated: true } as typeof route.schema;
    });
    app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      const deprecated = request.routeOptions.config?.deprecated;
      if (!deprecated) return payload;
      const headers = deprecationHeaders(deprecated);
      reply.header('Deprecation', headers.deprecation);
      if (headers.sunset) reply.header('Sunset', headers.sunset);
      const existing = reply.getHeader('link');
      const links = [...(existing === undefined ? [] : Array.isArray(existing) ? existing.map(String) : [String(existing)]), ...headers.links];
      reply.header('Link', links.join(', '));
      return payload;
    });
  },
  { name: 'api-deprecation' },
);
