/**
 * Shared frame of CLI commands: load config, open the database, run, close, and turn known
 * failures (bad configuration, locked data directory, API errors) into one clear line and exit 1.
 */
import { resolve } from 'node:path';
import type { AppContext } from '../app-context.ts';
import { ConfigError, loadConfig, type Config } from '../config/config.ts';
import { embeddedStoreExists } from '../db/database.ts';
import { DataDirLockedError } from '../db/data-dir-lock.ts';
import { MigrationError } from '../schema/migrate.ts';
import { ApiError } from '../shared/problem.ts';
import { createLogger, openContext } from '../main/runtime.ts';
import { failureLine } from '../ops/announce.ts';
import { inStore, PLATFORM_SCOPE } from '../db/store-scope.ts';
import { getStore, isStoreId } from '../stores/store.service.ts';

/** A mistake in the command line itself (bad option value): printed plainly, exit 1. */
export class CliUsageError extends Error {}

/** File-system failures that mean "this process may not write here" (an unwritable volume, a full disk). */
const WRITE_FAILURES: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on device',
  EEXIST: 'it exists and is not a directory',
  ENOTDIR: 'a part of the path is not a directory',
};

/** The message and machine-readable fields of a known failure; undefined for anything unexpected. */
export function describeFailure(error: unknown): { message: string; fields: Record<string, unknown> } | undefined {
  if (error instanceof ConfigError) return { message: error.message, fields: { variables: error.variables } };
  if (error instanceof DataDirLockedError) return { message: error.message, fields: { path: error.lockPath } };
  if (error instanceof MigrationError || error instanceof CliUsageError) return { message: error.message, fields: {} };
  if (error instanceof ApiError) return { message: `Error (${error.code}): ${error.detail}`, fields: { code: error.code } };
  const fsError = error as NodeJS.ErrnoException | undefined;
  if (fsError && typeof fsError.path === 'string' && fsError.code && WRITE_FAILURES[fsError.code]) {
    const uid = process.getuid?.();
    return {
      message: `Cannot write ${fsError.path}: ${WRITE_FAILURES[fsError.code]} (${fsError.code}). The data directory (DATA_DIR) must be a writable directory${uid === undefined ? '' : ` for this process (uid ${uid})`}.`,
      fields: { path: fsError.path, code: fsError.code },
    };
  }
  return undefined;
}

/**
 * Prints a known failure as one line and exits 1; anything unexpected with its stack. With `json`
 * (the server roles and `migrate` when stderr is not a terminal) the line is one JSON record naming
 * what was wrong (`variables`, `path`), so that a container's log holds nothing but JSON.
 */
