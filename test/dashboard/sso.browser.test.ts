/**
 * Single sign-on in the dashboard, in Chromium, against the real service and a real OpenID
 * provider (`oidc-provider` in-process on loopback, test/helpers/oidc-provider-kit.ts; decision
 * 0062): the owner configures the store's provider on the Administrators page; a colleague's first
 * "Sign in with SSO" makes her account with the role of her groups claim; with SSO required, a
 * password is refused for another owner but the break-glass owner signs in with hers; a member the
 * owner removed is refused at her next SSO sign-in, with a page saying so.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM, hasChromium, runCli, startServer, type RunningServer } from './dashboard-harness.ts';
import { startOidcProvider, type OidcProviderKit } from '../helpers/oidc-provider-kit.ts';

const OWNER = 'owner@corp.example';
const MEMBER = 'pw@corp.example';
const PASSWORD = 'correct horse battery staple';
const LONG = 30_000;

describe.skipIf(!hasChromium)('single sign-on in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  let kit: OidcProviderKit;
  let browser: Browser;
  let owner: Page;
  const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { level: 1, name });

  async function newPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' });
    const page = await context.newPage();
    page.setDefaultTimeout(LONG);
    return page;
  }

  async function signInWithPassword(page: Page, email: string): Promise<void> {
    await page.goto(`${server.url}/admin#/sign-in`);
    await heading(page, 'Sign in').waitFor();
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  }

  async function signInWithSso(page: Page, email: string): Promise<void> {
    kit.signInAs(email);
    await page.goto(`${server.url}/admin#/sign-in`);
    await heading(page, 'Sign in').waitFor();
    await page.getByLabel('Work address for single sign-on').fill(email);
    await page.getByRole('button', { name: 'Continue with SSO' }).click();
  }

  /** Waits until the dashboard shows a signed-in page (its Sign out button). */
  async function signedIn(page: Page): Promise<void> {
    await page
      .getByRole('button', { name: 'Sign out' })
      .waitFor()
      .catch(async (error: unknown) => {
        throw new Error(`not signed in at ${page.url()}: ${(await page.textContent('body'))?.slice(0, 500)}`, { cause: error });
      });
  }

  async function sessionOf(page: Page): Promise<{ email: string; role: string } | null> {
    const res = await page.request.get(`${server.url}/admin/session`);
    return (await res.json()).data;
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-sso-'));
    await runCli(['admin', 'create', '--create', '--email', OWNER], { DATA_DIR: dataDir, ADMIN_PASSWORD: PASSWORD });
    await runCli(['admin', 'create', '--email', MEMBER], { DATA_DIR: dataDir, ADMIN_PASSWORD: PASSWORD });
    server = await startServer({
      DATA_DIR: dataDir,
      SEED_DEMO: 'false',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_CREDENTIALS_KEY: Buffer.alloc(32, 9).toString('base64'),
      ADMIN_SIGN_IN_MAX_FAILURES: '20',
    });
    kit = await startOidcProvider({
      clients: [{ client_id: 'store-dashboard', client_secret: 'dashboard-secret-0123456789', redirect_uris: [`${server.url}/admin/sso/callback`] }],
    });
    kit.people.set('ada@corp.example', { email: 'ada@corp.example', email_verified: true, groups: ['erp-admins'] });
    kit.people.set('vic@corp.example', { email: 'vic@corp.example', email_verified: true, groups: ['staff', 'erp-viewers'] });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    owner = await newPage();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await kit?.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('the owner configures single sign-on on the Administrators page', async () => {
    await signInWithPassword(owner, OWNER);
    await owner.goto(`${server.url}/admin#/admins`);
    await heading(owner, 'Administrators').waitFor();
    const card = owner.getByRole('region', { name: 'Single sign-on' });
    await owner.getByLabel('Issuer URL').fill(kit.issuer);
    await owner.getByLabel('Client ID').fill('store-dashboard');
    await owner.getByLabel('Client secret').fill('dashboard-secret-0123456789');
    await owner.getByLabel('Allowed domains of work addresses').fill('corp.example');
    await owner.getByLabel('Claim to read').fill('groups');
    await owner.getByLabel('Claim values and what each gives').fill('erp-owners = owner\nerp-admins = admin\nerp-viewers = viewer');
    await owner.getByRole('button', { name: 'Apply single sign-on' }).click();
    await owner.getByText('Single sign-on saved.').waitFor();
    await card.getByText(/^Configured\./).waitFor();
  }, 120_000);

  it('a first SSO sign-in makes the account with the role of the claim', async () => {
    const ada = await newPage();
    await signInWithSso(ada, 'ada@corp.example');
    await signedIn(ada);
    expect(await sessionOf(ada)).toMatchObject({ email: 'ada@corp.example', role: 'admin' });
    const vic = await newPage();
    await signInWithSso(vic, 'vic@corp.example');
    await signedIn(vic);
    expect(await sessionOf(vic)).toMatchObject({ email: 'vic@corp.example', role: 'viewer' });
    await owner.reload();
    await owner.locator('[data-admin-email="ada@corp.example"]').waitFor();
  }, 120_000);

  it('with SSO required, another owner’s password is refused but the break-glass owner signs in', async () => {
    await owner.getByLabel('Require single sign-on for everyone but the break-glass owners').check();
    await owner.getByRole('region', { name: 'Single sign-on' }).getByLabel(OWNER).check();
    await owner.getByRole('button', { name: 'Apply single sign-on' }).click();
    await owner.getByText('Single sign-on saved and required.').waitFor();
    const member = await newPage();
    await signInWithPassword(member, MEMBER);
    await member.getByText(/This store requires single sign-on/).waitFor();
    expect(await sessionOf(member)).toBeNull();
    const again = await newPage();
    await signInWithPassword(again, OWNER);
    await signedIn(again);
    expect(await sessionOf(again)).toMatchObject({ email: OWNER, role: 'owner' });
  }, 120_000);

  it('a member the owner removed is refused at her next SSO sign-in', async () => {
    await owner.getByRole('button', { name: 'Remove ada@corp.example' }).click();
    await owner.getByRole('button', { name: 'Remove administrator' }).click();
    await owner.getByText('Removed ada@corp.example.').waitFor();
    const ada = await newPage();
    await signInWithSso(ada, 'ada@corp.example');
    await heading(ada, 'Single sign-on refused').waitFor();
    await ada.getByText(/removed from this store by an owner/).waitFor();
    expect(await sessionOf(ada)).toBeNull();
  }, 120_000);
});
