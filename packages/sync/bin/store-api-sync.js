#!/usr/bin/env node
// Launcher: runs the compiled dist/ (`npm run build`, which `npm ci` runs through `prepare`) when it
// is complete (dist/.build-stamp, written last) and newer than every file under src/; otherwise the
// TypeScript sources through tsx, so a checkout being edited never runs a stale build. Started with
// the "source" export condition (`--conditions=source`, what the tests give every child), it runs
// the sources too: the compiled sync tool would load the client's compiled dist/, not its source.
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
  let built;
  try {
    built = statSync(at('dist/.build-stamp')).mtimeMs;
  } catch {
    return false; // no build
  }
  try {
    return built >= newestUnder(at('src'));
  } catch {
    return true; // no sources
  }
}

function sourceConditionOn() {
  const flags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  return flags.some(
    (flag, i) => flag === '--conditions=source' || flag === '-C=source' || ((flag === '--conditions' || flag === '-C') && flags[i + 1] === 'source'),
  );
}

if (!sourceConditionOn() && distIsCurrent()) {
  await import('../dist/cli/sync-cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/sync-cli.ts');
}
