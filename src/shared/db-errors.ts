/**
 * Translates constraint violations raised by PostgreSQL (or PGlite) into client errors, so a
 * duplicate sku is a 409 naming the field rather than a 500.
 */
import { ApiError, conflict } from '../api/problem.ts';

/** PostgreSQL SQLSTATEs we answer as client errors. */
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';
const CHECK_VIOLATION = '23514';

const constraintMessages: Record<string, string> = {
  products_sku_key: 'Another product already uses this sku.',
  products_slug_key: 'Another product already uses this slug.',
  variants_sku_key: 'Another variant already uses this sku.',
};

/** Rethrows `error` as an ApiError when it is a known constraint violation. */
export function translateDbError(error: unknown): never {
  const e = error as { code?: string; constraint?: string; message?: string };
  if (e && typeof e === 'object' && !(error instanceof ApiError)) {
    const constraint = e.constraint ?? /constraint "([^"]+)"/.exec(e.message ?? '')?.[1];
    if (e.code === UNIQUE_VIOLATION) throw conflict(constraintMessages[constraint ?? ''] ?? 'A record with these values already exists.');
    if (e.code === FOREIGN_KEY_VIOLATION) throw conflict('A referenced record does not exist.');
    if (e.code === CHECK_VIOLATION) throw conflict('The values break a rule of the record (e.g. a negative amount).');
  }
  throw error;
}
