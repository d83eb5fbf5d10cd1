#!/usr/bin/env node
// Launcher: runs the compiled dist/ (what production runs: `npm run build`, which `npm ci` runs
// through `prepare`) when it is complete and newer than every file under src/; otherwise the
// TypeScript sources through tsx, so a checkout being edited (and every test spawning this file)
// never runs a stale build.
import { readdirSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';

// Node 22.12 or newer (docs/decisions/0009): older ones stop here with one clear line (JSON when
// stderr is not a terminal, like every failure of a start).
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 12)) {
  const message =
    `store-api needs Node.js 22.12 or newer (24 LTS recommended); this is Node.js ${process.versions.node} (${process.execPath}). ` +
    'In a checkout, `npm start` and `npm test` bring Node 24 themselves (the `node` dev dependency).';
  process.stderr.write(
    process.stderr.isTTY
      ? `${message}\n`
      : `${JSON.stringify({ level: 60, time: new Date().toISOString(), pid: process.pid, hostname: hostname(), node: process.versions.node, msg: message })}\n`,
  );
  process.exit(1);
}

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
    return true; // no sources (the container image ships dist/ only)
  }
}

if (distIsCurrent()) {
  await import('../dist/main/cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/main/cli.ts');
}
