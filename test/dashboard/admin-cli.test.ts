/**
 * `store-api admin …` as a user runs it: a child process on a temporary embedded data directory.
 * The password comes from ADMIN_PASSWORD here; without it and without a terminal the command must
 * refuse rather than hang on a prompt.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Secret, TOTP } from 'otpauth';
import { runCli } from './dashboard-harness.ts';
import { openDatabase } from '../../src/db/database.ts';
import { confirmEnrolment, hasSecondFactor, startEnrolment } from '../../src/admin/sessions/second-factor.service.ts';
import { findAdminUser } from '../../src/admin/sessions/admin-user.service.ts';

interface CliFailure {
  code: number;
  stdout: string;
  stderr: string;
}

async function failing(args: string[], env: Record<string, string>): Promise<CliFailure> {
  try {
    await runCli(args, env);
  } catch (error) {
    return error as CliFailure;
  }
  throw new Error(`store-api ${args.join(' ')} succeeded; it should have failed`);
}

describe('store-api admin (CLI)', { timeout: 120_000 }, () => {
  let dataDir: string;
  let env: Record<string, string>;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-admin-cli-'));
    env = { DATA_DIR: dataDir };
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('creates an administrator with the password from ADMIN_PASSWORD, and never prints it', async () => {
    const { stdout, stderr } = await runCli(['admin', 'create', '--email', 'Owner@Example.com'], { ...env, ADMIN_PASSWORD: 'a very secret password' });
    expect(stdout).toBe('Created administrator owner@example.com. Sign in at /admin on the running server.\n');
    expect(stdout + stderr).not.toContain('a very secret password');
    const list = await runCli(['admin', 'list'], env);
    expect(list.stdout).toMatch(/^owner@example\.com {2}owner {2}created \d{4}-/);
  });

  it('refuses a second administrator with the same email', async () => {
    const failure = await failing(['admin', 'create', '--email', 'owner@example.com'], { ...env, ADMIN_PASSWORD: 'another long password' });
    expect(failure.code).toBe(1);
    expect(failure.stderr).toContain("An administrator with the email 'owner@example.com' already exists.");
  });

  it('refuses a short password and a bad email, naming the problem', async () => {
    const short = await failing(['admin', 'create', '--email', 'two@example.com', '--password', 'short'], env);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain("'password': must be at least 10 characters");
    const email = await failing(['admin', 'create', '--email', 'not-an-email'], { ...env, ADMIN_PASSWORD: 'a long enough password' });
    expect(email.stderr).toContain("'email': must be an email address");
  });

  it('refuses to wait for a password when there is no terminal to ask on', async () => {
    const failure = await failing(['admin', 'create', '--email', 'three@example.com'], env);
    expect(failure.code).toBe(1);
    expect(failure.stderr).toContain('No password given and no terminal to ask on');
  });

  it('sets a new password for an existing administrator', async () => {
    const { stdout } = await runCli(['admin', 'set-password', '--email', 'owner@example.com'], { ...env, ADMIN_PASSWORD: 'the new long password' });
    expect(stdout).toContain('Changed the password of owner@example.com');
    const unknown = await failing(['admin', 'set-password', '--email', 'nobody@example.com'], { ...env, ADMIN_PASSWORD: 'the new long password' });
    expect(unknown.stderr).toContain("No administrator with the email 'nobody@example.com'.");
  });

  it('turns off a lost second factor for whoever runs the machine (the way back for a lone owner)', async () => {
    const database = await openDatabase({ dataDir, template: false });
    try {
      const user = await findAdminUser(database.db, 'owner@example.com');
      const started = await startEnrolment(database.db, { adminUserId: user!.id, email: user!.email, issuer: 'test' });
      const code = new TOTP({ secret: Secret.fromBase32(started.secret) }).generate();
      await confirmEnrolment(database.db, { adminUserId: user!.id, code, nowMs: Date.now() });
      expect(await hasSecondFactor(database.db, user!.id)).toBe(true);
    } finally {
      await database.close();
    }
    const { stdout } = await runCli(['admin', 'remove-second-factor', '--email', 'owner@example.com'], env);
    expect(stdout).toContain('Turned off the second factor of owner@example.com');
    const again = await runCli(['admin', 'remove-second-factor', '--email', 'owner@example.com'], env);
    expect(again.stdout).toContain('owner@example.com has no second factor; nothing was changed.');
    const unknown = await failing(['admin', 'remove-second-factor', '--email', 'nobody@example.com'], env);
    expect(unknown.stderr).toContain("No administrator with the email 'nobody@example.com'.");
  });
});
