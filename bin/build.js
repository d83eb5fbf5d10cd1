#!/usr/bin/env node
// `npm run build` (also run by `npm ci` through `prepare`): compiles src/ to dist/ with tsc, copies
// the dashboard's static files beside the compiled plugin, builds the migrated PGlite template
// (dist/pglite-template/), and writes dist/.build-stamp last, so
// bin/store-api.js only runs a dist/ that finished building and is newer than every source file.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const at = (path) => fileURLToPath(new URL(`../${path}`, import.meta.url));
let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch (error) {
  // `prepare` after an install without dev dependencies (`npm ci --omit=dev` after a build): nothing
  // to build with, and nothing to run the sources with either (tsx is a dev dependency too), so a
  // build already there is kept and bin/store-api.js runs it. An explicit `npm run build` still fails.
  if (process.argv.includes('--if-possible')) {
    process.stderr.write(
      existsSync(at('dist/.build-stamp'))
        ? 'typescript is not installed: dist/ kept as built\n'
        : 'typescript is not installed: dist/ not built, and store-api cannot start until it is: run `npm run build` with the dev dependencies installed\n',
    );
    process.exit(0);
  }
  throw error;
}
rmSync(at('dist'), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', at('tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
cpSync(at('src/admin/dashboard/public'), at('dist/admin/dashboard/public'), { recursive: true });
// A migrated PGlite data directory the embedded default copies at its first start instead of
// running initdb (src/schema/migrated-template.ts, copied by src/db/pglite-template.ts, docs/decisions/0006).
const { PGLITE_TEMPLATE_DIR, PGLITE_DEMO_TEMPLATE_DIR } = await import('../dist/db/pglite-template.js');
const { writePgliteTemplate } = await import('../dist/schema/migrated-template.js');
await writePgliteTemplate(PGLITE_TEMPLATE_DIR);
// The same with the default demo store in it, for `npm start` on an empty directory (src/demo/demo-template.ts).
const { writeDemoTemplate } = await import('../dist/demo/demo-template.js');
await writeDemoTemplate(PGLITE_DEMO_TEMPLATE_DIR, PGLITE_TEMPLATE_DIR);
writeFileSync(at('dist/.build-stamp'), `${new Date().toISOString()}\n`);
