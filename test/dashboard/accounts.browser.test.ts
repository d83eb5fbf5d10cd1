/**
 * The dashboard of a store with several administrators, in Chromium: an owner (1280×800) invites a
 * viewer by one-time link, manages API keys (expiry in the past refused at the field, rename and
 * rate limits, roll with an overlap, revoke by keyboard without losing focus, revoked keys hidden
 * until asked for), reads and filters the audit log, changes a password; the viewer (390×844) joins
 * with the link and reads every page with no way to change anything, and the API refuses the
 * viewer's write. Each page is then walked again at the other size by each role. Every page shown
 * is checked with axe (WCAG 2.1 A/AA), for sideways scrolling, and for console errors.
 *
 * Dashboard defects found from outside, each failing before its fix: the endpoint page follows the breaker live;
 * "0 deliveries shown." after a ping; the deliveries table fits 1280 px (Retry visible, event names
 * whole); dialogs fit 390 px; focus kept after a keyboard revoke; dialogs close on Back; error
 * toasts cleared on page change and sign-out; whole numbers on the chart axis; throttling said in
 * words ("about 15 minutes"), not "Try again in 894 seconds".
 *
 * Screenshots of the new pages go to docs/screenshots/ with UPDATE_SCREENSHOTS=1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, REPO_ROOT, WebhookReceiver, hasChromium, pageChecks, runCli, startServer, type RunningServer } from './dashboard-harness.ts';

const OWNER = 'owner@example.com';
const OWNER_PASSWORD = 'correct horse battery staple';
const VIEWER = 'viewer@example.com';
const VIEWER_PASSWORD = 'viewer password 123';
const SCREENSHOTS =
  process.env.UPDATE_SCREENSHOTS === '1' ? join(REPO_ROOT, 'docs', 'screenshots') : join(tmpdir(), `store-api-screenshots-accounts-${process.pid}`);
const LONG = 30_000;
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

describe.skipIf(!hasChromium)('several administrators in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  const receiver = new WebhookReceiver();
  let browser: Browser;
  let ownerContext: BrowserContext;
  let owner: Page;
  let viewerContext: BrowserContext;
  let viewer: Page;
  let inviteLink = '';
  let endpointId = '';
  /** Every secret shown once (API keys, the invitation link): none may appear in the audit log. */
  const secrets: string[] = [];
  const checks = pageChecks(SCREENSHOTS, LONG);
  const { consoleErrors, a11yViolations, sidewaysScroll, watch, checkPage, shot } = checks;
  /** Follows a link of the main navigation; on a phone, through the menu (closed, the page starts on the first screen). */
  const navTo = async (page: Page, name: string) => {
    const menu = page.getByRole('button', { name: 'Menu' });
    if (await menu.isVisible()) await menu.click();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();
  };
  const heading = (page: Page, name: string) => page.getByRole('heading', { level: 1, name, exact: true });
  const readApi = (token: string) => fetch(`${server.url}/api/v1/products?limit=1`, { headers: { authorization: `Bearer ${token}` } });
  const csrfOf = async (page: Page) => (await (await page.request.get(`${server.url}/admin/session`)).json()).data.csrf_token as string;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-accounts-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    const env = {
      DATA_DIR: dataDir,
      SEED_DEMO: 'false',
      WEBHOOK_RETRY_SCHEDULE_MS: '200,200',
      WEBHOOK_POLL_INTERVAL_MS: '50',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_BREAKER_THRESHOLD: '3',
      ADMIN_SIGN_IN_MAX_FAILURES: '2',
    };
    await receiver.start();
    // An administrator made by the CLI before the server starts: an owner.
    await runCli(['admin', 'create', '--create', '--email', OWNER], { DATA_DIR: dataDir, ADMIN_PASSWORD: OWNER_PASSWORD });
    server = await startServer(env);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    ownerContext = await browser.newContext({ viewport: DESKTOP, locale: 'en-GB', timezoneId: 'UTC' });
    await ownerContext.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    owner = await ownerContext.newPage();
    watch(owner, 'owner');
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await receiver.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('the owner signs in and invites a viewer by one-time link', async () => {
    await owner.goto(`${server.url}/admin`);
    await owner.getByLabel('Email').fill(OWNER);
    await owner.getByLabel('Password').fill(OWNER_PASSWORD);
    await owner.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading(owner, 'Overview').waitFor();
    await owner.locator('.user-role', { hasText: 'Owner' }).waitFor();
    await navTo(owner, 'Administrators');
    await heading(owner, 'Administrators').waitFor();
    await owner.getByRole('button', { name: 'Invite administrator' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Invite an administrator' });
    await dialog.getByLabel('Email').fill(VIEWER);
    await dialog.getByLabel('Role').selectOption('viewer');
    await dialog.getByRole('button', { name: 'Create invitation' }).click();
    const created = owner.getByRole('dialog', { name: 'Invitation created' });
    inviteLink = await created.getByLabel('The one-time link').inputValue();
    expect(inviteLink).toMatch(new RegExp(`^${server.url}/admin#/link\\?code=[\\w-]{43}$`));
    await checkPage(owner, 'invitation created');
    await shot(owner, 'admin-invitation');
    await created.getByRole('button', { name: 'Done' }).click();
    await owner.locator('#invitations-table tbody tr', { hasText: VIEWER }).waitFor();
    await checkPage(owner, 'administrators (owner)');
    await shot(owner, 'administrators');
  });

  it('refuses an API key expiring in the past with a message at the date field, and creates nothing', async () => {
    await navTo(owner, 'API keys');
    await heading(owner, 'API keys').waitFor();
    await owner.getByRole('button', { name: 'Create API key' }).first().click();
    const dialog = owner.getByRole('dialog', { name: 'Create API key' });
    await dialog.getByLabel('Name').fill('Born expired');
    await dialog.getByLabel('Expires').selectOption('custom');
    await dialog.getByLabel('Expiry date').fill('2020-01-01');
    await dialog.getByRole('button', { name: 'Create key' }).click();
    await dialog.locator('[data-field="expires_on"] .field-error', { hasText: 'Pick a date in the future' }).waitFor();
    await expect(dialog.getByLabel('Expiry date').getAttribute('aria-invalid')).resolves.toBe('true');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    const res = await owner.request.get(`${server.url}/admin/api/v1/tokens`);
    expect((await res.json()).data).toEqual([]);
  });

  it('creates, renames, limits and rolls a key: the old secret works on for the overlap picked', async () => {
    await owner.getByRole('button', { name: 'Create API key' }).first().click();
    const dialog = owner.getByRole('dialog', { name: 'Create API key' });
    await dialog.getByLabel('Name').fill('ERP');
    await dialog.getByRole('button', { name: 'Create key' }).click();
    const first = await owner.getByRole('dialog', { name: 'API key created' }).getByLabel('The new API key').inputValue();
    await owner.getByRole('dialog', { name: 'API key created' }).getByRole('button', { name: 'Done' }).click();

    await owner.getByRole('button', { name: 'Edit API key ERP' }).click();
    const edit = owner.getByRole('dialog', { name: 'Edit API key' });
    await edit.getByLabel('Name').fill('ERP production');
    await edit.getByLabel('Requests per window').fill('500');
    await checkPage(owner, 'edit key dialog');
    await edit.getByRole('button', { name: 'Save' }).click();
    const row = owner.locator('#api-keys-table tbody tr', { hasText: 'ERP production' });
    await row.locator('td', { hasText: '500/window' }).waitFor();

    await row.getByRole('button', { name: 'Roll API key ERP production' }).click();
    const roll = owner.getByRole('dialog', { name: 'Roll API key?' });
    await roll.getByLabel('The old key stops working').selectOption('3600');
    await checkPage(owner, 'roll key dialog');
    await shot(owner, 'api-key-roll');
    await roll.getByRole('button', { name: 'Roll key' }).click();
    const rolled = owner.getByRole('dialog', { name: 'API key rolled' });
    const second = await rolled.getByLabel('The new API key').inputValue();
    expect(second).not.toBe(first);
    secrets.push(first, second);
    await rolled.getByText(/The old key works until/).waitFor();
    await rolled.getByRole('button', { name: 'Done' }).click();
    expect((await readApi(second)).status).toBe(200);
    expect((await readApi(first)).status).toBe(200);
    await row.getByText(/Old secret works until/).waitFor();
    await checkPage(owner, 'api keys (owner)');
    await shot(owner, 'api-keys-roles');
  });

  it('keeps the focus after a keyboard revoke, and hides revoked keys until asked', async () => {
    await owner.getByRole('button', { name: 'Create API key' }).first().click();
    const dialog = owner.getByRole('dialog', { name: 'Create API key' });
    await dialog.getByLabel('Name').fill('Temporary');
    await dialog.getByRole('button', { name: 'Create key' }).click();
    await owner.getByRole('dialog', { name: 'API key created' }).getByRole('button', { name: 'Done' }).click();
    await owner.getByRole('button', { name: 'Revoke API key Temporary' }).focus();
    await owner.keyboard.press('Enter');
    const confirm = owner.getByRole('dialog', { name: 'Revoke API key?' });
    await confirm.waitFor();
    await owner.keyboard.press('Tab');
    await owner.keyboard.press('Enter');
    await owner.locator('#api-keys-table tbody tr', { hasText: 'Temporary' }).waitFor({ state: 'detached' });
    const focused = await owner.evaluate(() => ({
      body: document.activeElement === document.body,
      inMain: Boolean(document.activeElement?.closest('#main')),
      label: document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.textContent,
    }));
    expect(focused.body).toBe(false);
    expect(focused.inMain).toBe(true);
    await owner.getByRole('link', { name: 'Show revoked and expired (1)' }).click();
    await owner.locator('#api-keys-table tbody tr', { hasText: 'Temporary' }).locator('.badge', { hasText: 'Revoked' }).waitFor();
    await owner.getByRole('link', { name: 'Hide revoked and expired' }).click();
    await owner.locator('#api-keys-table tbody tr', { hasText: 'Temporary' }).waitFor({ state: 'detached' });
  });

  it('closes a dialog when the admin goes Back', async () => {
    await navTo(owner, 'Webhooks');
    await heading(owner, 'Webhooks').waitFor();
    await navTo(owner, 'API keys');
    await heading(owner, 'API keys').waitFor();
    await owner.getByRole('button', { name: 'Create API key' }).first().click();
    await owner.getByRole('dialog', { name: 'Create API key' }).waitFor();
    await owner.goBack();
    await heading(owner, 'Webhooks').waitFor();
    expect(await owner.locator('dialog').count()).toBe(0);
  });

  it('follows the breaker live on the endpoint page, and counts the ping\'s delivery (never "0 deliveries shown.")', async () => {
    receiver.answer('/hooks/down', 500);
    await owner.getByRole('button', { name: 'Add endpoint' }).first().click();
    const form = owner.getByRole('dialog', { name: 'Add webhook endpoint' });
    await form.getByLabel('Endpoint URL').fill(`${receiver.url}/hooks/down`);
    await form.getByRole('button', { name: 'Add endpoint' }).click();
    await owner.getByRole('dialog', { name: 'Endpoint added' }).getByRole('button', { name: 'Open endpoint' }).click();
    await owner.waitForURL(/#\/webhooks\/[0-9a-f-]{36}$/);
    endpointId = owner.url().split('/').pop()!;
    await owner.locator('.deliveries-panel .empty-state').waitFor();
    await owner.getByRole('button', { name: 'Send ping' }).click();
    await owner.locator('.deliveries-panel tbody tr').first().waitFor();
    await owner.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '1 delivery shown.');
    // Three failed attempts in a row (the first and two retries) pause it; no reload.
    await owner.locator('.callout', { hasText: 'Paused by the circuit breaker until' }).waitFor();
    await owner.locator('.page-title-line .badge', { hasText: /^Paused until/ }).waitFor();
    await owner.getByText('3 consecutive failed attempts').waitFor();
    await checkPage(owner, 'endpoint paused');
  });

  it('fits the deliveries table in 1280×800: Retry on screen, event names whole', async () => {
    await owner.getByRole('button', { name: 'Add endpoint' }).count();
    await owner.goto(`${server.url}/admin#/deliveries`);
    await heading(owner, 'Deliveries').waitFor();
    const retry = owner.locator('.deliveries-panel tbody tr[data-status="dead"] [data-role="retry"]').first();
    await retry.waitFor();
    const box = (await retry.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(DESKTOP.width);
    const wrap = await owner.evaluate(() => {
      const el = document.querySelector('.deliveries-panel .table-wrap')!;
      return el.scrollWidth - el.clientWidth;
    });
    expect(wrap).toBe(0);
    const broken = await owner.evaluate(() =>
      Array.from(document.querySelectorAll('.table-deliveries tbody th code'))
        .filter((c) => c.getClientRects().length > 1)
        .map((c) => c.textContent),
    );
    expect(broken).toEqual([]);
    await checkPage(owner, 'deliveries (owner)');
  });

  it('labels the chart axis with whole numbers', async () => {
    await navTo(owner, 'Overview');
    await owner.locator('.chart').waitFor();
    const labels = await owner.locator('.chart text.chart-axis[text-anchor="end"]').allTextContents();
    expect(labels.length).toBe(3);
    for (const label of labels) expect(label).toMatch(/^(0|[1-9]\d{0,2}(,\d{3})*)$/);
  });

  it('records the actions in the audit log, filtered by action', async () => {
    await navTo(owner, 'Audit log');
    await heading(owner, 'Audit log').waitFor();
    for (const action of ['API key rolled', 'API key changed', 'API key revoked', 'Administrator invited', 'Endpoint created', 'Signed in']) {
      await owner
        .locator('#audit-table tbody td', { hasText: new RegExp(`^${action}$`) })
        .first()
        .waitFor();
    }
    await owner.locator('#audit-table tbody tr', { hasText: 'API key changed' }).getByText('Name: ERP → ERP production').waitFor();
    // Values in words, never raw: the overlap picked (3600 s) and its end in local time.
    const rolledRow = owner.locator('#audit-table tbody tr', { hasText: 'API key rolled' });
    await rolledRow.getByText('Overlap: 1 hour').waitFor();
    expect(await rolledRow.locator('.audit-details').textContent()).not.toMatch(/\d{4}-\d\d-\d\dT|overlap_seconds/);
    const logged = (await owner.locator('#audit-table').textContent())!;
    secrets.push(new URL(inviteLink).hash.split('code=')[1]!);
    for (const secret of secrets) expect(logged).not.toContain(secret);
    expect(logged).not.toMatch(/whsec_/);
    await checkPage(owner, 'audit log');
    await shot(owner, 'audit-log');
    await owner.getByLabel('Action').selectOption('key.rolled');
    await owner.getByRole('button', { name: 'Filter' }).click();
    await owner.waitForURL(/#\/audit-log\?action=key.rolled$/);
    await owner.waitForFunction(() => {
      const rows = Array.from(document.querySelectorAll('#audit-table tbody tr'));
      return rows.length > 0 && rows.every((r) => r.getAttribute('data-action') === 'key.rolled');
    });
    expect(await owner.locator('#audit-table tbody tr').count()).toBe(1);
  });

  it('the viewer joins with the link at 390×844 and reads every page with nothing to change', async () => {
    viewerContext = await browser.newContext({ viewport: PHONE, locale: 'en-GB', timezoneId: 'UTC' });
    viewer = await viewerContext.newPage();
    watch(viewer, 'viewer');
    await viewer.goto(inviteLink);
    await heading(viewer, "Join the store's administrators").waitFor();
    await viewer.getByText(`You are invited as a viewer (read only), signing in as ${VIEWER}.`).waitFor();
    await checkPage(viewer, 'invitation page (390)');
    await shot(viewer, 'invitation-accept');
    await viewer.getByLabel(/^Password/).fill(VIEWER_PASSWORD);
    await viewer.getByLabel('Repeat password').fill(VIEWER_PASSWORD);
    await viewer.getByRole('button', { name: 'Create my account' }).click();
    await heading(viewer, 'Overview').waitFor();
    // On a phone the navigation is a closed menu: the page's title is in the top half of the first screen.
    const title = (await heading(viewer, 'Overview').boundingBox())!;
    expect(title.y + title.height).toBeLessThan(PHONE.height / 2);
    const menu = viewer.getByRole('button', { name: 'Menu' });
    expect(await menu.getAttribute('aria-expanded')).toBe('false');
    await menu.click();
    expect(await menu.getAttribute('aria-expanded')).toBe('true');
    await viewer.locator('.user-role', { hasText: 'Viewer (read only)' }).waitFor();
    await menu.click();
    for (const [hash, title] of [
      ['#/overview', 'Overview'],
      ['#/api-keys', 'API keys'],
      ['#/webhooks', 'Webhooks'],
      [`#/webhooks/${endpointId}`, null],
      ['#/deliveries', 'Deliveries'],
      ['#/audit-log', 'Audit log'],
      ['#/admins', 'Administrators'],
      ['#/account', 'Your account'],
    ] as const) {
      await viewer.evaluate((h) => {
        location.hash = h;
      }, hash);
      if (title) await heading(viewer, title).waitFor();
      else await viewer.locator('.page-title-url').waitFor();
      await viewer.waitForFunction(() => !document.querySelector('.loading-block'));
      expect(await viewer.locator('.requires-write:visible').count(), hash).toBe(0);
      expect(await viewer.getByRole('button', { name: /Create|Add endpoint|Revoke|Roll|Retry|Invite|Remove|Send ping|Rotate|Reveal|Copy/ }).count(), hash).toBe(
        0,
      );
      await checkPage(viewer, `viewer ${hash} (390)`);
    }
    // Joining by the link was a sign-in: the administrators page says when, not "Never".
    await viewer.evaluate(() => {
      location.hash = '#/admins';
    });
    const viewerRow = viewer.locator('#admins-table tbody tr', { hasText: VIEWER });
    // (On a phone the table scrolls sideways: the cell may be off screen, so attached, not visible.)
    await viewerRow.locator('td').nth(2).locator('time').waitFor({ state: 'attached' });
    await viewer.goto(`${server.url}/admin#/api-keys`);
    await heading(viewer, 'API keys').waitFor();
    await viewer.locator('#api-keys-table tbody tr').first().waitFor();
    // The closed phone menu is one bar even when the page is shorter than the window (the layout's
    // two rows once shared the spare height, stretching the bar into an empty dark band).
    expect((await viewer.locator('.sidebar').boundingBox())!.height).toBeLessThan(100);
    // The maker's address breaks after its @ only: each part stands on one line of the name column.
    const makerLines = await viewer
      .locator('#api-keys-table tbody tr .cell-maker')
      .first()
      .evaluate((el) =>
        Array.from(el.childNodes)
          .filter((n) => n.nodeType === Node.TEXT_NODE && n.textContent!.includes('example.com'))
          .map((n) => {
            const range = document.createRange();
            range.selectNodeContents(n);
            return new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top))).size;
          }),
      );
    expect(makerLines).toEqual([1]);
    await shot(viewer, 'api-keys-viewer-390');
    checks.provoking = true;
    const refused = await viewer.request.post(`${server.url}/admin/api/v1/tokens`, {
      data: { name: 'sneaky' },
      headers: { 'x-csrf-token': await csrfOf(viewer) },
    });
    checks.provoking = false;
    expect(refused.status()).toBe(403);
    expect(refused.headers()['content-type']).toContain('application/problem+json');
  });

  it('each role walks every page at the other size too, and dialogs fit a phone', async () => {
    await viewer.setViewportSize(DESKTOP);
    await owner.setViewportSize(PHONE);
    for (const [page, who] of [
      [viewer, 'viewer'],
      [owner, 'owner'],
    ] as const) {
      for (const hash of ['#/overview', '#/api-keys', '#/webhooks', `#/webhooks/${endpointId}`, '#/deliveries', '#/audit-log', '#/admins', '#/account']) {
        await page.evaluate((h) => {
          location.hash = h;
        }, hash);
        await page.locator('.page h1').waitFor();
        await page.waitForFunction(() => !document.querySelector('.loading-block'));
        await checkPage(page, `${who} ${hash} (${who === 'owner' ? 390 : 1280})`);
      }
    }
    await owner.evaluate(() => {
      location.hash = '#/api-keys';
    });
    await owner.getByRole('button', { name: 'Create API key' }).first().click();
    const dialog = owner.getByRole('dialog', { name: 'Create API key' });
    const box = (await dialog.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(PHONE.width);
    await checkPage(owner, 'create key dialog (390)');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await owner.setViewportSize(DESKTOP);
  });

  it("shows who made each key, and the owner transfers a maker's keys to another administrator in one step (decision 0026)", async () => {
    await owner.evaluate(() => {
      location.hash = '#/api-keys';
    });
    await heading(owner, 'API keys').waitFor();
    const row = owner.locator('#api-keys-table tbody tr', { hasText: 'ERP production' });
    await row.locator('.cell-maker', { hasText: OWNER }).waitFor();
    const makers = owner.locator('#api-key-makers-table tbody tr', { hasText: OWNER });
    await makers.waitFor();
    await checkPage(owner, 'api keys with makers (owner)');
    await makers.getByRole('button', { name: `Transfer the keys of ${OWNER}` }).click();
    const dialog = owner.getByRole('dialog', { name: `Transfer the keys of ${OWNER}` });
    await dialog.getByLabel('New maker').selectOption({ label: `${VIEWER} (viewer)` });
    await checkPage(owner, 'transfer keys dialog');
    await dialog.getByRole('button', { name: 'Transfer keys' }).click();
    await row.locator('.cell-maker', { hasText: VIEWER }).waitFor();
    await owner.locator('#api-key-makers-table tbody tr', { hasText: VIEWER }).waitFor();
    // The viewer's page has no makers card: transferring is an owner's.
    await viewer.evaluate(() => {
      location.hash = '#/api-keys';
    });
    await viewer.locator('#api-keys-table tbody tr', { hasText: 'ERP production' }).locator('.cell-maker', { hasText: VIEWER }).waitFor();
    expect(await viewer.locator('#api-key-makers-table').count()).toBe(0);
  });

  it('lists 200 keys in pages of 50 with a search, the table fitting 1280 px', async () => {
    await owner.setViewportSize(DESKTOP);
    const csrf = await csrfOf(owner);
    for (let i = 0; i < 200; i++) {
      const res = await owner.request.post(`${server.url}/admin/api/v1/tokens`, {
        data: { name: `Bulk key ${String(i).padStart(3, '0')}` },
        headers: { 'x-csrf-token': csrf },
      });
      expect(res.status(), await res.text()).toBe(201);
    }
    // The page may already be open (the previous test ends there): load it afresh.
    await navTo(owner, 'API keys');
    await owner.reload();
    await heading(owner, 'API keys').waitFor();
    const range = owner.locator('[data-role="key-range"]');
    await range.filter({ hasText: /^1–50 of \d+$/ }).waitFor();
    const total = Number((await range.textContent())!.split(' of ')[1]);
    expect(total).toBeGreaterThanOrEqual(200);
    expect(await owner.locator('#api-keys-table tbody tr').count()).toBe(50);
    // Fits 1280 px: nothing to scroll sideways, the last row's actions on screen.
    expect(await owner.evaluate(() => document.querySelector('.table-wrap')!.scrollWidth - document.querySelector('.table-wrap')!.clientWidth)).toBe(0);
    const revoke = owner
      .locator('#api-keys-table tbody tr')
      .last()
      .getByRole('button', { name: /^Revoke API key/ });
    const box = (await revoke.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(DESKTOP.width);
    await checkPage(owner, 'api keys, 200');
    await shot(owner, 'api-keys-200');
    // Next page; the focus stays on Next.
    await owner.getByRole('button', { name: 'Next' }).click();
    await range.filter({ hasText: `51–100 of ${total}` }).waitFor();
    await owner.waitForFunction(() => document.activeElement?.textContent?.trim() === 'Next');
    // The search narrows to one key (from the first page again), or says nothing matches.
    await owner.getByLabel('Search keys').fill('Bulk key 199');
    await owner.locator('#api-keys-table tbody tr').filter({ hasText: 'Bulk key 199' }).waitFor();
    expect(await owner.locator('#api-keys-table tbody tr').count()).toBe(1);
    expect(await range.count()).toBe(0);
    await owner.getByLabel('Search keys').fill('no key is called this');
    await owner.getByText('No key matches “no key is called this”.').waitFor();
  });

  it('logged no console error, found no axe violation and no sideways scrolling on any page shown', () => {
    expect(consoleErrors).toEqual([]);
    expect(a11yViolations).toEqual([]);
    expect(sidewaysScroll).toEqual([]);
  });

  it('says a wrong current password at its field, and changes the password with the right one', async () => {
    checks.provoking = true;
    await navTo(viewer, 'Your account');
    await viewer.getByLabel('Current password').fill('not my password');
    await viewer.getByLabel(/^New password/).fill('a newer viewer password');
    await viewer.getByLabel('Repeat the new password').fill('a newer viewer password');
    await viewer.getByRole('button', { name: 'Change password' }).click();
    await viewer.locator('[data-field="current_password"] .field-error', { hasText: 'is wrong' }).waitFor();
    await viewer.getByLabel('Current password').fill(VIEWER_PASSWORD);
    await viewer.getByLabel(/^New password/).fill('a newer viewer password');
    await viewer.getByLabel('Repeat the new password').fill('a newer viewer password');
    await viewer.getByRole('button', { name: 'Change password' }).click();
    await viewer.locator('.toast', { hasText: 'Your password is changed.' }).waitFor();
    await shot(viewer, 'account');
    checks.provoking = false;
  });

  it('clears error notifications on page change and at sign-out', async () => {
    checks.provoking = true;
    await navTo(owner, 'Administrators');
    const row = owner.locator('#invitations-table tbody tr', { hasText: 'nobody@example.com' });
    const csrf = await csrfOf(owner);
    await owner.request.post(`${server.url}/admin/api/v1/admins/invitations`, {
      data: { email: 'nobody@example.com', role: 'viewer' },
      headers: { 'x-csrf-token': csrf },
    });
    await owner.reload();
    await row.waitFor();
    const invitations = await (await owner.request.get(`${server.url}/admin/api/v1/admins/invitations`)).json();
    const id = invitations.data.find((i: { email: string }) => i.email === 'nobody@example.com').id;
    // Withdrawn elsewhere meanwhile: the button's answer is an error.
    await owner.request.delete(`${server.url}/admin/api/v1/admins/invitations/${id}`, { headers: { 'x-csrf-token': csrf } });
    await row.getByRole('button', { name: /Withdraw/ }).click();
    await owner.locator('#toasts .toast-error').waitFor();
    await navTo(owner, 'Overview');
    await heading(owner, 'Overview').waitFor();
    expect(await owner.locator('#toasts .toast-error').count()).toBe(0);

    await navTo(owner, 'Administrators');
    await owner.getByRole('button', { name: 'Invite administrator' }).waitFor();
    await owner.request.post(`${server.url}/admin/api/v1/admins/invitations`, {
      data: { email: 'nobody@example.com', role: 'viewer' },
      headers: { 'x-csrf-token': csrf },
    });
    await owner.reload();
    await row.waitFor();
    const again = (await (await owner.request.get(`${server.url}/admin/api/v1/admins/invitations`)).json()).data.find(
      (i: { email: string }) => i.email === 'nobody@example.com',
    ).id;
    await owner.request.delete(`${server.url}/admin/api/v1/admins/invitations/${again}`, { headers: { 'x-csrf-token': csrf } });
    await row.getByRole('button', { name: /Withdraw/ }).click();
    await owner.locator('#toasts .toast-error').waitFor();
    await owner.getByRole('button', { name: 'Sign out' }).click();
    await owner.getByRole('button', { name: 'Sign in', exact: true }).waitFor();
    expect(await owner.locator('#toasts .toast-error').count()).toBe(0);
    checks.provoking = false;
  });

  it('says how long to wait in words after too many failed sign-ins', async () => {
    checks.provoking = true;
    for (let i = 0; i < 3; i++) {
      await owner.getByLabel('Email').fill('someone@example.com');
      await owner.getByLabel('Password').fill('wrong password number');
      await owner.getByRole('button', { name: 'Sign in', exact: true }).click();
      await owner.locator('.form-error').filter({ hasText: /\S/ }).waitFor();
      if (i < 2) await owner.locator('.form-error', { hasText: 'Wrong email or password.' }).waitFor();
    }
    const text = (await owner.locator('.form-error').textContent())!;
    expect(text).toMatch(/^Too many failed sign-ins\. Try again in about 15 minutes \(at \d\d:\d\d\)\.$/);
    expect(text).not.toMatch(/\d+ seconds/);
    checks.provoking = false;
  });

  it('removing the viewer ends their session at once', async () => {
    await owner.getByLabel('Email').fill(OWNER);
    await owner.getByLabel('Password').fill(OWNER_PASSWORD);
    await owner.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading(owner, 'Overview').waitFor();
    await navTo(owner, 'Administrators');
    await owner.getByRole('button', { name: `Remove ${VIEWER}` }).click();
    await owner.getByRole('dialog', { name: 'Remove this administrator?' }).getByRole('button', { name: 'Remove administrator' }).click();
    await owner.locator('#admins-table tbody tr', { hasText: VIEWER }).waitFor({ state: 'detached' });
    checks.provoking = true;
    const ended = viewer.getByText('Your session has ended. Sign in again to continue.');
    // The viewer's next request is refused: the page they open, or the navigation's alerts refresh
    // (every 15 s) when it comes first, and then there is no navigation left to click.
    const deliveries = viewer.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Deliveries', exact: true });
    await deliveries.click({ timeout: 10_000 }).catch(async (err: unknown) => {
      if (!(await ended.isVisible())) throw err;
    });
    await ended.waitFor();
    // Every request of the page left behind has been answered (401): none left an error toast.
    await viewer.waitForLoadState('networkidle');
    expect(await viewer.locator('.toast-error').count()).toBe(0);
    checks.provoking = false;
  });
});
