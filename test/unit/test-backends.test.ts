/**
 * The back ends the database tests run on (test/helpers/test-database.ts): both when PostgreSQL is
 * given, PGlite alone otherwise, and TEST_BACKENDS narrowing them (CI's Node 22 leg, decision 0073)
 * or stopping the run when it names a back end that is unknown or not given.
 */
import { describe, expect, it } from 'vitest';
import { backendsOf } from '../helpers/test-database.ts';

const URL = 'postgres://root@127.0.0.1:5432/test';

describe('the back ends of the database tests', () => {
  it('are PGlite and PostgreSQL when TEST_DATABASE_URL is set, PGlite alone otherwise', () => {
    expect(backendsOf({ TEST_DATABASE_URL: URL })).toEqual(['pglite', 'postgres']);
    expect(backendsOf({})).toEqual(['pglite']);
    expect(backendsOf({ TEST_DATABASE_URL: URL, TEST_BACKENDS: ' ' })).toEqual(['pglite', 'postgres']);
  });

  it('are narrowed by TEST_BACKENDS, in their usual order', () => {
    expect(backendsOf({ TEST_DATABASE_URL: URL, TEST_BACKENDS: 'pglite' })).toEqual(['pglite']);
    expect(backendsOf({ TEST_DATABASE_URL: URL, TEST_BACKENDS: 'postgres' })).toEqual(['postgres']);
    expect(backendsOf({ TEST_DATABASE_URL: URL, TEST_BACKENDS: 'postgres, pglite' })).toEqual(['pglite', 'postgres']);
    expect(backendsOf({ TEST_BACKENDS: 'pglite' })).toEqual(['pglite']);
  });

  it('stop the run when TEST_BACKENDS names a back end that is unknown or not given', () => {
    expect(() => backendsOf({ TEST_DATABASE_URL: URL, TEST_BACKENDS: 'pglite,sqlite' })).toThrow(
      'TEST_BACKENDS="pglite,sqlite": unknown back end "sqlite" (pglite, postgres)',
    );
    expect(() => backendsOf({ TEST_BACKENDS: 'postgres' })).toThrow('TEST_BACKENDS="postgres": postgres needs TEST_DATABASE_URL');
  });
});
