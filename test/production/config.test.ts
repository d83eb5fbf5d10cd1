/**
 * The environment schema validated at start: every bad variable is named in the message, and a
 * process started with one (from the environment or from `.env`) stops with that message and exit 1.
 */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, EnvSchema, loadConfig } from '../../src/config/config.ts';
import { PROJECT_ROOT, startStoreApi } from './process-helpers.ts';

describe('configuration', () => {
  it('has defaults for everything optional, per the spec and docs/contract/decisions.md', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      PORT: 3000,
      HOST: '127.0.0.1',
      RATE_LIMIT_STANDARD: 60,
      RATE_LIMIT_EXPORT: 10,
      RATE_LIMIT_WINDOW_MS: 60_000,
      REDIS_KEY_PREFIX: 'store-api:',
      SHUTDOWN_TIMEOUT_MS: 25_000,
      LOG_LEVEL: 'info',
      WEBHOOK_TIMEOUT_MS: 10_000,
    });
    expect(config.REDIS_URL).toBeUndefined();
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("defaults the webhook numbers to the spec's: poll every 3 s, retries after 1 min, 5 min, 30 min, 2 h, 12 h, breaker 10 failures / 30 min, old secret 24 h", () => {
    // Tests shrink these through configuration; this pins what a deployment gets when it sets nothing.
    const config = loadConfig({});
    expect(config.WEBHOOK_POLL_INTERVAL_MS).toBe(3_000);
    expect(config.webhookRetryScheduleMs).toEqual([60_000, 300_000, 1_800_000, 7_200_000, 43_200_000]);
    expect(config.WEBHOOK_BREAKER_THRESHOLD).toBe(10);
    expect(config.WEBHOOK_BREAKER_PAUSE_MS).toBe(1_800_000);
    expect(config.WEBHOOK_SECRET_OVERLAP_MS).toBe(86_400_000);
  });

  it('converts and accepts valid values', () => {
    const config = loadConfig({ PORT: '8080', REDIS_URL: 'redis://127.0.0.1:6379', RATE_LIMIT_STANDARD: '120', METRICS_PORT: '9100', COOKIE_SECURE: 'true' });
    expect(config).toMatchObject({ PORT: 8080, REDIS_URL: 'redis://127.0.0.1:6379', RATE_LIMIT_STANDARD: 120, METRICS_PORT: 9100, COOKIE_SECURE: true });
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['RATE_LIMIT_STANDARD', '0'],
    ['RATE_LIMIT_EXPORT', '-1'],
    ['RATE_LIMIT_WINDOW_MS', 'a minute'],
    ['REDIS_URL', 'http://127.0.0.1:6379'],
    ['DATABASE_URL', 'mysql://localhost/store'],
    ['LOG_LEVEL', 'loud'],
    ['METRICS_PORT', 'x'],
    ['SHUTDOWN_TIMEOUT_MS', '5'],
    ['WEBHOOK_RETRY_SCHEDULE_MS', '60s,5m'],
    ['COOKIE_SECURE', 'maybe'],
  ])('names %s when its value %j is invalid', (name, value) => {
    let error: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain(`${name}=${JSON.stringify(value)}`);
    // Only the bad variable is named.
    const named = Object.keys(EnvSchema.properties).filter((key) => new RegExp(`\\b${key}=`).test(message));
    expect(named).toEqual([name]);
  });

  it('names every bad variable at once', () => {
    expect(() => loadConfig({ PORT: 'x', LOG_LEVEL: 'y' })).toThrow(/PORT=.*\n.*LOG_LEVEL=|LOG_LEVEL=.*\n.*PORT=/s);
  });

  it("stops a starting process with the variable's name and exit code 1, reading .env from the working directory", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-api-config-'));
    try {
      writeFileSync(join(dir, '.env'), 'RATE_LIMIT_EXPORT=ten\nDATA_DIR=./data\n');
      const proc = startStoreApi(['serve'], {}, { cwd: dir, name: 'serve with a bad .env' });
      expect(await proc.exited).toBe(1);
      // Not a terminal: one JSON line naming the variable (docs/decisions/0009).
      const lines = proc.output().trim().split('\n');
      expect(lines).toHaveLength(1);
      const line = JSON.parse(lines[0]!) as { level: number; msg: string; variables: string[] };
      expect(line.level).toBe(60);
      expect(line.variables).toEqual(['RATE_LIMIT_EXPORT']);
      expect(line.msg).toContain('Invalid configuration');
      expect(line.msg).toContain('RATE_LIMIT_EXPORT="ten"');
      expect(line.msg).not.toMatch(/at \w+ \(/); // a message, not a stack trace
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('documents every variable in the one table of the README', () => {
    const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1));
    const documented = [...section.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
    expect([...documented].sort()).toEqual(Object.keys(EnvSchema.properties).sort());
  });
});
