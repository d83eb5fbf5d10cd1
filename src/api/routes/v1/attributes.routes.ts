/**
 * GET /api/v1/attributes: every distinct attribute key of the variants with its distinct values and
 * how many variants carry each (the spec's external mapping: one attribute per key, one attribute
 * value per value), so an ERP builds its attribute tables without reading every product. Paged by
 * key, bytewise: `next_cursor` is the last key of the page (decision 0033).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { attributePage } from '../../../catalog/attribute.repository.ts';
import { Attribute, attributeQuery, listOf } from '../../schemas.ts';
import { setNextLink } from '../../plugins/pagination-links.ts';
import { errorResponses } from './resource-routes.ts';

type AttributeQuery = { limit: number; cursor?: string; include_inactive?: boolean };

/** Registers GET /attributes (products:read). */
export function registerAttributes(app: FastifyInstance): void {
  app.get('/attributes', {
    config: { scope: 'products:read', rateLimitClass: 'standard' },
    schema: {
      tags: ['Products'],
      operationId: 'listAttributes',
      summary: 'Every distinct variant attribute key with its distinct values and variant counts',
      description:
        'Computed from the variants the products list shows (active variants of active products; include_inactive=true counts every product). Ordered by key, bytewise; pass `next_cursor` back as `cursor` for the next page.',
      security: [{ bearerAuth: ['products:read'] }],
      querystring: attributeQuery,
      response: { 200: listOf(Attribute), ...errorResponses },
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const query = request.query as AttributeQuery;
      const { data, hasMore } = await attributePage(app.ctx.database.db, {
        after: query.cursor,
        limit: query.limit,
        includeInactive: query.include_inactive === true,
      });
      const next = data.length > 0 ? data[data.length - 1]!.key : (query.cursor ?? null);
      setNextLink(request, reply, next, hasMore);
      return reply.send({ data, pagination: { next_cursor: next, has_more: hasMore, limit: query.limit } });
    },
  });
}
