/**
 * The embedded data directory's lock: a restart always works. A stale lock is
 * taken over when it names this process's own pid (a restarted container: pid 1 again), a pid
 * reused by an unrelated live process, or a process of another boot; a lock of a live holder is
 * still refused, with a message naming the lock file and the safe action. File system only: the
 * lock is PGlite's (the embedded back end); PostgreSQL takes no lock.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acquireDataDirLock, bootId, currentOwner, DataDirLockedError, processStartTime, type LockOwner } from '../../src/db/data-dir-lock.ts';

const onLinux = bootId() !== undefined;

describe('data directory lock', () => {
  let dir: string;
  const children: ChildProcess[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'store-api-lock-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  afterAll(() => {
    for (const child of children) child.kill('SIGKILL');
  });

  const lockPath = () => join(dir, 'store-api.lock');
  const writeLock = (owner: LockOwner | number) => writeFileSync(lockPath(), JSON.stringify(owner));
  /** An unrelated live process (its pid stands for a pid reused after our server died). */
  const unrelatedProcess = async () => {
    const child = spawn('sleep', ['600'], { stdio: 'ignore' });
    children.push(child);
    await new Promise<void>((resolve, reject) => child.once('spawn', resolve).once('error', reject));
    return child.pid!;
  };
  const takeAndRelease = () => {
    const lock = acquireDataDirLock(dir);
    expect(JSON.parse(readFileSync(lock.path, 'utf8'))).toEqual(JSON.parse(JSON.stringify(currentOwner())));
    lock.release();
    expect(existsSync(lockPath())).toBe(false);
  };

  it('takes over a stale lock naming its own pid (a restarted container is pid 1 again)', () => {
    writeLock({ ...currentOwner(), startTime: '1' });
    takeAndRelease();
    writeLock(process.pid); // the bare-pid lock of earlier versions
    takeAndRelease();
  });

  it.skipIf(!onLinux)('takes over a lock whose pid now belongs to an unrelated live process', async () => {
    const pid = await unrelatedProcess();
    writeLock({ pid, startTime: '12345', bootId: bootId() });
    takeAndRelease();
  });

  it.skipIf(!onLinux)('takes over a lock of a process of another boot, even if that pid runs now', async () => {
    const pid = await unrelatedProcess();
    writeLock({ pid, startTime: processStartTime(pid), bootId: '00000000-0000-4000-8000-000000000000' });
    takeAndRelease();
  });

  it('takes over a lock of a process that no longer exists, and an unreadable one', async () => {
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    const pid = await new Promise<number>((resolve) => child.once('exit', () => resolve(child.pid!)));
    writeLock({ pid, startTime: '1', bootId: bootId() });
    takeAndRelease();
    writeFileSync(lockPath(), 'garbage');
    takeAndRelease();
  });

  it('refuses while the holder lives, naming the lock file and the safe action', async () => {
    const pid = await unrelatedProcess();
    writeLock({ pid, startTime: processStartTime(pid), bootId: bootId() });
    let refusal: unknown;
    try {
      acquireDataDirLock(dir);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(DataDirLockedError);
    const message = (refusal as Error).message;
    expect(message).toContain(lockPath());
    expect(message).toContain(`pid ${pid}`);
    expect(message).toMatch(/stop that process/);
    expect(message).toMatch(/delete that file/);
    expect(existsSync(lockPath())).toBe(true); // left as it was
  });

  it('refuses a second lock in the same process, and takes it again once released', () => {
    const first = acquireDataDirLock(dir);
    expect(() => acquireDataDirLock(dir)).toThrow(DataDirLockedError);
    first.release();
    takeAndRelease();
  });
});
