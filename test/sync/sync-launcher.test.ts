import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../production/process-helpers.ts';

// packages/sync/bin/store-api-sync.js starts the compiled dist/ when it is complete and newer than
// src/, else the sources through tsx; the "source" condition (what the tests give the CLI) forces the
// sources. A copy of the launcher beside a fake dist/ and src/ that say which one ran.
const run = promisify(execFile);
const dirs: string[] = [];

function fakePackage(): string {
  const cache = join(PROJECT_ROOT, 'tmp'); // under the checkout (git-ignored), so `tsx` resolves
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'sync-launcher-'));
  dirs.push(dir);
  cpSync(join(PROJECT_ROOT, 'packages/sync/bin'), join(dir, 'bin'), { recursive: true });
  mkdirSync(join(dir, 'dist/cli'), { recursive: true });
  mkdirSync(join(dir, 'src/cli'), { recursive: true });
  writeFileSync(join(dir, 'dist/cli/sync-cli.js'), "process.stdout.write('dist');\n");
  writeFileSync(join(dir, 'src/cli/sync-cli.ts'), "const ran: string = 'src';\nprocess.stdout.write(ran);\n");
  return dir;
}

/** Sets the modification time of `path` to `seconds` after the epoch's year 2020. */
function touch(path: string, seconds: number): void {
  const at = new Date(Date.UTC(2020, 0, 1) + seconds * 1000);
  utimesSync(path, at, at);
}

function srcAt(dir: string, seconds: number): void {
  for (const path of ['src', 'src/cli', 'src/cli/sync-cli.ts']) touch(join(dir, path), seconds);
}

async function launch(dir: string, nodeOptions = ''): Promise<string> {
  const { stdout } = await run(process.execPath, [join(dir, 'bin/store-api-sync.js')], {
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', NODE_OPTIONS: nodeOptions },
  });
  return stdout;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('store-api-sync launcher', () => {
  it('runs the compiled dist/ when its build stamp is newer than every source file', async () => {
    const dir = fakePackage();
    srcAt(dir, 100);
    writeFileSync(join(dir, 'dist/.build-stamp'), 'built\n');
    touch(join(dir, 'dist/.build-stamp'), 200);
    expect(await launch(dir)).toBe('dist');
  });

  it('runs the sources through tsx when a source file is newer than the build', async () => {
    const dir = fakePackage();
    srcAt(dir, 100);
    writeFileSync(join(dir, 'dist/.build-stamp'), 'built\n');
    touch(join(dir, 'dist/.build-stamp'), 200);
    touch(join(dir, 'src/cli/sync-cli.ts'), 300);
    expect(await launch(dir)).toBe('src');
  });

  it('runs the sources when the build did not finish (no stamp)', async () => {
    const dir = fakePackage();
    srcAt(dir, 100);
    expect(await launch(dir)).toBe('src');
  });

  it('runs the sources under the "source" condition even with a current build', async () => {
    const dir = fakePackage();
    srcAt(dir, 100);
    writeFileSync(join(dir, 'dist/.build-stamp'), 'built\n');
    touch(join(dir, 'dist/.build-stamp'), 200);
    expect(await launch(dir, '--conditions=source')).toBe('src');
    expect(await launch(dir, '--conditions source')).toBe('src');
  });
});
