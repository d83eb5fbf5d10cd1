/**
 * The dashboard end to end, in Chromium: the first administrator is created with the one-time
 * setup link printed at start (a wrong, an expired and a reused link each show a clear page), sign
 * in, create an API key and read the API with it,
 * register a webhook endpoint on a loopback receiver, ping it, watch a failing endpoint's
 * deliveries go dead (retry schedule scaled to 200 ms) and retry them from the page — one, a
 * selection, all dead letters — then revoke the key (the API answers 401) and sign out. No console
 * error may appear on the way. Screenshots of each page go to docs/screenshots/ when
 * UPDATE_SCREENSHOTS=1.
 *
 * Needs Debian's Chromium at /usr/bin/chromium (.ci/run installs it); skipped with a message when
 * it is missing. Runs on the embedded database only: the server is a child process on a temporary
 * DATA_DIR.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { CHROMIUM, REPO_ROOT, WebhookReceiver, hasChromium, startServer, type RunningServer } from './dashboard-harness.ts';
import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database.ts';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** axe-core, evaluated in the page by the test (not loaded by the dashboard, whose CSP would refuse it). */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const ADMIN_EMAIL = 'admin@example.com';
const ADMIN_PASSWORD = 'correct horse battery staple';
// Screenshots refresh the docs only when asked (UPDATE_SCREENSHOTS=1), so an ordinary test run
// leaves the work tree clean; otherwise they go to a scratch folder and are still taken (and so
// still exercise every page).
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? join(REPO_ROOT, 'docs', 'screenshots') : join(tmpdir(), `store-api-screenshots-${process.pid}`);
const LONG = 30_000;

if (!hasChromium) {
  console.warn(`Dashboard browser tests SKIPPED: ${CHROMIUM} is missing. Install it with: apt-get install -y chromium`);
}

