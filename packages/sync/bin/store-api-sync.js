#!/usr/bin/env node
// Launcher: runs the compiled dist/ (`npm run build`, which `npm ci` runs through `prepare`) when it
// is complete (dist/.build-stamp, written last) and newer than every file under src/; otherwise the
// TypeScript sources through tsx, so a checkout being edited never runs a stale build. tsx is a dev
// dependency: a production install (no tsx) runs dist/ as built. Started with
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

/** 'current', 'stale' (a source file is newer) or 'missing' (no build, or one that did not finish). */
function distState() {
  let built;
  try {
    built = statSync(at('dist/.build-stamp')).mtimeMs;
  } catch {
    return 'missing';
  }
  try {
    return built >= newestUnder(at('src')) ? 'current' : 'stale';
  } catch {
    return 'current'; // no sources
  }
}

function sourceConditionOn() {
  const flags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  return flags.some(
    (flag, i) => flag === '--conditions=source' || flag === '-C=source' || ((flag === '--conditions' || flag === '-C') && flags[i + 1] === 'source'),
  );
}

/** tsx's loader API, or undefined when tsx is not installed (a production install: it is a dev dependency). */
async function tsxApi() {
  try {
    return await import('tsx/esm/api');
  } catch (error) {
    if (error?.code === 'ERR_MODULE_NOT_FOUND') return undefined;
    throw error;
  }
}

const dist = distState();
const tsx = dist === 'current' && !sourceConditionOn() ? undefined : await tsxApi();
if (tsx) {
  tsx.register();
  await import('../src/cli/sync-cli.ts');
} else if (dist === 'missing') {
  process.stderr.write(
    'store-api-sync: dist/ is not built and tsx (a dev dependency) is not installed, so there is nothing to run: run `npm run build` with the dev dependencies installed (`npm ci` runs it).\n',
  );
  process.exit(1);
} else {
  if (dist === 'stale') process.stderr.write('store-api-sync: src/ has changed since dist/ was built and tsx is not installed: running dist/ as built.\n');
  await import('../dist/cli/sync-cli.js');
}
