/**
 * One clear line for every failure the tool can meet: an unreachable or wrong base URL, a revoked
 * token, a wrong signing secret, a full disk under the mirror. The CLI prints `describeError()` and
 * exits 1; nothing else of an error reaches the user.
 */

/** An error whose message is already the one line the user should read. */
export class SyncError extends Error {
  override readonly name = 'SyncError';
}

/** Disk-full conditions of the mirror: PostgreSQL SQLSTATE 53100, or ENOSPC from the file system (PGlite). */
export function isDiskFull(error: unknown): boolean {
  for (let e = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e.code === '53100' || e.code === 'ENOSPC' || /No space left on device|could not extend file/i.test(String(e.message ?? ''))) return true;
  }
  return false;
}

/** The one line describing `error`. */
export function describeError(error: unknown): string {
  if (error instanceof SyncError) return error.message;
  if (isDiskFull(error))
    return 'mirror database: disk full (no space left on device); the batch in progress was rolled back, free space and run the command again';
  const e = error as { code?: string; message?: string };
  if (e?.code === 'ECONNREFUSED' && /5432|postgres/i.test(String(e.message))) return `mirror database unreachable: ${e.message}`;
  if (e?.code === '3D000' || e?.code === '28P01' || e?.code === '28000') return `mirror database: ${e.message}`;
  const message = (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
  return message || 'unknown error';
}
