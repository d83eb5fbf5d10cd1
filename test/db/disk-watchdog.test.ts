/**
 * The disk watchdog (db/disk-watchdog.ts, decisions 0008 and 0048): a statement unanswered by the
 * database's thread past the stall while the data directory's disk is full kills the process with a
 * clear message; a long statement on a disk with room, or a full disk with nothing in flight, never
 * does. Each case runs in a child process (the watchdog kills its own process).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';

const MODULE = fileURLToPath(new URL('../../src/db/disk-watchdog.ts', import.meta.url));

/** Runs the watchdog for `runMs` in a child; `fullBelow` huge = the disk counts as full. */
function watch(inFlightAgoMs: number | null, fullBelow: number, runMs: number) {
  const script = `
    import { startDiskWatchdog } from ${JSON.stringify(MODULE)};
    const since = ${inFlightAgoMs === null ? 'undefined' : `Date.now() - ${inFlightAgoMs}`};
    startDiskWatchdog(${JSON.stringify(tmpdir())}, () => since, { stallMs: 1000, fullBelow: ${fullBelow}, everyMs: 10 });
    let ticks = 0;
    // Alive for runMs and at least 20 of the watchdog's checks, then a clean exit.
    const started = Date.now();
    const keep = setInterval(() => { ticks++; if (ticks >= 25 && Date.now() - started >= ${runMs}) { clearInterval(keep); process.stdout.write('survived'); } }, 10);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
}

describe('the disk watchdog', () => {
  it('kills the process when a statement has gone unanswered past the stall with the disk full', async () => {
    const result = await watch(5_000, Number.MAX_SAFE_INTEGER, 60_000);
    expect(result.signal).toBe('SIGKILL');
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/the embedded database stopped answering for \d+ s with its disk full \(\d+ MiB free on /);
  });

  it('leaves a long statement alone while the disk has room', async () => {
    const result = await watch(5_000, 0, 300);
    expect(result).toMatchObject({ code: 0, signal: null, stdout: 'survived' });
    expect(result.stderr).not.toMatch(/stopped answering/);
  });

  it('leaves a full disk alone while nothing is in flight, and a statement younger than the stall', async () => {
    for (const ago of [null, 0]) {
      const result = await watch(ago, Number.MAX_SAFE_INTEGER, 300);
      expect(result).toMatchObject({ code: 0, signal: null, stdout: 'survived' });
    }
  });
});
