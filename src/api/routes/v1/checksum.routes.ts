/**
 * GET /api/v1/{path}/checksums and /checksums/records: a resource's records summed up by id range,
 * and one range's records one by one, each checksum computed by the database
 * (resources/record-checksums.repository.ts, decision 0038). A sync tool compares them with its
 * mirror and reads records only where a range differs: a whole store is checked in one request per
 * resource, never by paging through the exports. Scoped like the resource's list, with the list's
 * filters; each request counts against the export rate limit, as a snapshot does, since one may
 * hash every record of the resource.
 */
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RANGE_PREFIX_PATTERN, rangeChecksums, recordChecksums } from '../../../records/record-checksums.repository.ts';
import { requireUuid } from '../../../records/filters.ts';
import { Pagination } from '../../schemas.ts';
import { errorResponses, pascalCase, type ResourceDefinition } from './resource-routes.ts';

/** Most records of one /checksums/records answer (default and maximum). */
export const RECORD_CHECKSUMS_DEFAULT = 5000;
export const RECORD_CHECKSUMS_MAX = 20_000;

const prefixParam = Type.String({
  pattern: RANGE_PREFIX_PATTERN,
  maxLength: 36,
  default: '',
  description: 'The range: records whose id (lowercase UUID text, dashes where a UUID has them) starts with this; empty for every record',
});

const RangeChecksum = Type.Object(
  {
    range: Type.String({ description: 'The id prefix the range covers' }),
    count: Type.Integer({ minimum: 1, description: 'Records in the range' }),
    checksum: Type.String({
      pattern: '^-?[0-9]+$',
      description: "The exact sum (a decimal integer) of its records' checksums: equal sums and counts mean equal records",
    }),
  },
  { title: 'RangeChecksum', additionalProperties: false },
);

const RecordChecksum = Type.Object(
  {
    id: Type.String({ format: 'uuid', description: "The record's key (product_id for inventory)" }),
    last_modified: Type.String({ format: 'date-time' }),
    checksum: Type.String({
      pattern: '^-?[0-9]+$',
      description: "jsonb_hash_extended(record::jsonb, 0) of PostgreSQL: a 64-bit hash of the record's fields and values (not of its formatting)",
    }),
  },
  { title: 'RecordChecksum', additionalProperties: false },
);

type ChecksumQuery = Record<string, unknown> & { prefix: string; digits: number };
type RecordChecksumQuery = Record<string, unknown> & { prefix: string; after?: string; limit: number };

/** Registers the checksum routes of one resource. */
export function registerChecksums(app: FastifyInstance, def: ResourceDefinition): void {
  const config =
    typeof def.scope === 'string' ? { scope: def.scope, rateLimitClass: 'export' as const } : { anyScope: def.scope, rateLimitClass: 'export' as const };
  const security = (typeof def.scope === 'string' ? [def.scope] : def.scope).map((scope) => ({ bearerAuth: [scope] }));

  app.get(`/${def.path}/checksums`, {
    config,
    schema: {
      tags: [def.tag],
      operationId: `checksum${pascalCase(def.path)}`,
      summary: `Checksums of the ${def.noun} records by id range (to verify a mirror)`,
      description: [
        `Groups the ${def.noun} records whose id starts with \`prefix\` by the next \`digits\` hex digits of their id and answers, per non-empty range, its record count and checksum (filters as in the list).`,
        "A record's checksum is PostgreSQL's `jsonb_hash_extended(record::jsonb, 0)`, so a mirror that keeps records as jsonb computes the same numbers itself; a range's checksum is their exact sum.",
        'Compare, then ask /checksums/records only for the ranges that differ. Counts once against the export rate limit (it may read every record, as a snapshot does).',
      ].join(' '),
      security,
      querystring: Type.Object(
        {
          prefix: Type.Optional(prefixParam),
          digits: Type.Optional(
            Type.Integer({ minimum: 1, maximum: 3, default: 2, description: 'Hex digits past the prefix each range adds (1–3, default 2: 256 ranges)' }),
          ),
          ...def.filters,
        },
        { additionalProperties: false },
      ),
      response: { 200: Type.Object({ data: Type.Array(RangeChecksum) }, { additionalProperties: false }), ...errorResponses },
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const query = request.query as ChecksumQuery;
      const filters = await def.conditions(query, request);
      const data = await rangeChecksums(app.ctx.database.db, def.source, filters, query.prefix, query.digits);
      return reply.send({ data });
    },
  });

  app.get(`/${def.path}/checksums/records`, {
    config,
    schema: {
      tags: [def.tag],
      operationId: `recordChecksums${pascalCase(def.path)}`,
      summary: `Each ${def.noun} record's checksum in an id range, by id`,
      description: `The ${def.noun} records whose id starts with \`prefix\`, in id order after \`after\`: id, last_modified and checksum (as in /checksums). Page with \`after\` = pagination.next_cursor. Each request counts against the export rate limit.`,
      security,
      querystring: Type.Object(
        {
          prefix: Type.Optional(prefixParam),
          after: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Only records with a greater id: the previous answer’s next_cursor' })),
          limit: Type.Optional(
            Type.Integer({
              minimum: 1,
              maximum: RECORD_CHECKSUMS_MAX,
              default: RECORD_CHECKSUMS_DEFAULT,
              description: `Records per answer, 1–${RECORD_CHECKSUMS_MAX}, default ${RECORD_CHECKSUMS_DEFAULT}`,
            }),
          ),
          ...def.filters,
        },
        { additionalProperties: false },
      ),
      response: { 200: Type.Object({ data: Type.Array(RecordChecksum), pagination: Pagination }, { additionalProperties: false }), ...errorResponses },
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const query = request.query as RecordChecksumQuery;
      const after = query.after === undefined ? undefined : requireUuid(query.after, 'after');
      const filters = await def.conditions(query, request);
      const { data, hasMore } = await recordChecksums(app.ctx.database.db, def.source, filters, query.prefix, after, query.limit);
      const last = data[data.length - 1];
      return reply.send({ data, pagination: { next_cursor: last ? last.id : (query.after ?? null), has_more: hasMore, limit: query.limit } });
    },
  });
}