export function exitWithError(error: unknown, { json = false }: { json?: boolean } = {}): never {
  const known = describeFailure(error);
  if (json) {
    const unexpected = error instanceof Error ? { err: { type: error.name, message: error.message, stack: error.stack } } : { err: { message: String(error) } };
    process.stderr.write(known ? failureLine(known.message, known.fields) : failureLine('start failed', unexpected));
  } else if (known) {
    process.stderr.write(`${known.message}\n`);
  } else {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  process.exit(1);
}

/** Structured output for the unattended commands (server roles, `migrate`): JSON unless stderr is a terminal. */
export function machineOutput(): boolean {
  return !process.stderr.isTTY;
}

/**
 * One line for a command refused because a running server holds the embedded data directory:
 * the holder, what to do instead while it runs (`instead`, when the command has a way through the
 * running server), and the fallback of stopping it.
 */
export function dataDirBusyLine(error: DataDirLockedError, instead?: string): string {
  const why = `the data directory ${error.dataDir} is in use by another process (pid ${error.pid}), most likely the running server, and the embedded database allows one process at a time`;
  return instead
    ? `Cannot run this while ${why}. Instead, ${instead}; or stop that process and run this again. Nothing was changed.`
    : `Cannot run this while ${why}. Stop that process and run this again. Nothing was changed.`;
}

/** `--create`, given to every command that opens the store (main/cli.ts); the server roles always may create one. */
export const CREATE_OPTION_HELP = 'with no store in DATA_DIR and no DATABASE_URL, create a new, empty store in DATA_DIR';
let storeCreationAllowed = false;

/** Whether this command was given `--create` (set by main/cli.ts before the action runs). */
export function allowStoreCreation(allowed: boolean): void {
  storeCreationAllowed = allowed;
}

/**
 * A command run outside the service's store (no DATABASE_URL, no store in DATA_DIR) would create a
 * new, empty store whose tokens and administrators the running service never sees: refuse, saying
 * where it would be created, unless `--create` asks for exactly that.
 */
export function requireStoreOrCreate(config: Config): void {
  if (config.DATABASE_URL || storeCreationAllowed || embeddedStoreExists(config.DATA_DIR)) return;
  const where = resolve(config.DATA_DIR);
  throw new CliUsageError(
    `No store in ${where} (DATA_DIR${config.DATA_DIR === './data' ? ', default ./data in the working directory' : ` = ${config.DATA_DIR}`}) and DATABASE_URL is unset: ` +
      `this command would create a new, empty store there, which the running service would not see. Run it in the service's working directory, ` +
      `or set DATA_DIR or DATABASE_URL to the service's store; to create a new store in ${where}, run it again with --create. Nothing was created.`,
  );
}

/** `--store`, given to every store-scoped command (main/cli.ts). */
export const STORE_OPTION_HELP = 'the store to act in (its id, see `store-api stores list`); needed when the deployment has several stores';
let selectedStore: string | undefined;

/** The store this command was given with `--store` (set by main/cli.ts before the action runs). */
export function selectStore(storeId: string | undefined): void {
  selectedStore = storeId;
}

/**
 * Puts the command's statements in their store's scope: the `--store` one, else the only store
 * there is; with several and no `--store`, a clear refusal naming them (`platform` commands work
 * across stores and name their store themselves).
 */
async function chooseScope(ctx: AppContext, scope: 'store' | 'platform'): Promise<void> {
  const { database } = ctx;
  if (scope === 'platform') {
    if (selectedStore !== undefined) throw new CliUsageError('--store is not taken by this command: it works across stores.');
    database.scopes.setDefault(PLATFORM_SCOPE);
    return;
  }
  if (selectedStore !== undefined) {
    if (!isStoreId(selectedStore))
      throw new CliUsageError(`--store: "${selectedStore}" is not a store id (a UUID, as \`store-api stores list\` shows). Nothing was changed.`);
    const store = await getStore(database.db, selectedStore).catch((error: unknown) => {
      if (error instanceof ApiError && error.code === 'not_found')
        throw new CliUsageError(`--store: no store has the id ${selectedStore} (see \`store-api stores list\`). Nothing was changed.`);
      throw error;
    });
    if (store.status === 'deleting') throw new CliUsageError(`--store: the store ${store.id} is being deleted. Nothing was changed.`);
    database.scopes.setDefault({ kind: 'store', storeId: store.id });
    return;
  }
  // openContext chose the default after migrating: the only store, or none when there are several.
  if (database.scopes.default.kind === 'none') {
    throw new CliUsageError('This deployment has several stores: name the one to act in with --store <id> (see `store-api stores list`). Nothing was changed.');
  }
}

export interface ContextOptions {
  /**
   * `store` (default): the command acts in one store (`--store`, or the only one); `platform`: it
   * works across stores (`stores …`, `migrate`).
   */
  scope?: 'store' | 'platform';
  /** Bring the schema up to date on opening (default true; `migrate` does it itself to report what it applied). */
  migrate?: boolean;
  /** What to do instead while a server holds the embedded data directory (one clause). */
  whileServerRuns?: string;
  /** Failures as one JSON line (exitWithError). */
  json?: boolean;
}

/** Runs `fn` with an opened context (database migrated), closing it afterwards. */
export async function withContext<T>(
  fn: (ctx: AppContext) => Promise<T>,
  { whileServerRuns, json = false, migrate = true, scope = 'store' }: ContextOptions = {},
): Promise<T> {
  try {
    const config = loadConfig();
    requireStoreOrCreate(config);
    const logger = createLogger({ ...config, LOG_LEVEL: config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL });
    const ctx = await openContext(config, logger, { applicationName: 'store-api-cli', migrate });
    try {
      if (migrate) await chooseScope(ctx, scope);
      // A store's command runs in its scope, as a request does: its statements name the store by
      // its id (db/store-scope.ts ownStore), not only by the connection's setting.
      const chosen = ctx.database.scopes.default;
      return await (chosen.kind === 'store' ? inStore(chosen.storeId, () => fn(ctx)) : fn(ctx));
    } finally {
      await ctx.database.close();
    }
  } catch (error) {
    if (error instanceof DataDirLockedError) {
      const line = dataDirBusyLine(error, whileServerRuns);
      process.stderr.write(json ? failureLine(line, { path: error.lockPath }) : `${line}\n`);
      process.exit(1);
    }
    exitWithError(error, { json });
  }
}
