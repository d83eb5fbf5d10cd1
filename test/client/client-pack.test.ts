/**
 * The client is publishable: `npm pack` of the package (built into a scratch directory, so the
 * working dist/ is never touched while other tests use it) holds the compiled ESM with its types,
 * the README, CHANGELOG and LICENSE, and nothing of the repository's tests or scripts; the packed
 * module imports and reports the package's version.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PACKAGE = join(ROOT, 'packages', 'client');
const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8'));

describe('npm pack of @store-api/client', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'client-pack-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('has the metadata a registry needs', () => {
    expect(manifest.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(manifest.license).toBe('MIT');
    expect(manifest.repository).toMatchObject({ type: 'git', directory: 'packages/client' });
    expect(manifest.private).toBeUndefined();
    expect(manifest.type).toBe('module');
    expect(manifest.exports['.']).toMatchObject({ types: './dist/index.d.ts', default: './dist/index.js' });
    expect(Object.keys(manifest.dependencies ?? {})).toEqual([]);
    expect(readFileSync(join(PACKAGE, 'CHANGELOG.md'), 'utf8')).toContain(`## ${manifest.version}`);
  });

  it('packs the compiled ESM with types, README, CHANGELOG and LICENSE, and it imports', async () => {
    const stage = join(scratch, 'stage');
    mkdirSync(stage);
    for (const entry of ['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE', 'src', 'examples']) {
      cpSync(join(PACKAGE, entry), join(stage, entry), { recursive: true });
    }
    // The package's own build, written to the stage instead of packages/client/dist.
    await run(join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', join(PACKAGE, 'tsconfig.build.json'), '--outDir', join(stage, 'dist')], { cwd: PACKAGE });
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], { cwd: stage });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as [{ filename: string; files: { path: string }[] }];
    const files = packed.files.map((f) => f.path).sort();
    for (const needed of [
      'package.json',
      'README.md',
      'CHANGELOG.md',
      'LICENSE',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/admin.client.js',
      'dist/admin.client.d.ts',
      'dist/generated/api-types.d.ts',
      'src/index.ts',
    ]) {
      expect(files, needed).toContain(needed);
    }
    expect(files.filter((f) => /(^|\/)(test|scripts|node_modules)\//.test(f) || f.endsWith('tsconfig.build.json'))).toEqual([]);
    expect(packed.filename).toBe(`store-api-client-${manifest.version}.tgz`);

    const installed = join(scratch, 'node_modules', '@store-api', 'client');
    mkdirSync(installed, { recursive: true });
    await run('tar', ['-xzf', join(scratch, packed.filename), '-C', installed, '--strip-components', '1']);
    const module = await import(pathToFileURL(join(installed, 'dist', 'index.js')).href);
    expect(module.VERSION).toBe(manifest.version);
    expect(typeof module.StoreApiClient).toBe('function');
    expect(typeof module.verifyWebhook).toBe('function');
    const client = new module.StoreApiClient({ baseUrl: 'http://127.0.0.1:1', token: 'sia_x' });
    expect(typeof client.admin.tokens.create).toBe('function');
  });
});
