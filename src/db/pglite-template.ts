/**
 * A pre-initialised, migrated PGlite data directory, built by `npm run build` (bin/build.js,
 * schema/migrated-template.ts) into dist/pglite-template/, so the first start of the embedded
 * default copies it instead of running initdb, which was most of a first start (5–13 s on the loaded
 * 2-core machine, against 1.4–1.8 s for copying the template; docs/decisions/0006-first-start-template.md).
 * The migrations live above db/ (schema/, decision 0041): the one who writes a template says which
 * it applied, the one who opens a data directory says which it knows.
 *
 * Layout: `pgdata/` (the data directory, as PGlite left it after a clean close) and `stamp.json`,
 * written last: `{ pglite, migrations }`, the PGlite version that made it and the migrations it has.
 * The template is used only when the data directory is missing or empty, the stamp's PGlite version
 * is the installed one (a data directory is tied to its PostgreSQL build) and every migration it has
 * is one of the migrations the caller knows (migrations run on top as usual, so an older template is
 * fine; a newer one from a later build is not). Anything else falls back to initdb: the template
 * only saves time.
 */
import type { PGlite } from '@electric-sql/pglite';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where `npm run build` writes the template (the same path from src/db/ and dist/db/). */
export const PGLITE_TEMPLATE_DIR = fileURLToPath(new URL('../../dist/pglite-template', import.meta.url));

/** Where `npm run build` writes the template holding the default demo store (demo/demo-template.ts). */
export const PGLITE_DEMO_TEMPLATE_DIR = fileURLToPath(new URL('../../dist/pglite-demo-template', import.meta.url));

export interface TemplateStamp {
  pglite: string;
  migrations: string[];
  /** A template with a demo store in it: what it holds (its first start creates the demo token). */
  demo?: { products: number; customers: number; orders: number };
}

/** The installed PGlite's version (its package.json is not exported, so it is read beside its entry). */
export function installedPgliteVersion(): string {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === '@electric-sql/pglite' && pkg.version) return pkg.version;
    }
  }
  throw new Error('cannot find the version of @electric-sql/pglite');
}

/**
 * Builds a template in `templateDir` from a copy of `fromTemplate` (or initdb when undefined), with
 * `fill` run on the open PGlite; the stamp (`migrations`, the migrations `fill` leaves applied, and
 * what `fill` returns as `demo`) is written last.
 */
export async function writeTemplate(
  templateDir: string,
  fromTemplate: string | undefined,
  migrations: readonly string[],
  fill: (pglite: PGlite) => Promise<TemplateStamp['demo']>,
  parsers?: Record<number, (value: string) => unknown>,
): Promise<void> {
  rmSync(templateDir, { recursive: true, force: true });
  mkdirSync(templateDir, { recursive: true });
  if (fromTemplate) cpSync(join(fromTemplate, 'pgdata'), join(templateDir, 'pgdata'), { recursive: true });
  // Loaded here, at build time: a server's HTTP thread never needs PGlite itself (decision 0048).
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = await PGlite.create({ dataDir: join(templateDir, 'pgdata'), ...(parsers ? { parsers } : {}) });
  let demo: TemplateStamp['demo'];
  try {
    demo = await fill(pglite);
    if (!pglite.closed) await pglite.exec('CHECKPOINT');
  } finally {
    if (!pglite.closed) await pglite.close();
  }
  const stamp: TemplateStamp = { pglite: installedPgliteVersion(), migrations: [...migrations], ...(demo ? { demo } : {}) };
  writeFileSync(join(templateDir, 'stamp.json'), `${JSON.stringify(stamp)}\n`);
}

/** The stamp of a finished template, undefined when there is none. */
export function readStamp(templateDir: string): TemplateStamp | undefined {
  try {
    return JSON.parse(readFileSync(join(templateDir, 'stamp.json'), 'utf8')) as TemplateStamp;
  } catch {
    return undefined; // no template, or one that did not finish building
  }
}

/**
 * Why the template at `templateDir` cannot be used by code that has the migrations `knownMigrations`,
 * or undefined when it can.
 */
export function templateUnusable(templateDir: string, knownMigrations: readonly string[]): string | undefined {
  const stamp = readStamp(templateDir);
  if (!stamp) return 'no finished template';
  if (stamp.pglite !== installedPgliteVersion()) return `made by PGlite ${stamp.pglite}, installed is ${installedPgliteVersion()}`;
  const known = new Set(knownMigrations);
  const unknown = stamp.migrations.filter((m) => !known.has(m));
  if (unknown.length > 0) return `has migrations this code does not know: ${unknown.join(', ')}`;
  return undefined;
}

/**
 * Fills the PGlite data directory `dataDir` from the template when `dataDir` is missing or empty
 * and the template is usable by code with the migrations `knownMigrations`; true when it did. The
 * copy goes to a sibling and is renamed into place, so a start killed half-way leaves no half-copied
 * data directory behind (and the next start removes that sibling). The caller holds the data
 * directory's lock.
 */
export function copyPgliteTemplate(templateDir: string, dataDir: string, knownMigrations: readonly string[]): boolean {
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0) return false;
  if (templateUnusable(templateDir, knownMigrations) !== undefined) return false;
  // Copies left by a start killed half-way (the caller holds the data directory's lock: no other
  // process is copying).
  const prefix = `${basename(dataDir)}.partial-`;
  for (const name of readdirSync(dirname(dataDir))) {
    if (name.startsWith(prefix)) rmSync(join(dirname(dataDir), name), { recursive: true, force: true });
  }
  const partial = `${dataDir}.partial-${process.pid}`;
  cpSync(join(templateDir, 'pgdata'), partial, { recursive: true });
  rmSync(dataDir, { recursive: true, force: true }); // an empty directory, if any
  renameSync(partial, dataDir);
  return true;
}
