/**
 * A fresh, empty sync mirror on the test's back end: on PostgreSQL a scratch database of its own
 * (its connection string in `url`, for a child process), on PGlite an in-memory one. Both are
 * closed by the caller through `closers`, newest first.
 */
import type { Backend } from '../../src/db/database.ts';
import { openMirror, type MirrorDatabase } from '../../packages/sync/src/index.ts';
import { openTestDatabase } from '../helpers/test-database.ts';

export async function freshMirror(backend: Backend, closers: { close(): Promise<void> }[]): Promise<MirrorDatabase & { url?: string }> {
  if (backend === 'postgres') {
    const db = await openTestDatabase('postgres', { poolSize: 2 });
    closers.push(db);
    const mirror = await openMirror({ databaseUrl: db.url });
    closers.push(mirror);
    return Object.assign(mirror, { url: db.url });
  }
  const mirror = await openMirror({});
  closers.push(mirror);
  return mirror;
}
