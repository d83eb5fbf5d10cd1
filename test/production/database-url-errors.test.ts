/**
 * A database that cannot be reached says so at start, naming DATABASE_URL, the cause and what to
 * check ("Migration (unknown) failed: …" named neither). PostgreSQL only: the embedded
 * database has no connection to refuse.
 */
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.ts';
import { MigrationError, migrateToLatest } from '../../src/schema/migrate.ts';

const BASE = process.env.TEST_DATABASE_URL;

async function startError(databaseUrl: string): Promise<Error> {
  const handle = await openDatabase({ databaseUrl, poolSize: 1 });
  try {
    await migrateToLatest(handle.db);
  } catch (error) {
    return error as Error;
  } finally {
    await handle.close();
  }
  throw new Error(`${databaseUrl} opened`);
}

describe.skipIf(!BASE)('a database that cannot be opened (PostgreSQL)', () => {
  it('a refused connection names DATABASE_URL and asks whether PostgreSQL runs there', async () => {
    const url = new URL(BASE!);
    url.port = '1';
    const error = await startError(url.toString());
    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toMatch(/^Cannot open the database \(DATABASE_URL/);
    expect(error.message).toMatch(/ECONNREFUSED/);
    expect(error.message).toMatch(/is PostgreSQL running there\?/);
    expect(error.message).not.toMatch(/\(unknown\)/);
  });

  it('a database that does not exist is named as such, with createdb', async () => {
    const url = new URL(BASE!);
    url.pathname = '/store_api_no_such_database';
    const error = await startError(url.toString());
    expect(error.message).toMatch(/DATABASE_URL/);
    expect(error.message).toMatch(/does not exist/);
    expect(error.message).toMatch(/createdb/);
  });

  it('a host that does not resolve mentions percent-encoding a password with URL characters', async () => {
    const url = new URL(BASE!);
    url.hostname = 'store-api-no-such-host.invalid';
    const error = await startError(url.toString());
    expect(error.message).toMatch(/DATABASE_URL/);
    expect(error.message).toMatch(/ENOTFOUND|EAI_AGAIN/);
    if (/ENOTFOUND/.test(error.message)) expect(error.message).toMatch(/percent-encode/);
  });
});
