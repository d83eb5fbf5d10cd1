/**
 * Signals reach the server: `npm start` SIGTERMed stops the server it started
 * (npm forwards the signal to its child, and the start script execs node, so no shell sits in
 * between to swallow it), and the data directory's lock is released. The server's pid is read from
 * that lock file. Embedded default only: `npm start` is the zero-configuration way to run it.
 * The same start sets MALLOC_ARENA_MAX=2 for the server (read from its /proc environment) and runs
 * node with --max-semi-space-size=4 and --optimize-for-size (its /proc command line).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childEnv, PROJECT_ROOT } from './process-helpers.ts';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(what: string, condition: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('npm start and signals (pglite)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'store-api-npm-start-'));
  let serverPid: number | undefined;
  afterAll(() => {
    if (serverPid && alive(serverPid)) process.kill(serverPid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('SIGTERM to npm stops the server and releases the data directory', async () => {
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: PROJECT_ROOT,
      env: childEnv({ DATA_DIR: dataDir, SEED_DEMO: 'true', SEED_DEMO_PRODUCTS: '20' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npm.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    npm.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const npmExited = new Promise<void>((resolve) => npm.once('exit', () => resolve()));
    await until('the server to listen', () => /listening on http/.test(output) || npm.exitCode !== null, 90_000);
    expect(output).toMatch(/listening on http/);

    const lockFile = join(dataDir, 'store-api.lock');
    serverPid = (JSON.parse(readFileSync(lockFile, 'utf8')) as { pid: number }).pid;
    expect(alive(serverPid)).toBe(true);
    // The start script caps glibc's malloc arenas at two (decision 0039: ~30 MiB less RSS under load).
    const environment = readFileSync(`/proc/${serverPid}/environ`, 'utf8').split('\0');
    expect(environment).toContain('MALLOC_ARENA_MAX=2');
    // An 8 MiB young generation for the HTTP thread (decision 0043; 16 before it).
    const commandLine = readFileSync(`/proc/${serverPid}/cmdline`, 'utf8').split('\0');
    expect(commandLine).toContain('--max-semi-space-size=4');
    // V8 favouring memory over speed (decision 0048: ~12 MiB lower peaks on the 100k store).
    expect(commandLine).toContain('--optimize-for-size');

    npm.kill('SIGTERM');
    await npmExited;
    await until('the server process to end', () => !alive(serverPid!));
    expect(existsSync(lockFile), output).toBe(false);
  }, 120_000);
});
