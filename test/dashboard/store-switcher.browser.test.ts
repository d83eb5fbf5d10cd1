/**
 * The store switcher in Chromium (decision 0051, "Administrators per store"): an owner of the
 * deployment's first store becomes the owner of a second store through the setup link that
 * `stores create --json` printed (with the account's own password), lands in that store, sees a
 * labelled store switcher, and switching reloads the pages for the store chosen: its keys only.
 * Every page shown is checked with axe (WCAG 2.1 A/AA), for sideways scrolling and console errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM, hasChromium, pageChecks, runCli, startServer, type RunningServer } from './dashboard-harness.ts';

const OWNER = 'owner@example.com';
const PASSWORD = 'correct horse battery staple';
const SCREENSHOTS = join(tmpdir(), `store-api-screenshots-switcher-${process.pid}`);
const LONG = 30_000;

describe.skipIf(!hasChromium)('the store switcher in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  let browser: Browser;
  let page: Page;
  let setupUrl = '';
  let bravo = '';
  const checks = pageChecks(SCREENSHOTS, LONG);
  const { consoleErrors, a11yViolations, sidewaysScroll, watch, checkPage } = checks;
  const heading = (name: string) => page.getByRole('heading', { level: 1, name, exact: true });
  const session = async () => (await (await page.request.get(`${server.url}/admin/session`)).json()).data;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-switcher-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    await runCli(['admin', 'create', '--create', '--email', OWNER], { DATA_DIR: dataDir, ADMIN_PASSWORD: PASSWORD });
    await runCli(['tokens', 'create', '--name', 'Alpha ERP'], { DATA_DIR: dataDir });
    const created = JSON.parse((await runCli(['stores', 'create', '--name', 'Bravo shop', '--json'], { DATA_DIR: dataDir })).stdout) as {
      id: string;
      setup_url: string;
    };
    bravo = created.id;
    await runCli(['tokens', 'create', '--store', bravo, '--name', 'Bravo ERP'], { DATA_DIR: dataDir });
    server = await startServer({ DATA_DIR: dataDir, SEED_DEMO: 'false' });
    // The link names the deployment's public address; this server listens on a port of its own.
    setupUrl = `${server.url}/admin${new URL(created.setup_url).hash}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' })).newPage();
    watch(page, 'owner');
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("the setup link adds the second store to the owner's account, with the account's own password", async () => {
    await page.goto(setupUrl);
    await page.getByLabel('Email').fill(OWNER);
    await page.getByLabel(/^Password/).fill(PASSWORD);
    await page.getByLabel('Repeat password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create administrator' }).click();
    await heading('Overview').waitFor();
    expect((await session()).store).toMatchObject({ id: bravo, name: 'Bravo shop' });
    const switcher = page.getByLabel('Store', { exact: true });
    await switcher.waitFor();
    expect(await switcher.locator('option:checked').textContent()).toContain('Bravo shop');
    await checkPage(page, 'overview with the store switcher');
  });

  it("switching reloads the page for the store chosen: that store's keys only", async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys', exact: true }).click();
    await heading('API keys').waitFor();
    await page.locator('#api-keys-table tbody tr', { hasText: 'Bravo ERP' }).waitFor();
    expect(await page.locator('#api-keys-table tbody tr', { hasText: 'Alpha ERP' }).count()).toBe(0);
    await page.getByLabel('Store', { exact: true }).selectOption({ label: 'Default store · Owner' });
    await page.locator('#api-keys-table tbody tr', { hasText: 'Alpha ERP' }).waitFor();
    expect(await page.locator('#api-keys-table tbody tr', { hasText: 'Bravo ERP' }).count()).toBe(0);
    expect((await session()).store).toMatchObject({ name: 'Default store' });
    expect(await page.getByLabel('Store', { exact: true }).locator('option:checked').textContent()).toContain('Default store');
    await checkPage(page, 'api keys after switching');
  });

  it('logged no console error, found no axe violation and no sideways scrolling on any page shown', () => {
    expect(consoleErrors).toEqual([]);
    expect(a11yViolations).toEqual([]);
    expect(sidewaysScroll).toEqual([]);
  });
});
