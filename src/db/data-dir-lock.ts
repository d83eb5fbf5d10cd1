/**
 * Exclusive lock on the embedded data directory. PGlite does not lock its directory and two
 * processes writing one directory silently lose committed rows, so the second opener is refused
 * with a message that names the lock file, who holds it and what to do.
 *
 * The lock is a file created with O_EXCL holding the owner's identity: its pid, the start time of
 * that process (field 22 of /proc/<pid>/stat, clock ticks since boot) and the boot id
 * (/proc/sys/kernel/random/boot_id). A lock is live only if that same process is still running:
 * same boot, a process with that pid, and that process started at the recorded time. Anything else
 * is stale and taken over — a crash or SIGKILL, a container restarted with the same pid (every
 * container's server is pid 1), a pid since reused by an unrelated process, a lock from before a
 * reboot. Where /proc is missing (not Linux) the pid alone decides, and a lock naming our own pid
 * is stale (this process does not hold it: see `held`).
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export interface DataDirLock {
  readonly path: string;
  release(): void;
}

/** Who holds a lock, as written in its file. */
export interface LockOwner {
  pid: number;
  /** Start time of the process in clock ticks since boot (/proc/<pid>/stat field 22); absent off Linux. */
  startTime?: string;
  /** /proc/sys/kernel/random/boot_id of the boot the process ran in; absent off Linux. */
  bootId?: string;
}

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
    readonly lockPath: string,
  ) {
    super(
      `The data directory ${dataDir} is in use by another process (pid ${pid}), most likely a running ` +
        `store-api server. The embedded database allows one process at a time. Either stop that ` +
        `process and run this command again, or do the same through the running server's admin API ` +
        `(/admin/api/v1) or dashboard (/admin). Nothing was changed. The lock is the file ${lockPath}; ` +
        `only if no process is using this directory any more (\`ps -p ${pid} -o pid,lstart,args\` shows ` +
        `no store-api) delete that file and start again.`,
    );
    this.name = 'DataDirLockedError';
  }
}

const LOCK_FILE = 'store-api.lock';
/** Lock paths this process holds (a second open in the same process is refused too). */
const held = new Set<string>();

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Start time of process `pid` (clock ticks since boot), or undefined if it does not exist or /proc is missing. */
export function processStartTime(pid: number): string | undefined {
  const stat = readText(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  // The command name (field 2) is in parentheses and may contain spaces or ')': split after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields[22 - 3];
}

/** The current boot's id, or undefined off Linux. */
export function bootId(): string | undefined {
  return readText('/proc/sys/kernel/random/boot_id');
}

/** The identity this process writes into a lock it takes. */
export function currentOwner(): LockOwner {
  return { pid: process.pid, startTime: processStartTime(process.pid), bootId: bootId() };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Parses a lock file: JSON `{pid, startTime, bootId}`, or a bare pid (locks of earlier versions). */
export function parseLockOwner(text: string): LockOwner | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return { pid: value };
    if (value && typeof value === 'object') {
      const { pid, startTime, bootId: boot } = value as Record<string, unknown>;
      if (typeof pid === 'number' && Number.isSafeInteger(pid) && pid > 0) {
        return { pid, startTime: typeof startTime === 'string' ? startTime : undefined, bootId: typeof boot === 'string' ? boot : undefined };
      }
    }
  } catch {
    /* not JSON: unreadable, treated as stale */
  }
  return undefined;
}

/** True when the process that wrote `owner` is still running (see the file comment). */
export function ownerAlive(owner: LockOwner): boolean {
  // Our own pid: this process does not hold the lock (`held` says so), so it is a previous
  // process that had the same pid (a restarted container).
  if (owner.pid === process.pid) return false;
  const currentBoot = bootId();
  if (currentBoot === undefined) return processAlive(owner.pid); // no /proc: the pid alone decides
  if (owner.bootId !== undefined && owner.bootId !== currentBoot) return false; // written before a reboot
  const startTime = processStartTime(owner.pid);
  if (startTime === undefined) return false; // no such process now
  // A lock of an earlier version carries no start time: the pid alone decides, as it did then.
  return owner.startTime === undefined || owner.startTime === startTime;
}

/** Takes the lock of `dataDir` or throws DataDirLockedError. */
export function acquireDataDirLock(dataDir: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  if (held.has(path)) throw new DataDirLockedError(dataDir, process.pid, path);
  const owner = currentOwner();
  const content = JSON.stringify(owner);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, content);
      closeSync(fd);
      held.add(path);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        held.delete(path);
        try {
          if (readText(path) === content) unlinkSync(path);
        } catch {
          /* already gone */
        }
      };
      process.once('exit', release);
      return { path, release };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = parseLockOwner(readText(path) ?? '');
      if (holder && ownerAlive(holder)) throw new DataDirLockedError(dataDir, holder.pid, path);
      // Stale lock (see the file comment): remove it and try again.
      try {
        unlinkSync(path);
      } catch {
        /* raced with another opener */
      }
    }
  }
  throw new Error(`Could not take the lock ${path}; another process keeps taking it. Stop the other store-api processes on ${dataDir} and start again.`);
}
