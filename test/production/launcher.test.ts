/**
 * bin/store-api.js: tsx is a dev dependency, so a production install (`npm ci
 * --omit=dev` after a build) has none. The launcher runs dist/ there even when a source file is
 * newer (with a warning), and with no build at all says in one line to run `npm run build` instead
 * of failing on a missing module. In a checkout (tsx installed) a stale build still runs the sources.
 * A copy of the launcher beside a fake dist/ and src/ that say which one ran: outside the checkout
 * (under the system's temporary folder, no node_modules above it) tsx does not resolve; under the
 * checkout's tmp/ it does.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from './process-helpers.ts';

const dirs: string[] = [];

/** A fake install: the real launcher and package.json, dist/ and src/ entry points printing their name. */
function fakeInstall(under: string, { dist }: { dist: 'current' | 'stale' | 'missing' }): string {
  mkdirSync(under, { recursive: true });
  const dir = mkdtempSync(join(under, 'store-api-launcher-'));
  dirs.push(dir);
  cpSync(join(PROJECT_ROOT, 'bin/store-api.js'), join(dir, 'bin/store-api.js'));
  cpSync(join(PROJECT_ROOT, 'package.json'), join(dir, 'package.json'));
  mkdirSync(join(dir, 'src/main'), { recursive: true });
  writeFileSync(join(dir, 'src/main/cli.ts'), "const ran: string = 'src';\nprocess.stdout.write(ran);\n");
  touch(join(dir, 'src/main/cli.ts'), dist === 'stale' ? 300 : 100);
  for (const folder of ['src/main', 'src']) touch(join(dir, folder), 100);
  if (dist !== 'missing') {
    mkdirSync(join(dir, 'dist/main'), { recursive: true });
    writeFileSync(join(dir, 'dist/main/cli.js'), "process.stdout.write('dist');\n");
    writeFileSync(join(dir, 'dist/.build-stamp'), 'built\n');
    touch(join(dir, 'dist/.build-stamp'), 200);
  }
  return dir;
}

/** Sets the modification time of `path` to `seconds` after the start of 2020. */
function touch(path: string, seconds: number): void {
  const at = new Date(Date.UTC(2020, 0, 1) + seconds * 1000);
  utimesSync(path, at, at);
}

function launch(dir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(dir, 'bin/store-api.js')],
      { env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp' } },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

/** A folder of the system's temporary area with no node_modules in it or above it: tsx cannot resolve. */
function withoutTsx(): string {
  const base = join(tmpdir(), 'store-api-no-node-modules');
  for (let dir = base; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'node_modules'))) throw new Error(`${dir}/node_modules exists: tsx may resolve from there`);
  }
  return base;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('bin/store-api.js in a production install (no tsx)', () => {
  it('runs a current dist/', async () => {
    const run = await launch(fakeInstall(withoutTsx(), { dist: 'current' }));
    expect(run).toMatchObject({ code: 0, stdout: 'dist', stderr: '' });
  });

  it('runs dist/ as built when a source file is newer, and says so', async () => {
    const run = await launch(fakeInstall(withoutTsx(), { dist: 'stale' }));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('dist');
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 40,
      msg: expect.stringMatching(/tsx \(a dev dependency\) is not installed: running dist\/ as built; `npm run build`/),
    });
  });

  it('without a build, exits 1 with one line saying to run `npm run build`', async () => {
    const run = await launch(fakeInstall(withoutTsx(), { dist: 'missing' }));
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as { level: number; msg: string };
    expect(line.level).toBe(60);
    expect(line.msg).toMatch(/dist\/ is not built .* tsx \(a dev dependency\) is not installed/);
    expect(line.msg).toMatch(/run `npm run build`/);
    expect(line.msg).not.toMatch(/ERR_MODULE_NOT_FOUND|Cannot find package/);
  });
});

describe('bin/store-api.js in a checkout (tsx installed)', () => {
  const underCheckout = join(PROJECT_ROOT, 'tmp'); // git-ignored; the checkout's node_modules has tsx

  it('runs the sources through tsx when a source file is newer than the build', async () => {
    expect(await launch(fakeInstall(underCheckout, { dist: 'stale' }))).toMatchObject({ code: 0, stdout: 'src', stderr: '' });
  });

  it('runs the sources when there is no build', async () => {
    expect(await launch(fakeInstall(underCheckout, { dist: 'missing' }))).toMatchObject({ code: 0, stdout: 'src', stderr: '' });
  });

  it('runs a current dist/', async () => {
    expect(await launch(fakeInstall(underCheckout, { dist: 'current' }))).toMatchObject({ code: 0, stdout: 'dist', stderr: '' });
  });
});
