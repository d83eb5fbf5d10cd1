/**
 * Which database errors mean "unavailable, retry" (503 with Retry-After) rather than a bug (500) or
 * the client's fault (4xx): the table in src/shared/db-errors.ts. And the worker's backoffs.
 */
import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/shared/db-errors.ts';
import { loopBackoffMs } from '../../src/webhooks/wakeable.ts';
import { listenBackoffMs } from '../../src/db/listen-connection.ts';

const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code, severity: 'FATAL' });

describe('isDatabaseUnavailable', () => {
  it.each([
    ['57P01 admin_shutdown (pg_terminate_backend)', pgError('57P01', 'terminating connection due to administrator command')],
    ['40P01 deadlock_detected (after runWrite gave up retrying)', pgError('40P01', 'deadlock detected')],
    ['57P02 crash_shutdown', pgError('57P02')],
    ['57P03 cannot_connect_now', pgError('57P03', 'the database system is starting up')],
    ['08006 connection_failure (class 08)', pgError('08006')],
    ['08003 connection_does_not_exist (class 08)', pgError('08003')],
    ['53300 too_many_connections', pgError('53300')],
    ['ECONNREFUSED', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['ECONNRESET', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
    ['an AggregateError of refused addresses', new AggregateError([Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })], 'connect failed')],
    ['pg: Connection terminated unexpectedly', new Error('Connection terminated unexpectedly')],
    ['pg: Connection terminated due to connection timeout', new Error('Connection terminated due to connection timeout')],
    ['pg-pool: connect timeout', new Error('timeout exceeded when trying to connect')],
    ['pg: client not queryable', new Error('Client has encountered a connection error and is not queryable')],
    ['wrapped in a cause', new Error('query failed', { cause: pgError('57P01') })],
  ])('%s → unavailable', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it.each([
    ['23505 unique_violation', pgError('23505', 'duplicate key value violates unique constraint')],
    ['42P01 undefined_table', pgError('42P01', 'relation "x" does not exist')],
    ['22008 datetime_field_overflow', pgError('22008', 'date/time field value out of range')],
    ['a plain bug', new TypeError('Cannot read properties of undefined')],
    ['not an error', 'Connection terminated'],
    ['nothing', undefined],
  ])('%s → not unavailable', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(false);
  });
});

describe('worker backoffs', () => {
  it('loop steps wait the poll interval first, doubling up to 30 s', () => {
    expect([1, 2, 3, 4].map((n) => loopBackoffMs(n, 1000))).toEqual([1000, 2000, 4000, 8000]);
    expect(loopBackoffMs(50, 1000)).toBe(30_000);
    expect(loopBackoffMs(3, 60_000)).toBe(60_000); // never shorter than the interval itself
  });

  it('the LISTEN connection retries within a second at first, doubling up to 30 s', () => {
    expect(listenBackoffMs(1, 100)).toBe(100);
    expect(listenBackoffMs(1, 3000)).toBe(1000);
    expect(listenBackoffMs(3, 3000)).toBe(4000);
    expect(listenBackoffMs(40, 3000)).toBe(30_000);
  });
});