describe.skipIf(!hasChromium)('admin dashboard in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  let startOutput: string;
  const receiver = new WebhookReceiver();
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const consoleErrors: string[] = [];
  let apiKey = '';
  let okEndpointId = '';
  let okSecret = '';
  let flakyEndpointId = '';
  let setupLink = '';
  let expiredCode = '';
  const setupLinkIn = (output: string) => /(http:\/\/[^\s"]+\/admin#\/setup\?code=[\w-]+)["\n]/.exec(output)![1]!;

  const a11yViolations: string[] = [];
  /** Runs axe (WCAG 2 A and AA rules) on the page as it is now and records any violation. */
  const checkA11y = async (where: string) => {
    await page.evaluate(AXE_SOURCE);
    const found = await page.evaluate(async () => {
      const axe = (
        window as unknown as {
          axe: {
            run(
              ctx: Document,
              options: object,
            ): Promise<{ violations: Array<{ id: string; impact: string; help: string; nodes: Array<{ target: string[] }> }> }>;
          };
        }
      ).axe;
      const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
      return result.violations.map(
        (v) =>
          `${v.impact} ${v.id}: ${v.help} (${v.nodes
            .map((n) => n.target.join(' '))
            .slice(0, 3)
            .join(', ')})`,
      );
    });
    a11yViolations.push(...found.map((v) => `${where}: ${v}`));
  };

  /** Saves a screenshot for the docs, after dismissing notifications (with their own buttons). */
  const shot = async (name: string, { fullPage = false } = {}) => {
    // With a modal dialog open only its own notifications can be reached (the rest is inert).
    const scope = (await page.locator('dialog[open]').count()) > 0 ? page.locator('dialog[open]') : page.locator('#toasts');
    const dismiss = scope.getByRole('button', { name: 'Dismiss notification' });
    // A notification may also leave on its own timer meanwhile, hence the re-count and the short click timeout.
    for (let i = 0; i < 20 && (await dismiss.count()) > 0; i++)
      await dismiss
        .first()
        .click({ timeout: 2000 })
        .catch(() => {});
    await page.evaluate(() => document.querySelector('#main')?.scrollTo(0, 0));
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), animations: 'disabled', fullPage });
    await checkA11y(name);
  };
  const navTo = (name: string) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();
  const heading = (name: string) => page.getByRole('heading', { level: 1, name, exact: true });
  const toastSaying = (text: string | RegExp) => page.locator('.toasts .toast', { hasText: text });
  const readApi = (token: string) => fetch(`${server.url}/api/v1/products?limit=1`, { headers: { authorization: `Bearer ${token}` } });

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-dashboard-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    const env = {
      DATA_DIR: dataDir,
      SEED_DEMO: 'true',
      SEED_DEMO_PRODUCTS: '24',
      WEBHOOK_RETRY_SCHEDULE_MS: '200,200,200,200,200',
      WEBHOOK_POLL_INTERVAL_MS: '50',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_CREDENTIALS_KEY: Buffer.alloc(32, 7).toString('base64'),
      // Three dead pings are 18 failed attempts in a row: the last one trips the circuit breaker.
      WEBHOOK_BREAKER_THRESHOLD: '18',
      // Revealing the secret asks a fresh proof once the sign-in is older than this (decision 0028,
      // tested in second-factor.browser.test.ts): a slow run must not meet that dialog here.
      ADMIN_REAUTH_WINDOW_MS: '3600000',
    };
    await receiver.start();
    // No administrator yet: the first start prints a setup link. Let it expire (the server stopped,
    // its data directory's expiry moved to the past), then start again for a fresh one. Ready once
    // the link is printed (right after it listens).
    const first = await startServer(env, /#\/setup\?code=[\w-]+["\n]/);
    expiredCode = new URL(setupLinkIn(first.output())).hash.split('code=')[1]!;
    await first.stop();
    const database = await openDatabase({ dataDir });
    await database.db.updateTable('admin_setup_codes').set({ expires_at: sql<string>`now() - interval '1 minute'` }).execute();
    await database.close();
    server = await startServer(env, /#\/setup\?code=[\w-]+["\n]/);
    startOutput = server.output();
    setupLink = setupLinkIn(startOutput);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    page = await context.newPage();
    page.setDefaultTimeout(LONG);
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(`${message.text()} (${message.location().url})`);
    });
    page.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await receiver.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('says at start where the dashboard is, with a one-time setup link while there is no administrator', () => {
    expect(startOutput).toContain(`Admin dashboard: ${server.url}/admin`);
    expect(startOutput).toContain('No administrator exists yet');
    expect(setupLink.startsWith(`${server.url}/admin#/setup?code=`)).toBe(true);
    expect(setupLink).not.toContain(expiredCode);
  });

  it('creates the first administrator through the setup link; wrong, expired and reused links show a clear page', async () => {
    // A separate browser context: the main page signs in with the new administrator afterwards.
    const setupContext = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' });
    const setupPage = await setupContext.newPage();
    setupPage.setDefaultTimeout(LONG);
    setupPage.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
    const refusal = setupPage.getByRole('heading', { level: 1, name: 'This setup link cannot be used' });
    const alert = setupPage.getByRole('alert');
    // A full page load each time (a goto that only changes the fragment would keep the old page).
    const openFresh = async (url: string) => {
      await setupPage.goto('about:blank');
      await setupPage.goto(url);
    };
    try {
      await openFresh(`${server.url}/admin#/setup?code=not-the-code`);
      await refusal.waitFor();
      await alert.filter({ hasText: 'not valid' }).waitFor();

      await openFresh(`${server.url}/admin#/setup?code=${expiredCode}`);
      await refusal.waitFor();
      await alert.filter({ hasText: 'expired' }).waitFor();

      await openFresh(setupLink);
      await setupPage.getByRole('heading', { level: 1, name: 'Create the first administrator' }).waitFor();
      await setupPage.getByLabel('Email').fill(ADMIN_EMAIL);
      await setupPage.getByLabel(/^Password/).fill(ADMIN_PASSWORD);
      await setupPage.getByLabel('Repeat password').fill(ADMIN_PASSWORD);
      await setupPage.getByRole('button', { name: 'Create administrator' }).click();
      // Signed in at once, on the overview, without a restart.
      await setupPage.getByRole('heading', { level: 1, name: 'Overview', exact: true }).waitFor();
      expect((await setupContext.cookies()).some((c) => c.name === 'store_admin_session' && c.httpOnly)).toBe(true);

      // The same link again, from a browser that is not signed in: used.
      await setupContext.clearCookies();
      await openFresh(setupLink);
      await refusal.waitFor();
      await alert.filter({ hasText: 'already been used' }).waitFor();
      const body = await setupPage.locator('body').textContent();
      expect(body).not.toMatch(/Error:|at \w+ \(|stack/i);
      await setupPage.getByRole('link', { name: 'Go to sign-in' }).click();
      await setupPage.getByRole('button', { name: 'Sign in', exact: true }).waitFor();
    } finally {
      await setupContext.close();
    }
  });

  it('signs in', async () => {
    await page.goto(`${server.url}/admin`);
    await page.getByLabel('Email').waitFor();
    await shot('sign-in');
    await page.getByLabel('Email').fill(ADMIN_EMAIL);
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading('Overview').waitFor();
    await page.locator('.stat-value').first().waitFor();
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'store_admin_session');
    expect(session?.httpOnly).toBe(true);
    expect(session?.sameSite).toBe('Lax');
  });

  it('creates an API key, shown once with a working copy button, and the key reads the API', async () => {
    await navTo('API keys');
    await heading('API keys').waitFor();
    await page.getByRole('button', { name: 'Create API key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create API key' });
    await dialog.getByLabel('Name').fill('ERP production');
    await expect(dialog.getByLabel(/Products/).isChecked()).resolves.toBe(true);
    await expect(dialog.getByLabel(/Admin/).isChecked()).resolves.toBe(false);
    await dialog.getByRole('button', { name: 'Create key' }).click();

    const created = page.getByRole('dialog', { name: 'API key created' });
    const secret = created.getByLabel('The new API key');
    await secret.waitFor();
    // Focus is on the key shown (selected, ready to copy), not lost behind the dialog.
    await page.waitForFunction(() => document.activeElement?.getAttribute('aria-label') === 'The new API key');
    apiKey = await secret.inputValue();
    expect(apiKey).toMatch(/^sia_[A-Za-z0-9_-]{43}$/);
    await created.getByRole('button', { name: 'Copy' }).click();
    await toastSaying('Copied to the clipboard.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(apiKey);
    await shot('api-key-created');
    await created.getByRole('button', { name: 'Done' }).click();

    const row = page.locator('#api-keys-table tbody tr', { hasText: 'ERP production' });
    await row.waitFor();
    // Done: focus goes to the new key's row, not to the page's body.
    await page.waitForFunction(() => document.activeElement?.closest('tr')?.textContent?.includes('ERP production') === true);
    expect(await row.textContent()).toContain(apiKey.slice(0, 12));
    expect(await row.textContent()).not.toContain(apiKey);
    await shot('api-keys');

    expect((await readApi(apiKey)).status).toBe(200);
  });

  it('registers a webhook endpoint on a loopback receiver and delivers a signed ping', async () => {
    await navTo('Webhooks');
    await heading('Webhooks').waitFor();
    await page.getByRole('button', { name: 'Add endpoint' }).first().click();
    const form = page.getByRole('dialog', { name: 'Add webhook endpoint' });
    await form.getByLabel('Endpoint URL').fill(`${receiver.url}/hooks/erp`);
    await form.getByLabel('Description').fill('ERP order sync');
    await form.getByLabel('Only selected events').check();
    await form.getByLabel('order.created').check();
    await form.getByLabel('order.updated').check();
    await form.getByLabel('product.updated').check();
    // A gateway header (decision 0058): sent with every request, never shown again.
    await form.getByLabel('Extra headers').fill('X-Gateway-Key: dashboard-gateway-key');
    await shot('webhook-endpoint-form');
    await form.getByRole('button', { name: 'Add endpoint' }).click();

    const added = page.getByRole('dialog', { name: 'Endpoint added' });
    okSecret = await added.getByLabel('Signing secret').inputValue();
    expect(okSecret).toMatch(/^whsec_/);
    await added.getByRole('button', { name: 'Open endpoint' }).click();
    await page.waitForURL(/#\/webhooks\/[0-9a-f-]{36}$/);
    okEndpointId = page.url().split('/').pop()!;
    await page.getByRole('heading', { level: 1, name: `${receiver.url}/hooks/erp` }).waitFor();

    await page.getByRole('button', { name: 'Reveal' }).click();
    await page.locator('.secret-value', { hasText: okSecret }).waitFor();

    const pinged = receiver.next((r) => r.path === '/hooks/erp' && r.json.type === 'ping');
    await page.getByRole('button', { name: 'Send ping' }).click();
    const ping = await pinged;
    // The receiver can verify it with the public standardwebhooks library and the secret shown.
    expect(() => new Webhook(okSecret).verify(ping.body, ping.headers as Record<string, string>)).not.toThrow();
    expect(ping.headers['webhook-id']).toBe(ping.json.id);
    expect(ping.headers['x-gateway-key']).toBe('dashboard-gateway-key');

    await page.locator('.deliveries-panel tbody tr[data-status="succeeded"]').waitFor();

    // Rotate the secret: the new one is shown, and the old one still signs for the overlap period.
    await page.getByRole('button', { name: 'Rotate…' }).click();
    await page.getByRole('dialog', { name: 'Rotate the signing secret?' }).getByRole('button', { name: 'Rotate secret' }).click();
    await page.locator('.card-note', { hasText: 'The previous secret also signs deliveries until' }).waitFor();
    const rotatedSecret = (await page.locator('.secret-value').textContent())!;
    expect(rotatedSecret).toMatch(/^whsec_/);
    expect(rotatedSecret).not.toBe(okSecret);
    const pingedAgain = receiver.next((r) => r.path === '/hooks/erp' && r.json.type === 'ping' && r.json.id !== ping.json.id);
    await page.getByRole('button', { name: 'Send ping' }).click();
    const second = await pingedAgain;
    for (const secret of [rotatedSecret, okSecret]) {
      expect(() => new Webhook(secret).verify(second.body, second.headers as Record<string, string>)).not.toThrow();
    }
    await page.waitForFunction(() => document.querySelectorAll('.deliveries-panel tbody tr[data-status="succeeded"]').length === 2);
    await shot('webhook-endpoint');

    await navTo('Webhooks');
    await page.locator('#endpoints-table tbody tr', { hasText: '/hooks/erp' }).locator('.destination-kind', { hasText: 'HTTPS' }).waitFor();
  });

  it("shows a failing endpoint's deliveries going dead and retries them: one, the selected, all dead letters", async () => {
    receiver.answer('/hooks/flaky', 500);
    await page.getByRole('button', { name: 'Add endpoint' }).first().click();
    const form = page.getByRole('dialog', { name: 'Add webhook endpoint' });
    await form.getByLabel('Endpoint URL').fill(`${receiver.url}/hooks/flaky`);
    await form.getByLabel('Description').fill('Warehouse (flaky)');
    await form.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByRole('dialog', { name: 'Endpoint added' }).getByRole('button', { name: 'Open endpoint' }).click();
    await page.waitForURL(/#\/webhooks\/[0-9a-f-]{36}$/);
    flakyEndpointId = page.url().split('/').pop()!;
    expect(flakyEndpointId).not.toBe(okEndpointId);

    // Three pings, each failing its first attempt and all five retries (200 ms apart).
    const sendPing = page.getByRole('button', { name: 'Send ping' });
    for (let i = 0; i < 3; i++) {
      const accepted = page.waitForResponse((r) => r.url().endsWith(`/webhooks/endpoints/${flakyEndpointId}/ping`) && r.status() === 202);
      await sendPing.click();
      await accepted;
    }
    const deadRows = page.locator('.deliveries-panel tbody tr[data-status="dead"]');
    await page.waitForFunction(() => document.querySelectorAll('.deliveries-panel tbody tr[data-status="dead"]').length === 3, undefined, { timeout: LONG });
    expect(await deadRows.count()).toBe(3);
    expect(receiver.requests.filter((r) => r.path === '/hooks/flaky' && r.answered === 500)).toHaveLength(18);

    // The 18th failure in a row paused the endpoint; the list says until when, its page lets us resume it.
    await navTo('Webhooks');
    const flakyRow = page.locator('#endpoints-table tbody tr', { hasText: '/hooks/flaky' });
    await flakyRow.locator('.badge', { hasText: /^Paused until \d\d:\d\d$/ }).waitFor();
    await page.locator('#endpoints-table tbody tr', { hasText: '/hooks/erp' }).locator('.badge', { hasText: 'Active' }).waitFor();
    await shot('webhooks');
    await flakyRow.getByRole('link').click();
    await page.locator('.callout', { hasText: 'Paused by the circuit breaker until' }).waitFor();
    await page.getByRole('button', { name: 'Resume now' }).click();
    await page.locator('.page-title-line .badge', { hasText: 'Active' }).waitFor();

    // The Deliveries page, filtered to this endpoint's dead letters.
    await navTo('Deliveries');
    await heading('Deliveries').waitFor();
    await page.getByLabel('Endpoint').selectOption(flakyEndpointId);
    await page.locator('label.segmented-label', { hasText: 'Dead' }).click();
    await page.waitForURL(new RegExp(`#/deliveries\\?endpoint_id=${flakyEndpointId}&status=dead$`));
    await page.waitForFunction(() => document.querySelectorAll('.deliveries-panel tbody tr[data-status="dead"]').length === 3);
    await shot('deliveries');

    // One: from its own page, after the receiver is fixed.
    receiver.answer('/hooks/flaky', 200);
    await page.locator('.deliveries-panel tbody tr').first().locator('a.delivery-link').click();
    await page.getByRole('heading', { name: /^Attempts \(6\)$/ }).waitFor();
    const attempts = page.locator('.table-attempts tbody tr');
    expect(await attempts.count()).toBe(6);
    expect(await attempts.first().textContent()).toContain('500');
    await page.locator('.table-attempts details').first().click();
    await page.locator('.table-attempts pre', { hasText: 'receiver is failing on purpose' }).first().waitFor();
    const eventId = (await page.locator('dt:text("Event id") + dd code').textContent())!;
    expect(await page.locator('.payload').textContent()).toContain(`"id": "${eventId}"`);
    // What each attempt sent and what came back.
    await page
      .locator('.table-attempts summary', { hasText: /^Request headers \(\d+\)$/ })
      .first()
      .click();
    await page
      .locator('.table-attempts pre', { hasText: `webhook-id: ${eventId}` })
      .first()
      .waitFor();
    await page
      .locator('.table-attempts summary', { hasText: /^Response headers \(\d+\)$/ })
      .first()
      .click();
    await page
      .locator('.table-attempts pre', { hasText: /date: .+ GMT/ })
      .first()
      .waitFor();
    await shot('delivery', { fullPage: true });
    const firstArrived = receiver.next((r) => r.path === '/hooks/flaky' && r.headers['webhook-id'] === eventId, { status: 200 });
    await page.getByRole('button', { name: 'Retry now' }).click();
    await firstArrived;
    await page.locator('.page-title-line .badge', { hasText: 'Succeeded' }).waitFor();

    // The selected: one of the two remaining dead letters.
    await page.goBack();
    await heading('Deliveries').waitFor();
    await page.waitForFunction(() => document.querySelectorAll('.deliveries-panel tbody tr[data-status="dead"]').length === 2);
    const selectedRow = page.locator('.deliveries-panel tbody tr[data-status="dead"]').first();
    const selectedId = (await selectedRow.getAttribute('data-delivery-id'))!;
    await selectedRow.getByRole('checkbox').check();
    const selectedArrived = receiver.next((r) => r.path === '/hooks/flaky' && r.json.type === 'ping' && r.headers['webhook-id'] !== eventId, { status: 200 });
    await page.getByRole('button', { name: 'Retry selected (1)' }).click();
    await toastSaying('Queued 1 delivery for another attempt.').waitFor();
    const second = await selectedArrived;
    await page.waitForFunction((id) => !document.querySelector(`.deliveries-panel tbody tr[data-delivery-id="${id}"]`), selectedId);

    // All dead letters of the endpoint: the last one.
    const arrivedBefore = receiver.requests.filter((r) => r.path === '/hooks/flaky' && r.answered === 200).length;
    const lastArrived = receiver.next(
      (r) => r.path === '/hooks/flaky' && r.answered === 200 && r.headers['webhook-id'] !== eventId && r.headers['webhook-id'] !== second.headers['webhook-id'],
    );
    await page.getByRole('button', { name: 'Retry all dead letters' }).click();
    await page.getByRole('dialog', { name: 'Retry all dead letters?' }).getByRole('button', { name: 'Retry all' }).click();
    await toastSaying('Queued 1 dead letter for another attempt.').waitFor();
    await lastArrived;
    expect(receiver.requests.filter((r) => r.path === '/hooks/flaky' && r.answered === 200).length).toBeGreaterThanOrEqual(arrivedBefore + 1);
    await page.locator('.deliveries-panel .empty-state', { hasText: 'No dead deliveries' }).waitFor();

    // Disable the endpoint (after confirming); the list shows it disabled.
    await navTo('Webhooks');
    await page.locator('#endpoints-table tbody tr', { hasText: '/hooks/flaky' }).getByRole('link').click();
    await page.getByRole('button', { name: 'Disable' }).click();
    await page.getByRole('dialog', { name: 'Disable this endpoint?' }).getByRole('button', { name: 'Disable endpoint' }).click();
    await page.locator('.page-title-line .badge', { hasText: 'Disabled' }).waitFor();
    // Focus moves to Enable once the dialog has closed (the page redraws first): wait for it, never past a timeout.
    await page.waitForFunction(() => document.activeElement?.textContent?.trim() === 'Enable', undefined, { timeout: 10_000 });
    // A disabled endpoint is sent nothing (the API refuses both with 409): neither a ping nor a test event is offered.
    expect(await page.getByRole('button', { name: /Send ping|Send test event/ }).count()).toBe(0);
    await navTo('Webhooks');
    await page.locator('#endpoints-table tbody tr', { hasText: '/hooks/flaky' }).locator('.badge', { hasText: 'Disabled' }).waitFor();
  });

  it('shows the store counts and the deliveries of the last 24 hours on the overview', async () => {
    await navTo('Overview');
    await heading('Overview').waitFor();
    await page.locator('.chart .bar-succeeded').first().waitFor();
    expect(await page.locator('.stat-card', { hasText: 'Products' }).locator('.stat-value').textContent()).not.toBe('0');
    // 3 pings × 6 failed attempts, then 1 + 3 successful deliveries; the 3 dead letters were all retried.
    expect(Number(await page.locator('.legend-value[data-series="failed"]').textContent())).toBeGreaterThanOrEqual(18);
    expect(Number(await page.locator('.legend-value[data-series="succeeded"]').textContent())).toBeGreaterThanOrEqual(4);
    expect(await page.locator('[data-now="dead"]').textContent()).toBe('0');
    // How far back delivery history goes (retention).
    expect(await page.locator('[data-retention]').textContent()).toMatch(
      /^History goes back to .+\. Succeeded deliveries are kept 30 days, dead letters 90 days unless retried, events 30 days\.$/,
    );
    await page.locator('.endpoint-mini-list li').first().waitFor();
    await shot('overview');
  });

  it('adds an AMQP endpoint: list and page say AMQP, the password is never shown, saving the edit form keeps it', async () => {
    const url = 'amqp://erp:Br0ker-Pa55@127.0.0.1:5672/erp?exchange=store-events';
    const shown = 'amqp://erp:****@127.0.0.1:5672/erp?exchange=store-events';
    await navTo('Webhooks');
    await page.getByRole('button', { name: 'Add endpoint' }).first().click();
    const form = page.getByRole('dialog', { name: 'Add webhook endpoint' });
    await form.getByLabel('Endpoint URL').fill(url);
    await form.getByLabel('Only selected events').check();
    await form.getByLabel('customer.created').check();
    await form.getByRole('button', { name: 'Add endpoint' }).click();
    const added = page.getByRole('dialog', { name: 'Endpoint added' });
    await added.locator('code', { hasText: shown }).waitFor();
    await added.getByRole('button', { name: 'Open endpoint' }).click();
    await page.getByRole('heading', { level: 1, name: shown }).waitFor();
    await page.locator('.page-title-line .destination-kind', { hasText: 'AMQP' }).waitFor();
    const id = page.url().split('/').pop()!;
    // The edit form shows the URL as the API does; saved unchanged, the stored password stays.
    await page.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('dialog', { name: 'Edit endpoint' });
    expect(await edit.getByLabel('Endpoint URL').inputValue()).toBe(shown);
    await edit.getByLabel('Description').fill('ERP bus');
    const saved = page.waitForResponse((r) => r.url().endsWith(`/webhooks/endpoints/${id}`) && r.request().method() === 'PATCH');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    expect(JSON.parse((await saved).request().postData()!)).not.toHaveProperty('url');
    await toastSaying('Endpoint saved.').waitFor();
    expect(await page.content()).not.toContain('Br0ker-Pa55');
    await navTo('Webhooks');
    const row = page.locator('#endpoints-table tbody tr', { hasText: shown });
    await row.locator('.destination-kind', { hasText: 'AMQP' }).waitFor();
    expect(await page.content()).not.toContain('Br0ker-Pa55');
  });

  it('adds a FIFO endpoint with its batch size; the edit form shows both and refuses a batch size out of range', async () => {
    await navTo('Webhooks');
    await page.getByRole('button', { name: 'Add endpoint' }).first().click();
    const form = page.getByRole('dialog', { name: 'Add webhook endpoint' });
    await form.getByLabel('Endpoint URL').fill('https://erp.example.com/hooks/in-order');
    // Batch size is asked for FIFO endpoints only.
    expect(await form.getByLabel('Batch size').isVisible()).toBe(false);
    await form.getByLabel('Delivery order').selectOption('fifo');
    await form.getByLabel('Batch size').fill('20');
    const created = page.waitForResponse((r) => r.url().endsWith('/webhooks/endpoints') && r.request().method() === 'POST');
    await form.getByRole('button', { name: 'Add endpoint' }).click();
    expect((await (await created).json()).data).toMatchObject({ delivery_order: 'fifo', batch_size: 20 });
    const added = page.getByRole('dialog', { name: 'Endpoint added' });
    await added.getByRole('button', { name: 'Open endpoint' }).click();
    await page.getByRole('heading', { level: 1, name: 'https://erp.example.com/hooks/in-order' }).waitFor();
    const id = page.url().split('/').pop()!;
    await page.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('dialog', { name: 'Edit endpoint' });
    expect(await edit.getByLabel('Delivery order').inputValue()).toBe('fifo');
    expect(await edit.getByLabel('Batch size').inputValue()).toBe('20');
    await edit.getByLabel('Batch size').fill('501');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await edit.locator('.field-error', { hasText: 'Enter a whole number from 1 to 500.' }).waitFor();
    await edit.getByLabel('Batch size').fill('30');
    const saved = page.waitForResponse((r) => r.url().endsWith(`/webhooks/endpoints/${id}`) && r.request().method() === 'PATCH');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    expect((await (await saved).json()).data).toMatchObject({ delivery_order: 'fifo', batch_size: 30 });
    await edit.waitFor({ state: 'detached' });
    // Back to unordered: the batch size is no longer asked for, and not sent.
    await page.getByRole('button', { name: 'Edit' }).click();
    const again = page.getByRole('dialog', { name: 'Edit endpoint' });
    await again.getByLabel('Delivery order').selectOption('unordered');
    expect(await again.getByLabel('Batch size').isVisible()).toBe(false);
    const unordered = page.waitForResponse((r) => r.url().endsWith(`/webhooks/endpoints/${id}`) && r.request().method() === 'PATCH');
    await again.getByRole('button', { name: 'Save changes' }).click();
    const response = await unordered;
    expect(JSON.parse(response.request().postData()!)).not.toHaveProperty('batch_size');
    expect((await response.json()).data).toMatchObject({ delivery_order: 'unordered' });
    await again.waitFor({ state: 'detached' });
  });

  it('revokes the API key after confirmation; the read API then answers 401', async () => {
    await navTo('API keys');
    const row = page.locator('#api-keys-table tbody tr', { hasText: 'ERP production' });
    await row.getByRole('button', { name: 'Revoke API key ERP production' }).click();
    const confirm = page.getByRole('dialog', { name: 'Revoke API key?' });
    // The safe choice has the focus.
    await expect(confirm.getByRole('button', { name: 'Cancel' }).evaluate((b) => b === document.activeElement)).resolves.toBe(true);
    await confirm.getByRole('button', { name: 'Revoke key' }).click();
    // Revoked keys are hidden until asked for.
    await row.waitFor({ state: 'detached' });
    await page.getByRole('link', { name: /^Show revoked and expired/ }).click();
    await row.locator('.badge', { hasText: 'Revoked' }).waitFor();
    expect((await readApi(apiKey)).status).toBe(401);
  });

  it('signs out, after which the session cookie no longer opens the admin API', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    const res = await context.request.get(`${server.url}/admin/api/v1/tokens`);
    expect(res.status()).toBe(401);
  });

  it('logged no console error on the way', () => {
    expect(consoleErrors).toEqual([]);
  });

  it('has no WCAG 2.1 A/AA violations that axe can find on any page shown', () => {
    expect(a11yViolations).toEqual([]);
  });

  // After the console check on purpose: Chromium logs every 401 answer as a console error.
  it('refuses a wrong password, and sends a page whose session ended back to sign-in, then to the same page', async () => {
    await page.getByLabel('Email').fill(ADMIN_EMAIL);
    await page.getByLabel('Password').fill('not the password at all');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor();
    await expect(page.getByLabel('Password').evaluate((input) => input === document.activeElement && (input as HTMLInputElement).value === '')).resolves.toBe(
      true,
    );

    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading('Overview').waitFor();
    await navTo('Webhooks');
    await heading('Webhooks').waitFor();

    // The session ends elsewhere (signed out from another tab, or expired).
    const { data } = await (await context.request.get(`${server.url}/admin/session`)).json();
    expect((await context.request.delete(`${server.url}/admin/session`, { headers: { 'x-csrf-token': data.csrf_token } })).status()).toBe(204);

    // The next request meets the 401: the page opened, or the navigation's alerts refresh (every
    // 15 s) when it comes first; then the admin returns to the page they were on.
    const ended = page.getByText('Your session has ended. Sign in again to continue.');
    const returnTo = await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Deliveries', exact: true })
      .click({ timeout: 10_000 })
      .then(
        () => 'Deliveries',
        async (err: unknown) => {
          if (await ended.isVisible()) return 'Webhooks';
          throw err;
        },
      );
    await ended.waitFor();
    await page.getByLabel('Email').fill(ADMIN_EMAIL);
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading(returnTo).waitFor();
    expect(page.url()).toMatch(new RegExp(`#/${returnTo.toLowerCase()}$`));
  });
});
