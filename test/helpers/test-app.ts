/**
 * `buildTestApp(backend)`: the real application on a fresh test database, with silent logs and
 * configuration from `env` (validated like production). Close it in afterAll.
 */
import { pino } from 'pino';
import type { Backend } from '../../src/db/database.ts';
import { buildApp, type App } from '../../src/app.ts';
import type { AppContext } from '../../src/app-context.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createToken, type Scope } from '../../src/tokens/token.service.ts';
import { openTestDatabase, type TestDatabase } from './test-database.ts';
import { checkStoreDocuments } from '../../src/resources/store-schema.ts';
import { attachContractCheck, type ContractCheck } from './contract-check.ts';

/** Env that lifts the rate limits, for tests that page through large stores. */
export const UNLIMITED = { RATE_LIMIT_STANDARD: '1000000', RATE_LIMIT_EXPORT: '1000000' } as const;

export interface TestApp {
  app: App;
  ctx: AppContext;
  database: TestDatabase;
  /** Every response checked against the served OpenAPI document; close() fails on any violation. */
  contract: ContractCheck;
  /** Throws when a stored document differs from its rebuild from the tables (run by close()). */
  checkDocuments(): Promise<void>;
  /** Header object for a fresh token with `scopes` (default: the four read scopes). */
  auth(scopes?: Scope[]): Promise<{ authorization: string }>;
  close(): Promise<void>;
}

/**
 * `logLines`: collect the app's log lines (JSON text) at `env.LOG_LEVEL` (default: no logs).
 * `now`: the app's clock (AppContext.now), for tests that move across TOTP time steps without sleeping.
 */
export async function buildTestApp(
  backend: Backend,
  env: Record<string, string> = {},
  options: { logLines?: string[]; now?: () => number } = {},
): Promise<TestApp> {
  const database = await openTestDatabase(backend);
  const config = loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', ...env });
  const lines = options.logLines;
  const logger = lines ? pino({ level: config.LOG_LEVEL }, { write: (line: string) => void lines.push(line) }) : pino({ level: 'silent' });
  const ctx: AppContext = { config, database, logger, now: options.now };
  const app = await buildApp(ctx);
  const contract = attachContractCheck(app);
  await app.ready();
  return {
    app,
    ctx,
    database,
    contract,
    auth: async (scopes) => {
      const { token } = await createToken(database.db, { name: 'test', scopes });
      return { authorization: `Bearer ${token}` };
    },
    checkDocuments: () => assertDocumentsMatch(database),
    close: async () => {
      // Every test app ends with the rebuild check: whatever kind of write the test made, every
      // stored document must equal what the tables say (db/documents.ts).
      // And the contract test: every response the test got kept the OpenAPI document (contract-check.ts).
      try {
        await assertDocumentsMatch(database);
        assertContractKept(contract);
      } finally {
        await app.close();
      }
      await database.close();
    },
  };
}

/** Throws, naming each violation, when a response broke the served OpenAPI document. */
export function assertContractKept(contract: ContractCheck): void {
  if (contract.violations.length === 0) return;
  const distinct = [...new Set(contract.violations)];
  throw new Error(`${distinct.length} response(s) broke the OpenAPI document (test/helpers/contract-check.ts):\n${distinct.slice(0, 30).join('\n')}`);
}

/** The rebuild check of db/documents.ts as an assertion naming the first records that differ. */
export async function assertDocumentsMatch(database: TestDatabase): Promise<void> {
  const differences = await checkStoreDocuments(database.db, { limit: 5 });
  if (differences.length > 0) {
    throw new Error(
      `stored documents differ from their rebuild:\n${differences.map((d) => `${d.kind} ${d.id}\n  stored:  ${d.stored}\n  rebuilt: ${d.rebuilt}`).join('\n')}`,
    );
  }
}
