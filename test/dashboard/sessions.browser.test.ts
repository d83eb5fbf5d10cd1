/**
 * Sessions you can see and end, and the dashboard defects found from outside, in Chromium (decision
 * 0061). A store with many long-named API keys made by administrators with long addresses: the
 * owner (1280×800) sees her sessions on Your account (device, address, started, last used, this one
 * marked), ends another device's session and then all others, and ends every session of another
 * administrator from the administrators page; each ending asks for the fresh proof once it is stale
 * (ADMIN_REAUTH_WINDOW_MS at its floor, awaited by polling the service, never by a fixed sleep).
 *
 * Defects, each failing before its fix: the API keys and administrators tables fit their box at
 * 1280 px (Roll, Revoke and Remove on screen); a viewer gets no selection checkboxes on dead
 * deliveries; cancelling the proof dialog leaves no API text on the create-key form; search inputs
 * are as high as the selects beside them; the audit log's Who box lines up with its neighbours; a
 * removed administrator who clicks an action lands on Sign in without a stale error toast; axe finds
 * nothing on the sign-in page and the 404 page at 390 px.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, REPO_ROOT, WebhookReceiver, hasChromium, pageChecks, runCli, startServer, type RunningServer } from './dashboard-harness.ts';

const OWNER = 'owner@example.com';
const PASSWORD = 'correct horse battery staple';
/** Makers with long addresses, as a real store has them. */
const LONG_ADMIN = 'integration-platform-maintenance-team@fulfilment-operations.example.com';
const OTHER_ADMIN = 'regional-warehouse-coordinator-north-east@fulfilment-operations.example.com';
const VIEWER = 'quarterly-reporting-and-reconciliation-viewer@finance-department.example.com';
const KEYS = 200;
const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1';
const SCREENSHOTS =
  process.env.UPDATE_SCREENSHOTS === '1' ? join(REPO_ROOT, 'docs', 'screenshots') : join(tmpdir(), `store-api-screenshots-sessions-${process.pid}`);
const LONG = 30_000;
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const NO_SESSION = '00000000-0000-4000-8000-000000000000';

/** A session made outside the browser (cookie and CSRF token), for setting the store up. */
interface Caller {
  cookie: string;
  csrf: string;
}

