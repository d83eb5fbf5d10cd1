/**
 * The second half of input validation, for every route in one place: what JSON Schema cannot say
 * about values PostgreSQL will refuse. It runs on what the schemas validated and coerced (query,
 * path parameters, body, also a text body such as the CSV import), before any handler:
 *   - numbers must be finite: coercion turns `limit=1e400` into Infinity, JSON.parse does the same
 *     for `1e400` in a body, and Ajv's `maximum` lets Infinity through;
 *   - strings (and object keys) must be storable text: no NUL (PostgreSQL text cannot hold U+0000)
 *     and no lone UTF-16 surrogate (not Unicode; the driver would silently store U+FFFD instead).
 * Each failure is a 400 problem+json naming the field, like a schema error.
 * Money's "at most 2 decimals" is enforced exactly by the `multipleOf` keyword defined in
 * `exactMultipleOfPlugin` below; timestamps' range by `parseIsoTimestamp` (src/shared/time.ts).
 */
import type { FastifyInstance } from 'fastify';
import type { Plugin } from 'ajv';
import fp from 'fastify-plugin';
import { ApiError, type ParamError } from '../../shared/problem.ts';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why `text` cannot be stored as PostgreSQL text, or undefined when it can. */
export function unstorableText(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain NUL (U+0000) characters';
  if (LONE_SURROGATE.test(text)) return 'must be valid Unicode (it contains a lone surrogate)';
  return undefined;
}

/** Deeper input is refused: no schema nests this far, and a body no schema checked must not recurse without end. */
export const MAX_INPUT_DEPTH = 32;

/**
 * The first value in `value` (walked depth first) that PostgreSQL cannot take, as a parameter
 * error named like schema errors: `limit`, `body`, `body.items.0.unit_price`.
 */
export function findUnsafeInput(value: unknown, path: string[], param: (path: string[]) => string): ParamError | undefined {
  if (path.length > MAX_INPUT_DEPTH) return { param: param(path.slice(0, MAX_INPUT_DEPTH)), message: `is nested more than ${MAX_INPUT_DEPTH} levels deep` };
  if (typeof value === 'number') {
    return Number.isFinite(value) ? undefined : { param: param(path), message: 'must be a finite number' };
  }
  if (typeof value === 'string') {
    const reason = unstorableText(value);
    return reason ? { param: param(path), message: reason } : undefined;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnsafeInput(value[i], [...path, String(i)], param);
      if (found) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const keyReason = unstorableText(key);
      if (keyReason) return { param: param(path), message: `property names ${keyReason}` };
      const found = findUnsafeInput(item, [...path, key], param);
      if (found) return found;
    }
  }
  return undefined;
}

const queryParam = (path: string[]) => path.join('.') || 'query';
const bodyParam = (path: string[]) => ['body', ...path].join('.');
const pathParam = (path: string[]) => path.join('.') || 'path';

/** Rejects, with 400 naming the field, input that passed the schemas but PostgreSQL cannot store. */
export const inputGuardPlugin = fp(
  async function inputGuard(app: FastifyInstance) {
    app.addHook('preHandler', async (request) => {
      const found =
        findUnsafeInput(request.params, [], pathParam) ?? findUnsafeInput(request.query, [], queryParam) ?? findUnsafeInput(request.body, [], bodyParam);
      if (found) throw new ApiError('invalid_parameter', `Invalid value for '${found.param}': ${found.message}`, [found]);
    });
  },
  { name: 'input-guard' },
);

/** Number of decimals in the shortest round-trip text of a finite number (1.5e-7 → 8). */
function decimals(value: number): number {
  const [mantissa = '', exponent = '0'] = String(value).toLowerCase().split('e');
  const fraction = mantissa.split('.')[1]?.length ?? 0;
  return Math.max(0, fraction - Number(exponent));
}

/**
 * Ajv plugin replacing `multipleOf` with an exact decimal check: the number as written (its
 * shortest round-trip decimal text) must have no more decimals than the divisor and be a whole
 * multiple of it. Float division would take 1.0000000001 for a multiple of 0.01 under
 * `multipleOfPrecision`, and the amount would then be rounded by numeric(14,2): money with more
 * than 2 decimals is refused, never rounded (docs/decisions/0003-data-and-api-gaps.md).
 */
export const exactMultipleOfPlugin: Plugin<unknown> = (ajv) => {
  ajv.removeKeyword('multipleOf');
  ajv.addKeyword({
    keyword: 'multipleOf',
    type: 'number',
    schemaType: 'number',
    error: { message: ({ schema }) => `must be a multiple of ${schema} (at most ${decimals(schema as number)} decimals)` },
    validate: (divisor: number, value: number) => {
      if (!Number.isFinite(value)) return false;
      const places = decimals(divisor);
      if (decimals(value) > places) return false;
      const scale = 10 ** places;
      return Math.round(value * scale) % Math.round(divisor * scale) === 0;
    },
  });
  return ajv;
};
