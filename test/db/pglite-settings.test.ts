/**
 * The embedded database's PostgreSQL settings (db/database.ts, decision 0018): a small
 * shared_buffers, which stays resident in PGlite's WebAssembly memory once filled, set at every
 * open of a data directory (PGLITE_SHARED_BUFFERS_MB), with PGlite's own start parameters kept; the
 * data directory reopens under another setting with its rows; the database thread's young generation
 * and its early collection of dead buffers (decision 0043) reach the thread. PGlite only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import {
  DEFAULT_PGLITE_SHARED_BUFFERS_MB,
  DEFAULT_PGLITE_WORKER_BUFFER_SLACK_MB,
  DEFAULT_PGLITE_WORKER_YOUNG_GENERATION_MB,
  openDatabase,
  type DatabaseHandle,
} from '../../src/db/database.ts';
import { createToken } from '../../src/tokens/token.service.ts';
import { loadConfig } from '../../src/config/config.ts';
import { migrationNames } from '../../src/schema/migrate.ts';
import { backends, openTestDatabase } from '../helpers/test-database.ts';

const show = async (database: DatabaseHandle, setting: string) =>
  (await sql.raw<Record<string, string>>(`SHOW ${setting}`).execute(database.db)).rows[0]![setting];

describe('the embedded database settings', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'store-api-pglite-settings-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('opens a data directory with the small shared_buffers and PGlite’s own parameters, and reopens it with another size', async () => {
    // 8 MB since decision 0043 (16 before): a changed default fails here.
    expect(DEFAULT_PGLITE_SHARED_BUFFERS_MB).toBe(8);
    expect(loadConfig({}).PGLITE_SHARED_BUFFERS_MB).toBe(DEFAULT_PGLITE_SHARED_BUFFERS_MB);
    const dataDir = join(root, 'data');
    const first = await openDatabase({ dataDir, knownMigrations: migrationNames() });
    try {
      expect(await show(first, 'shared_buffers')).toBe(`${DEFAULT_PGLITE_SHARED_BUFFERS_MB}MB`);
      // New WAL segments made without 16 MB of zeros through native memory (decision 0043, session 11).
      expect(await show(first, 'wal_init_zero')).toBe('off');
      // PGlite's defaults, which our parameters must not replace.
      expect(await show(first, 'search_path')).toBe('public');
      expect(await show(first, 'max_worker_processes')).toBe('0');
      expect(await show(first, 'exit_on_error')).toBe('off');
      await createToken(first.db, { name: 'kept across the reopen' });
    } finally {
      await first.close();
    }
    const second = await openDatabase({ dataDir, sharedBuffersMb: 4 });
    try {
      expect(await show(second, 'shared_buffers')).toBe('4MB');
      expect((await second.db.selectFrom('api_tokens').select('name').execute()).map((r) => r.name)).toContain('kept across the reopen');
    } finally {
      await second.close();
    }
  });

  it('runs the in-memory database with the same settings', async () => {
    const database = await openDatabase({});
    try {
      expect(await show(database, 'shared_buffers')).toBe(`${DEFAULT_PGLITE_SHARED_BUFFERS_MB}MB`);
    } finally {
      await database.close();
    }
  });
});

describe('the embedded database thread', () => {
  const bigStatements = async (database: DatabaseHandle) => {
    // Each statement's 1 MiB of output is copied several times into fresh buffers by PGlite: more
    // than a 1 MiB slack each time, far below what makes V8 collect on its own (tens of MiB).
    for (let i = 0; i < 6; i++) await sql`SELECT repeat('x', 1024 * 1024) AS big`.execute(database.db);
  };

  it('runs with the default young generation and buffer slack (decision 0043)', async () => {
    // The defaults are the measured ones: a changed default fails here, not only an explicit value.
    expect(DEFAULT_PGLITE_WORKER_YOUNG_GENERATION_MB).toBe(8);
    expect(DEFAULT_PGLITE_WORKER_BUFFER_SLACK_MB).toBe(8);
    const config = loadConfig({});
    expect(config.PGLITE_WORKER_YOUNG_GENERATION_MB).toBe(DEFAULT_PGLITE_WORKER_YOUNG_GENERATION_MB);
    expect(config.PGLITE_WORKER_BUFFER_SLACK_MB).toBe(DEFAULT_PGLITE_WORKER_BUFFER_SLACK_MB);
    const database = await openDatabase({});
    try {
      expect(await database.threadStats!()).toMatchObject({
        youngGenerationMb: DEFAULT_PGLITE_WORKER_YOUNG_GENERATION_MB,
        bufferSlackMb: DEFAULT_PGLITE_WORKER_BUFFER_SLACK_MB,
      });
    } finally {
      await database.close();
    }
  });

  it('collects dead buffers once they pass the slack', async () => {
    const database = await openDatabase({ workerBufferSlackMb: 1 });
    try {
      const before = await database.threadStats!();
      await bigStatements(database);
      expect((await database.threadStats!()).bufferCollections).toBeGreaterThan(before.bufferCollections);
    } finally {
      await database.close();
    }
  });

  it('takes other sizes, and 0 leaves the collections to V8', async () => {
    const database = await openDatabase({ workerYoungGenerationMb: 32, workerBufferSlackMb: 0 });
    try {
      await bigStatements(database);
      expect(await database.threadStats!()).toEqual({ youngGenerationMb: 32, bufferSlackMb: 0, bufferCollections: 0 });
    } finally {
      await database.close();
    }
  });

  it.runIf(backends.includes('postgres'))('is not there on PostgreSQL', async () => {
    const database = await openTestDatabase('postgres');
    try {
      expect(database.threadStats).toBeUndefined();
    } finally {
      await database.close();
    }
  });
});
