/**
 * Response compression (br or gzip, as the client's Accept-Encoding prefers) for JSON, problem+json,
 * NDJSON and text above 1 KiB. Streamed bodies (NDJSON exports) are piped through the compressor
 * chunk by chunk, so an export still streams. Brotli runs at quality 4: near gzip's speed with a
 * better ratio; the default 11 costs far more CPU than an API response is worth.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import compress from '@fastify/compress';
import { constants } from 'node:zlib';

/** Content types worth compressing (mime-db does not know application/x-ndjson). */
export const COMPRESSIBLE_TYPES = /^(?:application\/(?:[\w.-]+\+)?json|application\/x-ndjson|text\/(?!event-stream))(?:;|$)/;

export const compressionPlugin = fp(
  async function compression(app: FastifyInstance) {
    await app.register(compress, {
      global: true,
      globalDecompression: false,
      encodings: ['br', 'gzip'],
      threshold: 1024,
      customTypes: COMPRESSIBLE_TYPES,
      brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: 4 } },
    });
  },
  { name: 'compression' },
);
