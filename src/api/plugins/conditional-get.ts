/**
 * Conditional GET for routes whose config has `etag: true` (the single-resource GETs): a strong ETag
 * from a SHA-256 of the JSON body, and `If-None-Match` → 304 with no body. The body is built before
 * the ETag (it is the record's current JSON), so the saving is bandwidth, not database work; records
 * are small. Runs in onSend before compression (registered first), so the tag names the identity
 * representation and a 304 is never compressed.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Send a strong ETag and answer If-None-Match with 304. */
    etag?: boolean;
  }
}

/** Strong entity tag of `body`. */
export function entityTag(body: string | Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
}

/** True when the If-None-Match header value matches `etag` (weak comparison, RFC 9110 §13.1.2). */
export function ifNoneMatchMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  return header.split(',').some((candidate) => candidate.trim().replace(/^W\//, '') === opaque);
}

export const conditionalGetPlugin = fp(
  async function conditionalGet(app: FastifyInstance) {
    app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      if (!request.routeOptions.config?.etag) return payload;
      if (request.method !== 'GET' && request.method !== 'HEAD') return payload;
      if (reply.statusCode !== 200 || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) return payload;
      const etag = entityTag(payload);
      reply.header('ETag', etag);
      if (ifNoneMatchMatches(request.headers['if-none-match'], etag)) {
        reply.code(304);
        reply.removeHeader('content-length');
        return '';
      }
      return payload;
    });
  },
  { name: 'conditional-get' },
);
