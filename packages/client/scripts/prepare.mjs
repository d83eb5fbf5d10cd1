#!/usr/bin/env node
// `prepare` (run by every `npm ci`/`npm install` of the workspace): builds dist/ when TypeScript is
// installed. A production install (`npm ci --omit=dev`) has no TypeScript and keeps the dist/ a
// build left, so it must not fail for lack of `tsc` (docs/decisions/0009). `npm run build` still
// fails without TypeScript.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

try {
  createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  process.stderr.write('@store-api/client: typescript is not installed (production install): dist/ not rebuilt\n');
  process.exit(0);
}
execFileSync('npm', ['run', 'build'], { stdio: 'inherit' });
