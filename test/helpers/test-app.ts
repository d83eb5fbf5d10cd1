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

/** Env that lifts the rate limits, for tests that page through large stores. */
export const UNLIMITED = { RATE_LIMIT_STANDARD: '1000000', RATE_LIMIT_EXPORT: '1000000' } as const;

export interface TestApp {
  app: App;
  ctx: AppContext;
  database: TestDatabase;
  /** Header object for a fresh token with `scopes` (default: the four read scopes). */
  auth(scopes?: Scope[]): Promise<{ authorization: string }>;
  close(): Promise<void>;
}

export async function buildTestApp(backend: Backend, env: Record<string, string> = {}): Promise<TestApp> {
  const database = await openTestDatabase(backend);
  const config = loadConfig({ LOG_LEVEL: 'silent', SEED_DEMO: 'false', ...env });
  const ctx: AppContext = { config, database, logger: pino({ level: 'silent' }) };
  const app = await buildApp(ctx);
  await app.ready();
  return {
    app,
    ctx,
    database,
    auth: async (scopes) => {
      const { token } = await createToken(database.db, { name: 'test', scopes });
      return { authorization: `Bearer ${token}` };
    },
    close: async () => {
      await app.close();
      await database.close();
    },
  };
}
