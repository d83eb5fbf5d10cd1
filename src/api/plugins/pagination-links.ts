/**
 * RFC 8288 `Link: <…>; rel="next"` on list and export pages that have more. The target is the
 * request's own path and query with `cursor` replaced by the page's next_cursor (other parameters kept
 * as the client sent them, in their order). Root-relative by default, which resolves correctly behind
 * any proxy; absolute on PUBLIC_URL when that is configured.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

/** The URL of the page after this one. */
export function nextPageUrl(request: FastifyRequest, nextCursor: string): string {
  const [path, search = ''] = request.url.split('?', 2) as [string, string?];
  const params = new URLSearchParams(search);
  params.set('cursor', nextCursor);
  const base = request.server.ctx.config.PUBLIC_URL?.replace(/\/$/, '') ?? '';
  return `${base}${path}?${params.toString()}`;
}

/** Sets the `Link: rel="next"` header when the page has more. */
export function setNextLink(request: FastifyRequest, reply: FastifyReply, nextCursor: string | null, hasMore: boolean): void {
  if (!hasMore || !nextCursor) return;
  reply.header('Link', `<${nextPageUrl(request, nextCursor)}>; rel="next"`);
}
