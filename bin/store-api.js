#!/usr/bin/env node
// Launcher: runs the compiled dist/ (what production runs: `npm run build`, which `npm ci` runs
// through `prepare`) when it is complete and newer than every file under src/; otherwise the
// TypeScript sources through tsx, so a checkout being edited (and every test spawning this file)
// never runs a stale build.
import { readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const at = (path) => fileURLToPath(new URL(`../${path}`, import.meta.url));

/** Newest modification time (ms) of `dir` and anything under it (a deleted file touches its folder). */
function newestUnder(dir) {
  let newest = statSync(dir).mtimeMs;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    newest = Math.max(newest, statSync(`${entry.parentPath}/${entry.name}`).mtimeMs);
  }
  return newest;
}

function distIsCurrent() {
  try {
    return statSync(at('dist/.build-stamp')).mtimeMs >= newestUnder(at('src'));
  } catch {
    return false; // no build
  }
}

if (distIsCurrent()) {
  await import('../dist/main/cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/main/cli.ts');
}
