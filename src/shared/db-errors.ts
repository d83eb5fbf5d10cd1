/**
 * What database errors mean to a client: constraint violations raised by PostgreSQL (or PGlite)
 * become client errors (a duplicate sku is a 409 naming the field rather than a 500), and a
 * database that cannot be reached becomes a 503 with Retry-After.
 */
import { ApiError, conflict } from './problem.ts';

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

/**
 * When the database is away (failover, restart, an idle-session killer, the network), the request
 * that met it is answered 503 `service_unavailable` with Retry-After, never 500: the client should
 * simply try again, and the pool opens fresh connections for the next requests. The table says which
 * errors mean "unavailable" (the habit of graphile-worker's retryable-error list): SQLSTATE classes
 * and codes from PostgreSQL, socket error codes from Node, and the messages node-postgres raises
 * itself (it gives those no code).
 */
const UNAVAILABLE_SQLSTATE_CLASSES: readonly string[] = [
  '08', //    connection_exception (08000, 08003 no connection, 08006 connection failure, 08001, 08004 …)
];
const UNAVAILABLE_SQLSTATES: readonly string[] = [
  '57P01', // admin_shutdown: pg_terminate_backend, a smart/fast shutdown, a failover
  '57P02', // crash_shutdown: another backend crashed and the server is resetting
  '57P03', // cannot_connect_now: the server is starting up or in recovery
  '57P05', // idle_session_timeout (PostgreSQL 14+)
  '53300', // too_many_connections: momentary, another process holds the slots
  '25P03', // idle_in_transaction_session_timeout
  '40P01', // deadlock_detected: lost a lock race; runWrite already retried it (db/write-clock.ts)
  '40001', // serialization_failure: the same, for a serialization race
  '3D000', // invalid_catalog_name: the database does not exist (dropped, being restored, a typo in a failover)
  '28P01', // invalid_password: credentials rotated on the server before the deployment
  '28000', // invalid_authorization_specification: no pg_hba.conf entry, role not permitted to log in
  '53000', // insufficient_resources
  '53200', // out_of_memory: the server could not allocate for this statement
];
const UNAVAILABLE_NODE_CODES: readonly string[] = [
  'ECONNREFUSED', // nothing listens (server down, restarting)
  'ECONNRESET', //   the connection was cut
  'EPIPE', //        written to a connection already closed
  'ETIMEDOUT', //    the network dropped packets
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN', // DNS / routing during a failover
];
const UNAVAILABLE_MESSAGES: readonly RegExp[] = [
  /^Connection terminated/, //                          pg: socket closed (unexpectedly / due to connection timeout)
  /^timeout exceeded when trying to connect/, //        pg-pool: connectionTimeoutMillis passed
  /is not queryable/, //                                pg: a client whose connection already failed or closed
  /^terminating connection/, //                         server FATAL text when a code is missing
];

/** Seconds a client is told to wait (Retry-After) before trying again while the database is away. */
export const DATABASE_RETRY_AFTER_SECONDS = 2;

/**
 * Marks errors raised while opening a connection (db/database.ts wraps the pool's connect): whatever
 * their SQLSTATE or message, the request never reached a query, so the database is unavailable to it.
 */
const CONNECT_FAILURE = Symbol.for('store-api.connect-failure');

/** Tags `error` as raised while opening a connection and returns it. */
export function markConnectFailure<T>(error: T): T {
  if (error && typeof error === 'object') {
    try {
      Object.defineProperty(error, CONNECT_FAILURE, { value: true });
    } catch {
      // A frozen error object cannot be tagged; it still goes through the tables below.
    }
  }
  return error;
}

/** True when `error` (or its cause) means the database cannot be reached right now, not a bad query. */
export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!error || typeof error !== 'object' || depth > 3) return false;
  if ((error as { [CONNECT_FAILURE]?: boolean })[CONNECT_FAILURE] === true) return true;
  const e = error as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string') {
    if (UNAVAILABLE_SQLSTATES.includes(e.code) || UNAVAILABLE_NODE_CODES.includes(e.code)) return true;
    if (/^[0-9A-Z]{5}$/.test(e.code) && UNAVAILABLE_SQLSTATE_CLASSES.includes(e.code.slice(0, 2))) return true;
  }
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(e.message as string))) return true;
  if (Array.isArray(e.errors) && e.errors.some((inner) => isDatabaseUnavailable(inner, depth + 1))) return true;
  return isDatabaseUnavailable(e.cause, depth + 1);
}

/** The 503 a request gets when the database is unavailable. */
export function databaseUnavailable(): ApiError {
  return new ApiError('service_unavailable', 'The database is unavailable at the moment (restart or failover). Retry the request shortly.', undefined, {
    'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS),
  });
}
