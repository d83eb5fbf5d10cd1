/**
 * RFC 8288 `Link: <…>; rel="next"` on list and export pages that have more. The target is the
 * request's own path and query with `cursor` replaced by the page's next_cursor (other parameters kept
 * as the client sent them, in their order). Root-relative by default, which resolves correctly behind
 * any proxy; absolute on PUBLIC_URL when that is configured. Never built from the request's Host or
 * from an absolute-form request target (`GET http://evil.example/api/v1/… HTTP/1.1`): only the
 * path and query of the target are kept, so a client cannot make us hand out links to its host.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

/** The URL of the page after this one. */
export function nextPageUrl(request: FastifyRequest, nextCursor: string): string {
  // Parsed against a fixed origin, so an absolute-form or `//host` target yields only its path.
  let target: URL;
  try {
    target = new URL(request.url, 'http://origin.invalid');
  } catch {
    // An unparsable absolute-form target that still matched a route: the route's own (static) path.
    target = new URL(request.routeOptions.url ?? '/', 'http://origin.invalid');
  }
  const path = `/${target.pathname.replace(/^\/+/, '')}`;
  const params = new URLSearchParams(target.search);
  params.set('cursor', nextCursor);
  const base = request.server.ctx.config.PUBLIC_URL?.replace(/\/$/, '') ?? '';
  return `${base}${path}?${params.toString()}`;
}

/** Sets the `Link: rel="next"` header when the page has more. */
export function setNextLink(request: FastifyRequest, reply: FastifyReply, nextCursor: string | null, hasMore: boolean): void {
  if (!hasMore || nextCursor === null) return;
  reply.header('Link', `<${nextPageUrl(request, nextCursor)}>; rel="next"`);
}
