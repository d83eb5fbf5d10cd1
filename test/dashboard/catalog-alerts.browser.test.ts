/**
 * The dashboard in an incident, in Chromium (decision 0020): the event catalog page, sending a test
 * event of a type picked from the catalog (signed, marked as a test at the receiver, shown as "Test"
 * in the deliveries), deleting an endpoint after a confirmation naming it, and alerts (a disabled
 * endpoint, new dead letters) in the navigation and on the overview until seen. An owner walks each
 * flow at 1280×800, a viewer at 390×844 sees the same pages with no write control and the admin API
 * refuses the viewer's writes; then each role walks them at the other size. Bad input (an unknown
 * type, an endpoint deleted meanwhile) is said at the field, and nothing changes. Every page shown
 * is checked with axe (WCAG 2.1 A/AA), for sideways scrolling, and for console errors.
 *
 * Screenshots of the new pages go to docs/screenshots/ with UPDATE_SCREENSHOTS=1.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
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
  process.env.UPDATE_SCREENSHOTS === '1' ? join(REPO_ROOT, 'docs', 'screenshots') : join(tmpdir(), `store-api-screenshots-catalog-${process.pid}`);
const LONG = 30_000;
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

describe.skipIf(!hasChromium)('event catalog, test events, deleting endpoints and alerts in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  const receiver = new WebhookReceiver();
  let browser: Browser;
  let ownerContext: BrowserContext;
  let owner: Page;
  let viewerContext: BrowserContext;
  let viewer: Page;
  const endpoints: Record<'main' | 'failing' | 'off' | 'doomed', { id: string; url: string }> = {} as never;
  const checks = pageChecks(SCREENSHOTS, LONG);
  const { consoleErrors, a11yViolations, sidewaysScroll, watch, checkPage, shot } = checks;
  const nav = (page: Page) => page.getByRole('navigation', { name: 'Main' });
  /** Follows a link of the main navigation; on a phone, through the menu. */
  const navTo = async (page: Page, name: string) => {
    const menu = page.getByRole('button', { name: 'Menu' });
    if (await menu.isVisible()) await menu.click();
    await nav(page).getByRole('link', { name, exact: true }).click();
  };
  const heading = (page: Page, name: string) => page.getByRole('heading', { level: 1, name, exact: true });
  const csrfOf = async (page: Page) => (await (await page.request.get(`${server.url}/admin/session`)).json()).data.csrf_token as string;
  const api = async (page: Page, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, data?: object) => {
    const res = await page.request.fetch(`${server.url}/admin/api/v1${path}`, { method, data, headers: { 'x-csrf-token': await csrfOf(page) } });
    return { status: res.status(), type: res.headers()['content-type'] ?? '', body: res.status() === 204 ? null : await res.json() };
  };
  const loaded = (page: Page) => page.waitForFunction(() => !document.querySelector('.loading-block'));

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-catalog-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    await receiver.start();
    receiver.answer('/failing', 500);
    await runCli(['admin', 'create', '--create', '--email', OWNER], { DATA_DIR: dataDir, ADMIN_PASSWORD: OWNER_PASSWORD });
    server = await startServer({
      DATA_DIR: dataDir,
      SEED_DEMO: 'false',
      // One retry 200 ms later, then a dead letter.
      WEBHOOK_RETRY_SCHEDULE_MS: '200',
      WEBHOOK_POLL_INTERVAL_MS: '50',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_BREAKER_THRESHOLD: '10',
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    ownerContext = await browser.newContext({ viewport: DESKTOP, locale: 'en-GB', timezoneId: 'UTC' });
    owner = await ownerContext.newPage();
    watch(owner, 'owner');
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await receiver.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('a quiet store: the overview says nothing needs attention and the navigation carries no alert', async () => {
    await owner.goto(`${server.url}/admin`);
    await owner.getByLabel('Email').fill(OWNER);
    await owner.getByLabel('Password').fill(OWNER_PASSWORD);
    await owner.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading(owner, 'Overview').waitFor();
    await owner.getByText('Nothing needs attention').waitFor();
    expect(await owner.locator('.nav-alert:visible').count()).toBe(0);
    for (const [key, path] of [
      ['main', '/main'],
      ['failing', '/failing'],
      ['off', '/off'],
      ['doomed', '/doomed'],
    ] as const) {
      const created = await api(owner, 'POST', '/webhooks/endpoints', { url: `${receiver.url}${path}`, description: `The ${key} receiver` });
      expect(created.status).toBe(201);
      endpoints[key] = { id: created.body.data.id, url: created.body.data.url };
    }
  });

  it('shows a disabled endpoint and new dead letters in the navigation and on the overview, until seen', async () => {
    await api(owner, 'PATCH', `/webhooks/endpoints/${endpoints.off.id}`, { enabled: false });
    const ping = await api(owner, 'POST', `/webhooks/endpoints/${endpoints.failing.id}/ping`);
    // Two failed attempts, the second one dead-letters it (settled right after the receiver answers).
    await receiver.next(
      (r) => r.path === '/failing' && r.json.id === ping.body.data.event_id && receiver.requests.filter((x) => x.json.id === r.json.id).length >= 2,
    );
    await vi.waitFor(async () => expect((await api(owner, 'GET', `/webhooks/deliveries/${ping.body.data.delivery_id}`)).body.data.status).toBe('dead'), {
      timeout: LONG,
      interval: 100,
    });

    await navTo(owner, 'Event catalog');
    await heading(owner, 'Event catalog').waitFor();
    await navTo(owner, 'Overview');
    await heading(owner, 'Overview').waitFor();
    // A red count on the Overview link, described in words to screen readers (the name stays "Overview").
    await nav(owner).locator('.nav-alert:visible', { hasText: /^2$/ }).waitFor();
    await expect(nav(owner).getByRole('link', { name: 'Overview', exact: true }).getAttribute('aria-describedby')).resolves.toBe('nav-alerts-description');
    await expect(owner.locator('#nav-alerts-description').textContent()).resolves.toBe('2 alerts need attention');
    const alerts = owner.getByRole('region', { name: 'Needs attention' });
    await alerts.getByRole('link', { name: endpoints.off.url }).waitFor();
    await alerts.getByText('Disabled', { exact: true }).waitFor();
    await alerts.getByRole('link', { name: '1 new dead letter since you last looked' }).waitFor();
    await checkPage(owner, 'overview with alerts (owner 1280)');
    await shot(owner, 'overview-alerts');

    await alerts.getByRole('button', { name: 'Mark dead letters as seen' }).click();
    await nav(owner).locator('.nav-alert:visible', { hasText: /^1$/ }).waitFor();
    await expect(owner.locator('#nav-alerts-description').textContent()).resolves.toBe('1 alert needs attention');
    await expect(alerts.getByRole('link', { name: /new dead letter/ }).count()).resolves.toBe(0);
    await alerts.getByRole('link', { name: endpoints.off.url }).waitFor();
  });

  it('lists every event type of the catalog with its description, example and schema', async () => {
    const catalog = (await api(owner, 'GET', '/event-types')).body.data as { type: string; description: string; example: unknown }[];
    await navTo(owner, 'Event catalog');
    await heading(owner, 'Event catalog').waitFor();
    await loaded(owner);
    expect(await owner.locator('.event-type-card').count()).toBe(catalog.length);
    await shot(owner, 'event-catalog');
    const order = owner.getByRole('region', { name: 'order.created' });
    await order.getByText(catalog.find((t) => t.type === 'order.created')!.description).waitFor();
    await order.getByText('Example body').click();
    const example = await order.locator('pre').first().textContent();
    expect(JSON.parse(example!)).toEqual(catalog.find((t) => t.type === 'order.created')!.example);
    await order.getByText('Payload schema (JSON Schema)').click();
    await checkPage(owner, 'event catalog (owner 1280)');
    await owner.getByRole('button', { name: 'customer.created' }).click();
    await expect(owner.evaluate(() => document.activeElement?.textContent)).resolves.toBe('customer.created');
  });

  it('sends a test event of a type picked from the catalog: signed, marked at the receiver, shown as Test', async () => {
    await owner.goto(`${server.url}/admin#/webhooks/${endpoints.main.id}`);
    await owner.locator('.page-title-url', { hasText: endpoints.main.url }).waitFor();
    await owner.getByRole('button', { name: 'Send test event…' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Send a test event' });
    await dialog.getByLabel('Event type').selectOption('product.updated');
    await dialog.getByText('Show the example body').click();
    await checkPage(owner, 'test event dialog (owner 1280)');
    await shot(owner, 'endpoint-test-event');
    await dialog.getByRole('button', { name: 'Send test event' }).click();
    const received = await receiver.next((r) => r.path === '/main' && r.json.type === 'product.updated');
    expect(received.headers['webhook-test']).toBe('true');
    expect(received.headers['webhook-signature']).toMatch(/^v1,/);
    expect((received.json as unknown as { test: boolean }).test).toBe(true);

    const row = owner.locator('tr', { hasText: 'product.updated' });
    await row.getByText('Test', { exact: true }).waitFor();
    await row.getByRole('link', { name: /product\.updated/ }).click();
    await heading(owner, 'product.updated').waitFor();
    await owner.locator('.page-title-line').getByText('Test', { exact: true }).waitFor();
    await owner.locator('.payload', { hasText: '"test": true' }).waitFor();
    await checkPage(owner, 'test delivery (owner 1280)');
    await navTo(owner, 'Deliveries');
    await heading(owner, 'Deliveries').waitFor();
    await owner.locator('tr', { hasText: 'product.updated' }).getByText('Test', { exact: true }).waitFor();
  });

  it('says an unknown event type at the field, and sends nothing', async () => {
    await owner.goto(`${server.url}/admin#/webhooks/${endpoints.main.id}`);
    await owner.locator('.page-title-url', { hasText: endpoints.main.url }).waitFor();
    const before = (await api(owner, 'GET', `/webhooks/deliveries?endpoint_id=${endpoints.main.id}`)).body.data.length;
    await owner.getByRole('button', { name: 'Send test event…' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Send a test event' });
    // A type the catalog does not have (as a stale page or a crafted request would send).
    await dialog.getByLabel('Event type').evaluate((select: HTMLSelectElement) => {
      select.append(new Option('order.exploded', 'order.exploded'));
      select.value = 'order.exploded';
    });
    checks.provoking = true;
    await dialog.getByRole('button', { name: 'Send test event' }).click();
    await dialog.locator('[data-field="type"] .field-error', { hasText: 'must be one of' }).waitFor();
    checks.provoking = false;
    await expect(dialog.getByLabel('Event type').getAttribute('aria-invalid')).resolves.toBe('true');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await api(owner, 'GET', `/webhooks/deliveries?endpoint_id=${endpoints.main.id}`)).body.data.length).toBe(before);
  });

  it('deletes an endpoint after a confirmation naming it; one deleted meanwhile is said at the field', async () => {
    await owner.goto(`${server.url}/admin#/webhooks/${endpoints.doomed.id}`);
    await owner.locator('.page-title-url', { hasText: endpoints.doomed.url }).waitFor();
    await owner.getByRole('button', { name: 'Delete…' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Delete this endpoint?' });
    await dialog.getByText(endpoints.doomed.url, { exact: true }).waitFor();
    await dialog.getByLabel('Type the endpoint’s URL to confirm').fill('http://somewhere.else/');
    await dialog.getByRole('button', { name: 'Delete endpoint' }).click();
    await dialog.locator('[data-field="confirm_url"] .field-error', { hasText: 'exactly' }).waitFor();
    expect((await api(owner, 'GET', `/webhooks/endpoints/${endpoints.doomed.id}`)).status).toBe(200);
    await dialog.getByLabel('Type the endpoint’s URL to confirm').fill(endpoints.doomed.url);
    await checkPage(owner, 'delete dialog (owner 1280)');
    await shot(owner, 'endpoint-delete');
    await dialog.getByRole('button', { name: 'Delete endpoint' }).click();
    await heading(owner, 'Webhooks').waitFor();
    await loaded(owner);
    await owner.locator('main').getByRole('link', { name: endpoints.main.url }).first().waitFor();
    expect(await owner.locator('main').getByRole('link', { name: endpoints.doomed.url }).count()).toBe(0);
    checks.provoking = true;
    expect((await api(owner, 'GET', `/webhooks/endpoints/${endpoints.doomed.id}`)).status).toBe(404);

    // Deleted by someone else while the dialog is open: said at the field, nothing else happens.
    await owner.goto(`${server.url}/admin#/webhooks/${endpoints.failing.id}`);
    await owner.locator('.page-title-url', { hasText: endpoints.failing.url }).waitFor();
    await owner.getByRole('button', { name: 'Delete…' }).click();
    const second = owner.getByRole('dialog', { name: 'Delete this endpoint?' });
    await second.getByLabel('Type the endpoint’s URL to confirm').fill(endpoints.failing.url);
    expect((await api(owner, 'DELETE', `/webhooks/endpoints/${endpoints.failing.id}`)).status).toBe(200);
    await second.getByRole('button', { name: 'Delete endpoint' }).click();
    await second.locator('[data-field="confirm_url"] .field-error', { hasText: 'no longer exists' }).waitFor();
    const again = await api(owner, 'DELETE', `/webhooks/endpoints/${endpoints.failing.id}`);
    expect(again.status).toBe(404);
    expect(again.type).toMatch(/application\/problem\+json/);
    await second.getByRole('button', { name: 'Cancel' }).click();
    // The page's own state poll finds the endpoint gone too (a 404 Chromium logs); leave it before counting errors again.
    await navTo(owner, 'Webhooks');
    await heading(owner, 'Webhooks').waitFor();
    checks.provoking = false;

    const audit = (await api(owner, 'GET', '/audit-log?limit=100')).body.data.map((e: { action: string }) => e.action);
    expect(audit.filter((a: string) => a === 'endpoint.deleted')).toHaveLength(2);
    expect(audit).toContain('endpoint.test_event_sent');
  });

  it('the viewer (390×844) sees the alerts, the catalog and the endpoint with no write control; the API refuses the writes', async () => {
    const invitation = await api(owner, 'POST', '/admins/invitations', { email: VIEWER, role: 'viewer' });
    expect(invitation.status).toBe(201);
    viewerContext = await browser.newContext({ viewport: PHONE, locale: 'en-GB', timezoneId: 'UTC' });
    viewer = await viewerContext.newPage();
    watch(viewer, 'viewer');
    await viewer.goto(invitation.body.data.url);
    await viewer.getByLabel(/^Password/).fill(VIEWER_PASSWORD);
    await viewer.getByLabel('Repeat password').fill(VIEWER_PASSWORD);
    await viewer.getByRole('button', { name: 'Create my account' }).click();
    await heading(viewer, 'Overview').waitFor();
    // A new administrator has never looked: the disabled endpoint and the dead letter (the latter
    // went with its deleted endpoint, so only the endpoint is left).
    const alerts = viewer.getByRole('region', { name: 'Needs attention' });
    await alerts.getByRole('link', { name: endpoints.off.url }).waitFor();
    await viewer.locator('.nav-alert', { hasText: /^1$/ }).waitFor({ state: 'attached' });
    await expect(viewer.locator('#nav-alerts-description').textContent()).resolves.toBe('1 alert needs attention');
    await checkPage(viewer, 'overview with alerts (viewer 390)');
    await shot(viewer, 'overview-alerts-viewer-390');

    await viewer.goto(`${server.url}/admin#/event-types`);
    await heading(viewer, 'Event catalog').waitFor();
    await loaded(viewer);
    await checkPage(viewer, 'event catalog (viewer 390)');
    await shot(viewer, 'event-catalog-viewer-390');

    await viewer.goto(`${server.url}/admin#/webhooks/${endpoints.main.id}`);
    await viewer.locator('.page-title-url', { hasText: endpoints.main.url }).waitFor();
    await loaded(viewer);
    expect(await viewer.locator('.requires-write:visible').count()).toBe(0);
    expect(await viewer.getByRole('button', { name: /Send test event|Delete/ }).count()).toBe(0);
    await viewer.locator('tr', { hasText: 'product.updated' }).getByText('Test', { exact: true }).waitFor();
    await checkPage(viewer, 'endpoint (viewer 390)');

    checks.provoking = true;
    const send = await api(viewer, 'POST', `/webhooks/endpoints/${endpoints.main.id}/test-events`, { type: 'order.created' });
    expect(send.status).toBe(403);
    expect(send.type).toMatch(/application\/problem\+json/);
    const remove = await api(viewer, 'DELETE', `/webhooks/endpoints/${endpoints.main.id}`);
    expect(remove.status).toBe(403);
    expect(remove.type).toMatch(/application\/problem\+json/);
    checks.provoking = false;
    expect((await api(viewer, 'GET', `/webhooks/endpoints/${endpoints.main.id}`)).status).toBe(200);
  });

  it('each role walks the new pages at the other size too', async () => {
    await viewer.setViewportSize(DESKTOP);
    await owner.setViewportSize(PHONE);
    for (const [page, who] of [
      [viewer, 'viewer'],
      [owner, 'owner'],
    ] as const) {
      for (const [hash, title] of [
        ['#/overview', 'Overview'],
        ['#/event-types', 'Event catalog'],
        [`#/webhooks/${endpoints.main.id}`, null],
      ] as const) {
        await page.goto(`${server.url}/admin${hash}`);
        if (title) await heading(page, title).waitFor();
        else await page.locator('.page-title-url').waitFor();
        await loaded(page);
        await checkPage(page, `${who} ${hash} (${who === 'viewer' ? 1280 : 390})`);
      }
    }
    await owner.getByRole('button', { name: 'Send test event…' }).click();
    await owner.getByRole('dialog', { name: 'Send a test event' }).getByText('Show the example body').click();
    await checkPage(owner, 'test event dialog (owner 390)');
    await owner.getByRole('dialog', { name: 'Send a test event' }).getByRole('button', { name: 'Cancel' }).click();
    await owner.getByRole('button', { name: 'Delete…' }).click();
    await checkPage(owner, 'delete dialog (owner 390)');
    await owner.getByRole('dialog', { name: 'Delete this endpoint?' }).getByRole('button', { name: 'Cancel' }).click();
    await owner.setViewportSize(DESKTOP);
  });

  it('logged no console error, found no axe violation and no sideways scrolling on any page shown', () => {
    expect(consoleErrors).toEqual([]);
    expect(a11yViolations).toEqual([]);
    expect(sidewaysScroll).toEqual([]);
  });
});
