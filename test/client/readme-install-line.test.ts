/**
 * The client README's install line names the tarball `npm pack` makes of the package as it is
 * (it named 0.1.0 while the package was 0.2.0, so the guide's command failed as written).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { PROJECT_ROOT } from '../production/process-helpers.ts';

describe("the client README's install line", () => {
  it("names the tarball of the package's own name and version", () => {
    const pkg = JSON.parse(readFileSync(resolve(PROJECT_ROOT, 'packages/client/package.json'), 'utf8')) as { name: string; version: string };
    // npm pack names a scoped package's tarball <scope>-<name>-<version>.tgz.
    const tarball = `${pkg.name.replace(/^@/, '').replace('/', '-')}-${pkg.version}.tgz`;
    const readme = readFileSync(resolve(PROJECT_ROOT, 'packages/client/README.md'), 'utf8');
    const installs = [...readme.matchAll(/npm install \.\/(\S+\.tgz)/g)].map((m) => m[1]);
    expect(installs.length).toBeGreaterThan(0);
    for (const named of installs) expect(named).toBe(tarball);
  });
});
