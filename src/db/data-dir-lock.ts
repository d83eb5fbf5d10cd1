/**
 * Exclusive lock on the embedded data directory. PGlite does not lock its directory and two
 * processes writing one directory silently lose committed rows, so the second opener is refused
 * with a message that says who holds it and what to do instead.
 *
 * The lock is a file created with O_EXCL holding the owner's pid. A lock left by a process that no
 * longer exists (crash, SIGKILL) is taken over.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export interface DataDirLock {
  readonly path: string;
  release(): void;
}

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(
      `The data directory ${dataDir} is in use by another process (pid ${pid}), most likely a running ` +
        `store-api server. The embedded database allows one process at a time. Either stop that ` +
        `process and run this command again, or do the same through the running server's admin API ` +
        `(/admin/api/v1) or dashboard (/admin). Nothing was changed.`,
    );
    this.name = 'DataDirLockedError';
  }
}

const LOCK_FILE = 'store-api.lock';

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock of `dataDir` or throws DataDirLockedError. */
export function acquireDataDirLock(dataDir: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        try {
          if (readFileSync(path, 'utf8').trim() === String(process.pid)) unlinkSync(path);
        } catch {
          /* already gone */
        }
      };
      process.once('exit', release);
      return { path, release };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
      if (Number.isInteger(holder) && holder !== process.pid && processAlive(holder)) {
        throw new DataDirLockedError(dataDir, holder);
      }
      if (holder === process.pid) throw new DataDirLockedError(dataDir, holder);
      // Stale lock of a dead process: remove it and try again.
      try {
        unlinkSync(path);
      } catch {
        /* raced with another opener */
      }
    }
  }
  throw new Error(`Could not take the lock ${path}`);
}