describe.skipIf(!hasChromium)('sessions and dashboard defects in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  const receiver = new WebhookReceiver();
  let browser: Browser;
  let ownerContext: BrowserContext;
  let owner: Page;
  const contexts: BrowserContext[] = [];
  const checks = pageChecks(SCREENSHOTS, LONG);
  const { consoleErrors, a11yViolations, sidewaysScroll, watch, checkPage, shot } = checks;
  const heading = (page: Page, name: string) => page.getByRole('heading', { level: 1, name, exact: true });
  const navTo = async (page: Page, name: string) => {
    const menu = page.getByRole('button', { name: 'Menu' });
    if (await menu.isVisible()) await menu.click();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();
  };

  /** Calls the admin API as `caller`. */
  async function api(caller: Caller, method: string, path: string, body?: unknown) {
    const res = await fetch(`${server.url}/admin/api/v1${path}`, {
      method,
      headers: { cookie: caller.cookie, 'x-csrf-token': caller.csrf, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }
  const sessionOf = (res: Response, data: { csrf_token: string }): Caller => ({
    cookie: res.headers
      .getSetCookie()
      .find((c) => c.startsWith('store_admin_session='))!
      .split(';')[0]!,
    csrf: data.csrf_token,
  });
  async function signInApi(email: string, userAgent = 'setup-script/1.0'): Promise<Caller> {
    const res = await fetch(`${server.url}/admin/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': userAgent },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    const json = await res.json();
    expect(res.status, JSON.stringify(json)).toBe(200);
    return sessionOf(res, json.data);
  }
  /** Proves `caller` again (a guarded action follows). */
  async function prove(caller: Caller) {
    expect((await api(caller, 'POST', '/account/reauthenticate', { password: PASSWORD })).status).toBe(200);
  }
  /** Waits, by asking the service, until `caller`'s proof is stale: its next guarded action asks for one. */
  async function untilProofStale(caller: Caller) {
    for (let i = 0; i < 600; i++) {
      const res = await api(caller, 'DELETE', `/account/sessions/${NO_SESSION}`);
      if (res.body?.code === 'reauthentication_required') return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the proof never went stale');
  }
  async function invite(ownerCaller: Caller, email: string, role: string): Promise<Caller> {
    await prove(ownerCaller);
    const invited = await api(ownerCaller, 'POST', '/admins/invitations', { email, role });
    expect(invited.status, JSON.stringify(invited.body)).toBe(201);
    const code = new URL(invited.body.data.url).hash.split('code=')[1]!;
    const res = await fetch(`${server.url}/admin/links/use`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code, password: PASSWORD }),
    });
    const json = await res.json();
    expect(res.status, JSON.stringify(json)).toBe(200);
    return sessionOf(res, json.data);
  }
  async function signInPage(page: Page, email: string) {
    await page.goto(`${server.url}/admin`);
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading(page, 'Overview').waitFor();
  }
  async function newPage(who: string, options: { viewport?: { width: number; height: number }; userAgent?: string } = {}) {
    const context = await browser.newContext({ viewport: options.viewport ?? DESKTOP, locale: 'en-GB', timezoneId: 'UTC', userAgent: options.userAgent });
    contexts.push(context);
    const page = await context.newPage();
    watch(page, who);
    return page;
  }
  const csrfOf = async (page: Page) => (await (await page.request.get(`${server.url}/admin/session`)).json()).data.csrf_token as string;
  /** How far a table sticks out of its scrolling box (0: it fits). */
  const overflowOf = (page: Page, table: string) =>
    page.evaluate((selector) => {
      const el = document.querySelector(selector)!;
      const wrap = el.closest('.table-wrap')!;
      return wrap.scrollWidth - wrap.clientWidth;
    }, table);
  /** Submits the proof dialog with the password. */
  async function giveProof(page: Page) {
    const proof = page.getByRole('dialog', { name: 'Confirm it is you' });
    await proof.getByLabel('Password or 6-digit code').fill(PASSWORD);
    await proof.getByRole('button', { name: 'Confirm' }).click();
    await proof.waitFor({ state: 'detached' });
  }

  let ownerApi: Caller;
  let longAdmin: Caller;
  let otherAdmin: Caller;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-sessions-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    await receiver.start();
    await runCli(['admin', 'create', '--create', '--email', OWNER], { DATA_DIR: dataDir, ADMIN_PASSWORD: PASSWORD });
    server = await startServer({
      DATA_DIR: dataDir,
      SEED_DEMO: 'false',
      // The floor: a proof goes stale 10 s after it was given (the test polls until it is).
      ADMIN_REAUTH_WINDOW_MS: '10000',
      ADMIN_SIGN_IN_MAX_FAILURES: '1000',
      WEBHOOK_RETRY_SCHEDULE_MS: '100',
      WEBHOOK_POLL_INTERVAL_MS: '50',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    ownerContext = await browser.newContext({ viewport: DESKTOP, locale: 'en-GB', timezoneId: 'UTC' });
    owner = await ownerContext.newPage();
    watch(owner, 'owner');
  });

  afterAll(async () => {
    for (const context of contexts) await context.close().catch(() => {});
    await browser?.close();
    await server?.stop();
    await receiver.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it(`sets up a store with ${KEYS} long-named keys made by administrators with long addresses, and a dead delivery`, async () => {
    ownerApi = await signInApi(OWNER);
    longAdmin = await invite(ownerApi, LONG_ADMIN, 'admin');
    otherAdmin = await invite(ownerApi, OTHER_ADMIN, 'admin');
    await invite(ownerApi, VIEWER, 'viewer');
    for (let i = 0; i < KEYS; i++) {
      const maker = i % 2 === 0 ? longAdmin : otherAdmin;
      if (i % 10 < 2) await prove(maker);
      const res = await api(maker, 'POST', '/tokens', {
        name: `Warehouse synchronisation for the north-east fulfilment centre ${String(i).padStart(3, '0')}`,
        scopes: ['products:read', 'orders:read', 'customers:read', 'inventory:read'],
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    }
    receiver.answer('/hooks/down', 500);
    await prove(ownerApi);
    const endpoint = await api(ownerApi, 'POST', '/webhooks/endpoints', { url: `${receiver.url}/hooks/down`, description: 'Fails' });
    expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201);
    expect((await api(ownerApi, 'POST', `/webhooks/endpoints/${endpoint.body.data.id}/ping`)).status).toBe(202);
    for (let i = 0; ; i++) {
      const { body } = await api(ownerApi, 'GET', '/webhooks/deliveries?status=dead');
      if (body.data.length > 0) break;
      if (i > 600) throw new Error('no delivery went dead');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }, 600_000);

  it('the API keys table fits its box at 1280 px, Roll and Revoke on screen', async () => {
    await signInPage(owner, OWNER);
    await navTo(owner, 'API keys');
    await heading(owner, 'API keys').waitFor();
    await owner.locator('#api-keys-table tbody tr').nth(10).waitFor();
    expect(await overflowOf(owner, '#api-keys-table')).toBe(0);
    for (const name of ['Roll', 'Revoke']) {
      const box = (await owner
        .getByRole('button', { name: new RegExp(`^${name} API key`) })
        .first()
        .boundingBox())!;
      expect(box.x + box.width, name).toBeLessThanOrEqual(DESKTOP.width);
    }
    await checkPage(owner, 'API keys (200, long names)');
  });

  it('the administrators table fits its box at 1280 px, Remove on screen', async () => {
    await navTo(owner, 'Administrators');
    await heading(owner, 'Administrators').waitFor();
    await owner.locator('#admins-table tbody tr', { hasText: VIEWER }).waitFor();
    expect(await overflowOf(owner, '#admins-table')).toBe(0);
    const box = (await owner.getByRole('button', { name: `Remove ${OTHER_ADMIN}` }).boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(DESKTOP.width);
    await checkPage(owner, 'administrators (long addresses)');
  });

  it('lists your sessions, ends another device after the proof, then all others', async () => {
    const phone = await newPage('owner on a phone', { viewport: PHONE, userAgent: IPHONE });
    await signInPage(phone, OWNER);
    await navTo(owner, 'Your account');
    await heading(owner, 'Your account').waitFor();
    const table = owner.locator('.table-sessions');
    await table.locator('tbody tr').nth(2).waitFor();
    // This browser, the phone and the setup script.
    expect(await table.locator('tbody tr').count()).toBe(3);
    const current = table.locator('tbody tr[data-current="true"]');
    await current.getByText('This session').waitFor();
    expect(await current.locator('.session-device').textContent()).toMatch(/^Headless Chrome \d+ on Linux$/);
    const phoneRow = table.locator('tbody tr', { hasText: 'Safari 17 on iOS' });
    expect(await phoneRow.locator('td').first().textContent()).toBe('127.0.0.1');
    await checkPage(owner, 'your account: sessions');
    await shot(owner, 'account-sessions');

    await untilProofStale({ cookie: (await ownerContext.cookies()).map((c) => `${c.name}=${c.value}`).join('; '), csrf: await csrfOf(owner) });
    // The stale proof's 403 is logged by Chromium as a failed request: expected here.
    checks.provoking = true;
    await phoneRow.getByRole('button', { name: 'End the session of Safari 17 on iOS' }).click();
    await owner.getByRole('dialog', { name: 'End this session?' }).getByRole('button', { name: 'End session' }).click();
    await giveProof(owner);
    await owner.locator('#toasts .toast', { hasText: 'Ended the session of Safari 17 on iOS.' }).waitFor();
    checks.provoking = false;
    await table.locator('tbody tr', { hasText: 'Safari 17 on iOS' }).waitFor({ state: 'detached' });
    // The phone is signed out at its next step.
    await phone.reload();
    await phone.getByRole('button', { name: 'Sign in', exact: true }).waitFor();

    await owner.getByRole('button', { name: 'End all other sessions' }).click();
    await owner.getByRole('dialog', { name: 'End all your other sessions?' }).getByRole('button', { name: 'End other sessions' }).click();
    await owner.locator('#toasts .toast', { hasText: 'Your other sessions are ended.' }).waitFor();
    await owner.getByText('You are signed in nowhere else.').waitFor();
    expect(await table.locator('tbody tr').count()).toBe(1);
    expect((await api(ownerApi, 'GET', '/account/sessions')).status).toBe(401);
  });

  it('an owner ends every session of another administrator from the administrators page', async () => {
    const adminPage = await newPage('long admin', { userAgent: IPHONE });
    await signInPage(adminPage, LONG_ADMIN);
    await navTo(owner, 'Administrators');
    await heading(owner, 'Administrators').waitFor();
    await owner.getByRole('button', { name: `Sessions of ${LONG_ADMIN}` }).click();
    const dialog = owner.getByRole('dialog', { name: `Sessions of ${LONG_ADMIN}` });
    await dialog.locator('.table-sessions tbody tr', { hasText: 'Safari 17 on iOS' }).waitFor();
    await checkPage(owner, 'sessions of an administrator');
    await untilProofStale({ cookie: (await ownerContext.cookies()).map((c) => `${c.name}=${c.value}`).join('; '), csrf: await csrfOf(owner) });
    checks.provoking = true;
    await dialog.getByRole('button', { name: 'End all sessions' }).click();
    await giveProof(owner);
    await owner.locator('#toasts .toast', { hasText: `sessions of ${LONG_ADMIN}.` }).waitFor();
    checks.provoking = false;
    expect((await api(longAdmin, 'GET', '/account/sessions')).status).toBe(401);
    await adminPage.reload();
    await adminPage.getByRole('button', { name: 'Sign in', exact: true }).waitFor();
  });

  it('cancelling the proof dialog leaves no API text on the create-key form', async () => {
    const page = await newPage('other admin');
    await signInPage(page, OTHER_ADMIN);
    await navTo(page, 'API keys');
    await heading(page, 'API keys').waitFor();
    await untilProofStale({ cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; '), csrf: await csrfOf(page) });
    await page.getByRole('button', { name: 'Create API key' }).first().click();
    const dialog = page.getByRole('dialog', { name: 'Create API key' });
    await dialog.getByLabel('Name').fill('Cancelled proof');
    checks.provoking = true;
    await dialog.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog', { name: 'Confirm it is you' }).getByRole('button', { name: 'Cancel' }).click();
    const error = dialog.locator('.form-error');
    await error.getByText(/./).waitFor();
    checks.provoking = false;
    const text = (await error.textContent()) ?? '';
    expect(text).not.toMatch(/\/admin\/api|POST|minutes/);
    expect(text).toContain('confirm');
    // Closed here: this administrator is removed by a later test, and an open page's alert poll
    // (every 15 s) would then log a 401 outside the part that provokes it.
    await page.context().close();
  });

  it('a viewer gets no selection checkboxes on dead deliveries', async () => {
    const page = await newPage('viewer');
    await signInPage(page, VIEWER);
    await page.goto(`${server.url}/admin#/deliveries?status=dead`);
    await heading(page, 'Deliveries').waitFor();
    await page.locator('.deliveries-panel tbody tr[data-status="dead"]').first().waitFor();
    expect(await page.locator('.deliveries-panel input[type="checkbox"]:visible').count()).toBe(0);
    await checkPage(page, 'dead deliveries (viewer)');
  });

  it('search inputs are as high as the selects beside them; the audit log filters line up', async () => {
    /** [name, top, height] of the visible controls under `selector`. */
    const controls = (selector: string) =>
      owner.evaluate(
        (s) =>
          Array.from(document.querySelectorAll(s))
            .filter((el) => el.getBoundingClientRect().height > 0)
            .map((el) => [(el as HTMLInputElement).name, Math.round(el.getBoundingClientRect().top), Math.round(el.getBoundingClientRect().height)] as const),
        selector,
      );
    await owner.goto(`${server.url}/admin#/deliveries`);
    await heading(owner, 'Deliveries').waitFor();
    await owner.locator('.delivery-search input[type="search"]').first().waitFor();
    const search = await controls('.delivery-search input, .delivery-search select');
    const selectHeight = search.find(([name]) => name === 'event_type')![2];
    expect(selectHeight, JSON.stringify(search)).toBe(38);
    for (const [name, , height] of search) expect(height, `${name}: ${JSON.stringify(search)}`).toBe(selectHeight);
    await navTo(owner, 'API keys');
    await heading(owner, 'API keys').waitFor();
    await owner.locator('main input[type="search"]').waitFor();
    const keySearch = await controls('main input[type="search"]');
    expect(keySearch.map(([, , height]) => height)).toEqual([selectHeight]);
    await navTo(owner, 'Audit log');
    await heading(owner, 'Audit log').waitFor();
    await owner.locator('main form select').first().waitFor();
    const filters = await controls('main form input, main form select');
    const who = filters.find(([name]) => name === 'actor')!;
    const action = filters.find(([name]) => name === 'action')!;
    expect(who.slice(1), JSON.stringify(filters)).toEqual(action.slice(1));
  });

  it('a removed administrator who clicks an action lands on Sign in without a stale error toast', async () => {
    const page = await newPage('admin removed meanwhile');
    await signInPage(page, OTHER_ADMIN);
    await navTo(page, 'API keys');
    await heading(page, 'API keys').waitFor();
    const ownerAgain = await signInApi(OWNER);
    const members = (await api(ownerAgain, 'GET', '/admins')).body.data as { id: string; email: string }[];
    expect((await api(ownerAgain, 'DELETE', `/admins/${members.find((m) => m.email === OTHER_ADMIN)!.id}`)).status).toBe(200);
    checks.provoking = true;
    await page
      .getByRole('button', { name: /^Revoke API key/ })
      .first()
      .click();
    await page.getByRole('dialog', { name: 'Revoke API key?' }).getByRole('button', { name: 'Revoke key' }).click();
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor();
    await page.getByText('Your session has ended. Sign in again to continue.').waitFor();
    expect(await page.locator('.toast-error:visible').count()).toBe(0);
    // Requests of the page that was left, answered 401 after the removal, are expected too.
    await page.context().close();
    checks.provoking = false;
  });

  it('axe finds nothing on the sign-in page and the 404 page at 390 px', async () => {
    const page = await newPage('phone', { viewport: PHONE });
    await page.goto(`${server.url}/admin`);
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor();
    await checkPage(page, 'sign-in (390)');
    await signInPage(page, OWNER);
    await page.goto(`${server.url}/admin#/no-such-page`);
    await heading(page, 'Page not found').waitFor();
    await checkPage(page, '404 (390)');
  });

  it('no console errors, accessibility violations or sideways scrolling on any page', () => {
    expect(consoleErrors).toEqual([]);
    expect(a11yViolations).toEqual([]);
    expect(sidewaysScroll).toEqual([]);
  });
});
