/**
 * Passkeys in the dashboard, in Chromium, against the real service (decision 0063), with Chromium's
 * virtual authenticator (the DevTools WebAuthn domain over CDP: CTAP2, internal, resident keys, user
 * verified): an owner adds a passkey from her account page, signs out, signs in with it alone,
 * then uses it as the second factor after her password, and removes it (with a fresh proof); the
 * removed passkey, still on the device, signs in no more. The service's PUBLIC_URL is
 * http://localhost:<port>, the relying party the browser holds it to. Every page shown is checked
 * with axe (WCAG 2.1 A/AA), for sideways scrolling and console errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type CDPSession, type Locator, type Page } from 'playwright-core';
import { CHROMIUM, REPO_ROOT, freePort, hasChromium, pageChecks, runCli, startServer, type RunningServer } from './dashboard-harness.ts';

const OWNER = 'owner@example.com';
const COLLEAGUE = 'colleague@example.com';
const PASSWORD = 'correct horse battery staple';
const SCREENSHOTS =
  process.env.UPDATE_SCREENSHOTS === '1' ? join(REPO_ROOT, 'docs', 'screenshots') : join(tmpdir(), `store-api-screenshots-passkeys-${process.pid}`);
const LONG = 30_000;

describe.skipIf(!hasChromium)('passkeys in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  let url = '';
  let browser: Browser;
  let page: Page;
  let cdp: CDPSession;
  let authenticatorId = '';
  const checks = pageChecks(SCREENSHOTS, LONG);
  const { consoleErrors, a11yViolations, sidewaysScroll, watch, checkPage, shot } = checks;
  const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
  const passkeys = () => page.getByRole('list', { name: 'Your passkeys' });

  async function withProof(target: Locator, done: Locator): Promise<void> {
    await target.click();
    const proof = page.getByRole('dialog', { name: 'Confirm it is you' });
    await Promise.race([done.waitFor(), proof.waitFor()]);
    if (await proof.isVisible()) {
      await proof.getByLabel('Password or 6-digit code').fill(PASSWORD);
      await proof.getByRole('button', { name: 'Confirm' }).click();
    }
    await done.waitFor();
  }
  async function signOut(): Promise<void> {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await heading('Sign in').waitFor();
  }
  async function toAccount(): Promise<void> {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Your account', exact: true }).click();
    await heading('Your account').waitFor();
  }
  /** A virtual authenticator for `target`'s page (CTAP2, internal, resident keys, user verified). */
  async function virtualAuthenticator(target: Page): Promise<{ session: CDPSession; id: string }> {
    const session = await target.context().newCDPSession(target);
    await session.send('WebAuthn.enable');
    const { authenticatorId: id } = await session.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    return { session, id };
  }
  const credentialsOnDevice = async () => (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-passkeys-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    await runCli(['admin', 'create', '--create', '--email', OWNER], { DATA_DIR: dataDir, ADMIN_PASSWORD: PASSWORD });
    await runCli(['admin', 'create', '--email', COLLEAGUE], { DATA_DIR: dataDir, ADMIN_PASSWORD: PASSWORD });
    // WebAuthn holds a site to its name (an IP address is none): the service is reached at
    // localhost, its PUBLIC_URL, which makes the relying party.
    const port = await freePort();
    url = `http://localhost:${port}`;
    server = await startServer({ DATA_DIR: dataDir, SEED_DEMO: 'false', PORT: String(port), PUBLIC_URL: url, ADMIN_SIGN_IN_MAX_FAILURES: '20' });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' })).newPage();
    watch(page, 'owner');
    ({ session: cdp, id: authenticatorId } = await virtualAuthenticator(page));
    // The refusal at the end is provoked on purpose (Chromium logs each 4xx as a console error).
    checks.provoking = true;
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('adds a passkey from the account page: named, listed with its last use', async () => {
    await page.goto(`${url}/admin#/sign-in`);
    await heading('Sign in').waitFor();
    await page.getByLabel('Email').fill(OWNER);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading('Overview').waitFor();
    await toAccount();
    await page.getByText('No passkeys yet').waitFor();
    await checkPage(page, 'account, no passkeys');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add a passkey' });
    await dialog.getByLabel('Name').fill('This laptop');
    await withProof(dialog.getByRole('button', { name: 'Continue' }), passkeys().getByText('This laptop'));
    await passkeys().getByText('Never used').waitFor();
    expect(await credentialsOnDevice()).toHaveLength(1);
    expect((await credentialsOnDevice())[0]!.isResidentCredential).toBe(true);
    await checkPage(page, 'account, one passkey');
    await shot(page, 'passkeys-account');
  });

  it('signs in with the passkey alone, after signing out', async () => {
    await signOut();
    await checkPage(page, 'sign-in page with the passkey button');
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await heading('Overview').waitFor();
    await toAccount();
    await passkeys()
      .getByText(/Last used/)
      .waitFor();
  });

  it('uses the passkey as the second factor after the password', async () => {
    await signOut();
    await page.getByLabel('Email').fill(OWNER);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading('Two-factor authentication').waitFor();
    await page.getByText(`Signing in as ${OWNER}: confirm with your passkey.`).waitFor();
    await checkPage(page, 'second-factor step with a passkey');
    await page.getByRole('button', { name: 'Use a passkey' }).click();
    await heading('Overview').waitFor();
  });

  it("counts for the owner's requirement: a colleague without a second factor adds a passkey instead of an app", async () => {
    // The checkbox is set from GET /settings/security when it answers: tick it only after that.
    const settingsRead = page.waitForResponse((r) => r.url().endsWith('/admin/api/v1/settings/security') && r.request().method() === 'GET');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Administrators', exact: true }).click();
    await heading('Administrators').waitFor();
    await settingsRead;
    await page.getByLabel('Require two-factor authentication of every administrator').check();
    await withProof(page.getByRole('button', { name: 'Save' }), page.getByText('Every administrator now needs two-factor authentication.'));
    const colleague = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' })).newPage();
    watch(colleague, 'colleague');
    const device = await virtualAuthenticator(colleague);
    await colleague.goto(`${url}/admin#/sign-in`);
    await colleague.getByLabel('Email').fill(COLLEAGUE);
    await colleague.getByLabel('Password').fill(PASSWORD);
    await colleague.getByRole('button', { name: 'Sign in', exact: true }).click();
    await colleague.getByRole('heading', { level: 1, name: 'Set up two-factor authentication' }).waitFor();
    await checkPage(colleague, 'enrolment required, with a passkey offered');
    await colleague.getByRole('button', { name: 'Add a passkey instead' }).click();
    const dialog = colleague.getByRole('dialog', { name: 'Add a passkey' });
    await dialog.getByLabel('Name').fill('Colleague phone');
    await dialog.getByRole('button', { name: 'Continue' }).click();
    await colleague.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect((await device.session.send('WebAuthn.getCredentials', { authenticatorId: device.id })).credentials).toHaveLength(1);
    // Off again: the owner is about to remove her only passkey.
    await page.getByLabel('Require two-factor authentication of every administrator').uncheck();
    await withProof(page.getByRole('button', { name: 'Save' }), page.getByText('Two-factor authentication is optional again.'));

    // A password-reset link replaces her password, not her passkey: the link page asks for it.
    const csrf = (await (await page.request.get(`${url}/admin/session`)).json()).data.csrf_token as string;
    const admins = (await (await page.request.get(`${url}/admin/api/v1/admins`)).json()).data as { id: string; email: string }[];
    const colleagueId = admins.find((a) => a.email === COLLEAGUE)!.id;
    const issue = () => page.request.post(`${url}/admin/api/v1/admins/${colleagueId}/password-reset`, { headers: { 'x-csrf-token': csrf } });
    let issued = await issue();
    if (issued.status() === 403) {
      await page.request.post(`${url}/admin/api/v1/account/reauthenticate`, { headers: { 'x-csrf-token': csrf }, data: { password: PASSWORD } });
      issued = await issue();
    }
    expect(issued.status()).toBe(201);
    await colleague.getByRole('button', { name: 'Sign out' }).click();
    await colleague.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await colleague.goto((await issued.json()).data.url);
    await colleague.getByRole('heading', { level: 1, name: 'Choose a new password' }).waitFor();
    await expect(colleague.getByLabel('Authentication code').count()).resolves.toBe(0);
    await colleague.getByLabel(/^Password/).fill('a new password for the colleague');
    await colleague.getByLabel('Repeat password').fill('a new password for the colleague');
    await checkPage(colleague, 'password reset of a passkey-only account');
    await colleague.getByRole('button', { name: 'Set password and confirm with your passkey' }).click();
    await colleague.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await colleague.context().close();
  });

  it('renames and removes it (with a fresh proof); the passkey left on the device signs in no more', async () => {
    await toAccount();
    await page.getByRole('button', { name: 'Rename the passkey This laptop' }).click();
    const rename = page.getByRole('dialog', { name: 'Rename the passkey' });
    await rename.getByLabel('Name').fill('Work laptop');
    await rename.getByRole('button', { name: 'Rename' }).click();
    await passkeys().getByText('Work laptop').waitFor();
    await page.getByRole('button', { name: 'Remove the passkey Work laptop' }).click();
    const confirm = page.getByRole('dialog', { name: 'Remove this passkey?' });
    await withProof(confirm.getByRole('button', { name: 'Remove passkey' }), page.getByText('No passkeys yet'));
    await signOut();
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.getByText('This passkey is not known here.').waitFor();
    expect(await credentialsOnDevice()).toHaveLength(1);
    // The password alone signs in again (no second factor left).
    await page.getByLabel('Email').fill(OWNER);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading('Overview').waitFor();
  });

  it('logged no console error, found no axe violation and no sideways scrolling on any page shown', () => {
    expect(consoleErrors).toEqual([]);
    expect(a11yViolations).toEqual([]);
    expect(sidewaysScroll).toEqual([]);
  });
});
