/**
 * The platform credential (PLATFORM_API_TOKEN, decision 0051): recognised by the platform API,
 * which it opens, and by the store API, which refuses it by name.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Whether `request` presents the platform credential (compared in constant time). */
export function presentsPlatformCredential(request: FastifyRequest): boolean {
  const credential = request.server.ctx.config.PLATFORM_API_TOKEN;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  return credential !== undefined && match !== null && timingSafeEqual(digest(match[1]!), digest(credential));
}
