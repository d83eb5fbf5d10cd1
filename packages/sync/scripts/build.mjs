#!/usr/bin/env node
// `npm run build` (also `prepare`, run by every `npm ci`/`npm install` of the workspace): compiles
// src/ to dist/ with tsc and writes dist/.build-stamp last, so bin/store-api-sync.js only runs a
// dist/ that finished building and is newer than every source file. With `--if-possible` (the
// `prepare`), a production install without TypeScript keeps going: the launcher then runs src/
// through tsx (like the service's bin/build.js, docs/decisions/0009).
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const at = (path) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const require = createRequire(import.meta.url);
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch (error) {
  if (process.argv.includes('--if-possible')) {
    process.stderr.write('@store-api/sync: typescript is not installed: dist/ not built; bin/store-api-sync.js runs src/ through tsx\n');
    process.exit(0);
  }
  throw error;
}
// The compiled sync tool imports the client's compiled types and code: build the client first when
// its dist/ is missing (the workspaces' `prepare` scripts may run in any order).
const clientDir = fileURLToPath(new URL('../../client/', import.meta.url));
if (!existsSync(`${clientDir}dist/index.d.ts`)) {
  execFileSync('npm', ['run', 'build'], { cwd: clientDir, stdio: 'inherit' });
}
rmSync(at('dist'), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', at('tsconfig.build.json')], { cwd: at(''), stdio: 'inherit' });
writeFileSync(at('dist/.build-stamp'), `${new Date().toISOString()}\n`);
