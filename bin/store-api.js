#!/usr/bin/env node
// Launcher: runs the compiled dist/ (what production runs: `npm run build`, which `npm ci` runs
// through `prepare`) when it is complete and newer than every file under src/; otherwise the
// TypeScript sources through tsx, so a checkout being edited (and every test spawning this file)
// never runs a stale build. tsx is a dev dependency: a production install (`npm ci --omit=dev`
// after a build) has none, and runs dist/ as built; with neither, one line says to build.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';

// Node 22.12 or newer (docs/decisions/0009): older ones stop here with one clear line (JSON when
// stderr is not a terminal, like every failure of a start).
const [major, minor] = process.versions.node.split('.').map(Number);
/** One line on stderr: text on a terminal, else a JSON log line at `level` (pino's numbers). */
function say(level, message, fields = {}) {
  process.stderr.write(
    process.stderr.isTTY
      ? `${message}\n`
      : `${JSON.stringify({ level, time: new Date().toISOString(), pid: process.pid, hostname: hostname(), ...fields, msg: message })}\n`,
  );
}

if (major < 22 || (major === 22 && minor < 12)) {
  say(
    60,
    `store-api needs Node.js 22.12 or newer (24 LTS recommended); this is Node.js ${process.versions.node} (${process.execPath}). ` +
      'In a checkout, `npm start` and `npm test` bring Node 24 themselves (the `node` dev dependency).',
    { node: process.versions.node },
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
    return 'current'; // no sources (the container image ships dist/ only)
  }
}

/** tsx's loader API, or undefined when tsx is not installed (a production install). */
async function tsxApi() {
  try {
    return await import('tsx/esm/api');
  } catch (error) {
    if (error?.code === 'ERR_MODULE_NOT_FOUND') return undefined;
    throw error;
  }
}

// With an OTLP endpoint configured, OpenTelemetry's SDK starts before the application's modules
// load, so its instrumentations patch them (src/ops/tracing-sdk.ts, docs/decisions/0052).
// (startTracing checks the rest of the variables: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER.)
const tracing = Boolean(process.env.OTEL_EXPORTER_OTLP_ENDPOINT || process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
const version = () => JSON.parse(readFileSync(at('package.json'), 'utf8')).version;

const dist = distState();
const tsx = dist === 'current' ? undefined : await tsxApi();
if (!tsx && dist === 'missing') {
  say(
    60,
    'store-api: dist/ is not built (or its build did not finish) and tsx (a dev dependency) is not installed, so there is nothing to run: run `npm run build` with the dev dependencies installed (`npm ci` runs it), then start store-api again.',
  );
  process.exit(1);
}
if (!tsx) {
  if (dist === 'stale') {
    say(
      40,
      'store-api: src/ has changed since dist/ was built and tsx (a dev dependency) is not installed: running dist/ as built; `npm run build` rebuilds it.',
    );
  }
  if (tracing) await (await import('../dist/ops/tracing-sdk.js')).startTracing(version());
  await import('../dist/main/cli.js');
} else {
  tsx.register();
  if (tracing) await (await import('../src/ops/tracing-sdk.ts')).startTracing(version());
  await import('../src/main/cli.ts');
}
