/**
 * Deliveries and endpoints in Chromium, on the real service: an owner (1280×800)
 * searches deliveries by event id, filters by event type and date range (a bad id said at its
 * field, by the browser and by the API), reads an endpoint's success rate and latency, replays
 * failed events only after the dialog said how many, and watches the breaker pause the endpoint
 * without a reload (the replay's failures trip it while the page is open). A viewer (390×844) has
 * the search, the filters and the statistics but no replay, and the API refuses the viewer's
 * replay with 403 problem+json. Each page is walked at both sizes by both roles; every page shown
 * is checked with axe (WCAG 2.1 A/AA), for sideways scrolling and for console errors; at 1280×800
 * the deliveries table fits with Retry on screen.
 *
 * Screenshots go to docs/screenshots/ with UPDATE_SCREENSHOTS=1.
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
  process.env.UPDATE_SCREENSHOTS === '1' ? join(REPO_ROOT, 'docs', 'screenshots') : join(tmpdir(), `store-api-screenshots-deliveries-${process.pid}`);
const LONG = 30_000;
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

interface Delivery {
  id: string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  status: string;
}

describe.skipIf(!hasChromium)('deliveries search, endpoint statistics and replay in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  const receiver = new WebhookReceiver();
  let browser: Browser;
  let ownerContext: BrowserContext;
  let owner: Page;
  let viewerContext: BrowserContext;
  let viewer: Page;
  let okId = '';
  let downId = '';
  let csrf = '';
  const checks = pageChecks(SCREENSHOTS, LONG);
  const { consoleErrors, a11yViolations, sidewaysScroll, watch, checkPage, shot } = checks;
  const heading = (page: Page, name: string) => page.getByRole('heading', { level: 1, name, exact: true });
  const api = async (method: 'GET' | 'POST', path: string, data?: unknown) => {
    const res = await owner.request.fetch(`${server.url}/admin/api/v1${path}`, { method, data, headers: { 'x-csrf-token': csrf } });
    return { status: res.status(), body: await res.json() };
  };
  const deliveries = async (query: string): Promise<Delivery[]> => (await api('GET', `/webhooks/deliveries?${query}`)).body.data;
  /** Resolves once `predicate` holds for the deliveries of `query` (asked again every 100 ms, for at most a minute). */
  const until = async (query: string, predicate: (d: Delivery[]) => boolean) => {
    for (let i = 0; i < 600; i++) {
      const list = await deliveries(query);
      if (predicate(list)) return list;
      await owner.waitForTimeout(100);
    }
    throw new Error(`deliveries of ${query} never matched`);
  };
  const rows = (page: Page) => page.locator('.deliveries-panel tbody tr');

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-deliveries-'));
    mkdirSync(SCREENSHOTS, { recursive: true });
    await receiver.start();
    await runCli(['admin', 'create', '--create', '--email', OWNER], { DATA_DIR: dataDir, ADMIN_PASSWORD: OWNER_PASSWORD });
    server = await startServer({
      DATA_DIR: dataDir,
      SEED_DEMO: 'false',
      // Three attempts per delivery; five failures in a row pause an endpoint (for a minute).
      WEBHOOK_RETRY_SCHEDULE_MS: '200,200',
      WEBHOOK_POLL_INTERVAL_MS: '50',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_BREAKER_THRESHOLD: '5',
      WEBHOOK_BREAKER_PAUSE_MS: '60000',
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

  it('the owner signs in; events reach a working endpoint and dead-letter at a failing one', async () => {
    await owner.goto(`${server.url}/admin`);
    await owner.getByLabel('Email').fill(OWNER);
    await owner.getByLabel('Password').fill(OWNER_PASSWORD);
    await owner.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading(owner, 'Overview').waitFor();
    csrf = (await (await owner.request.get(`${server.url}/admin/session`)).json()).data.csrf_token;
    // An event before the failing endpoint exists: a replay of the range reaches it, failed-only does not.
    expect((await api('POST', '/customers', { name: 'Early Customer' })).status).toBe(201);
    receiver.answer('/hooks/down', 500);
    okId = (await api('POST', '/webhooks/endpoints', { url: `${receiver.url}/hooks/ok`, description: 'Works' })).body.data.id;
    downId = (await api('POST', '/webhooks/endpoints', { url: `${receiver.url}/hooks/down`, description: 'Fails' })).body.data.id;
    expect((await api('POST', '/customers', { name: 'Ana Example' })).status).toBe(201);
    expect((await api('POST', `/webhooks/endpoints/${okId}/ping`)).status).toBe(202);
    await until(`endpoint_id=${okId}`, (d) => d.length === 2 && d.every((x) => x.status === 'succeeded'));
    await until(`endpoint_id=${downId}`, (d) => d.length === 1 && d[0]!.status === 'dead');
  });

  it('searches the deliveries page by event id, filters by type and dates, and says what is wrong at the field', async () => {
    const [customerDelivery] = await deliveries(`endpoint_id=${okId}&event_type=customer.created`);
    await owner.goto(`${server.url}/admin#/deliveries`);
    await heading(owner, 'Deliveries').waitFor();
    await rows(owner).nth(2).waitFor();
    // 1280×800: the table fits, Retry of the dead letter on screen.
    const retry = owner.locator('.deliveries-panel tbody tr[data-status="dead"] [data-role="retry"]').first();
    const box = (await retry.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(DESKTOP.width);
    expect(
      await owner.evaluate(
        () => document.querySelector('.deliveries-panel .table-wrap')!.scrollWidth - document.querySelector('.deliveries-panel .table-wrap')!.clientWidth,
      ),
    ).toBe(0);

    const search = owner.getByRole('search', { name: 'Search deliveries' });
    await search.getByLabel('Event or delivery id').fill(customerDelivery!.event_id);
    await search.getByRole('button', { name: 'Search' }).click();
    await owner.waitForURL(new RegExp(`id=${customerDelivery!.event_id}`));
    // The event went to both endpoints.
    await owner.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '2 deliveries shown.');
    expect(new Set(await rows(owner).evaluateAll((trs) => trs.map((tr) => tr.querySelector('th')!.textContent)))).toEqual(new Set(['customer.created']));
    await checkPage(owner, 'deliveries searched by event id');

    await search.getByLabel('Event or delivery id').fill(customerDelivery!.id);
    await search.getByRole('button', { name: 'Search' }).click();
    await owner.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '1 delivery shown.');
    await owner.locator(`.deliveries-panel tbody tr[data-delivery-id="${customerDelivery!.id}"]`).waitFor();

    // The browser says a partial id is wrong before asking.
    await search.getByLabel('Event or delivery id').fill('3f2c');
    await search.getByRole('button', { name: 'Search' }).click();
    await search.locator('[data-field="id"] .field-error', { hasText: 'Enter a whole event id or delivery id' }).waitFor();
    expect(await search.getByLabel('Event or delivery id').getAttribute('aria-invalid')).toBe('true');

    await search.getByRole('button', { name: 'Clear' }).click();
    await search.getByLabel('Event type').selectOption('ping');
    await owner.waitForURL(/event_type=ping/);
    await owner.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '1 delivery shown.');
    await search.getByLabel('Event type').selectOption('customer.created');
    await owner.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '2 deliveries shown.');
    await checkPage(owner, 'deliveries filtered by type');
    await shot(owner, 'deliveries-search');

    // Dates: today holds them all; an end before the start is said at "To"; tomorrow holds none.
    const today = new Date().toISOString().slice(0, 10);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    await search.getByLabel('Event type').selectOption('');
    await search.getByLabel('From').fill(today);
    await search.getByLabel('To (included)').fill(today);
    await search.getByRole('button', { name: 'Search' }).click();
    await owner.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '3 deliveries shown.');
    await search.getByLabel('From').fill(tomorrow);
    await search.getByRole('button', { name: 'Search' }).click();
    await search.locator('[data-field="to"] .field-error', { hasText: 'Choose an end on or after the start.' }).waitFor();
    await search.getByLabel('To (included)').fill(tomorrow);
    await search.getByRole('button', { name: 'Search' }).click();
    await owner.getByText('No deliveries match').waitFor();

    // A value only the API can refuse (an address typed by hand): its message at the field.
    checks.provoking = true;
    await owner.goto(`${server.url}/admin#/deliveries?id=not-an-id`);
    await owner.reload();
    await heading(owner, 'Deliveries').waitFor();
    await owner.locator('[data-field="id"] .field-error').filter({ hasText: /\S/ }).waitFor();
    expect(await owner.getByLabel('Event or delivery id').getAttribute('aria-invalid')).toBe('true');
    checks.provoking = false;
    await checkPage(owner, 'deliveries with a refused id');
  });

  it('shows the endpoint page with success rate and latency, and the same search in its deliveries panel', async () => {
    await owner.goto(`${server.url}/admin#/webhooks/${okId}`);
    const stats = owner.locator('.endpoint-stats-card');
    await stats.locator('tbody tr', { hasText: 'Last 24 hours' }).locator('[data-stat="success-rate"]', { hasText: '100%' }).waitFor();
    await stats.locator('tbody tr', { hasText: 'Last 24 hours' }).getByText('2 attempts').waitFor();
    await expect(stats.locator('tbody tr', { hasText: 'Last 24 hours' }).locator('[data-stat="p50"]').textContent()).resolves.toMatch(/^\d+ ms$/);
    await rows(owner).nth(1).waitFor();
    await owner.getByRole('search', { name: 'Search deliveries' }).getByLabel('Event type').selectOption('ping');
    await owner.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '1 delivery shown.');
    await checkPage(owner, 'endpoint page (owner)');
  });

  it('replays failed events only after saying how many, audits it, and follows the breaker live as the replay trips it', async () => {
    await owner.goto(`${server.url}/admin#/webhooks/${downId}`);
    const stats = owner.locator('.endpoint-stats-card tbody tr', { hasText: 'Last 24 hours' });
    await stats.locator('[data-stat="success-rate"]', { hasText: '0%' }).waitFor();
    await stats.getByText('3 attempts').waitFor();
    await owner.getByText('3 consecutive failed attempts').waitFor();
    expect(await owner.locator('.callout', { hasText: 'Paused by the circuit breaker' }).count()).toBe(0);

    await owner.getByRole('button', { name: 'Replay…' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Replay events' });
    // Right after the incident, the default range (the last hour up to the current minute, that
    // minute included) holds the events that just failed: both customer events (the earlier one
    // too); pings are never replayed.
    await dialog.locator('[data-role="replay-count"]', { hasText: 'This replay queues 2 deliveries.' }).waitFor();
    await dialog.getByRole('button', { name: 'Replay 2 events' }).waitFor();
    await dialog.getByLabel('Failed only').check();
    await dialog.locator('[data-role="replay-count"]', { hasText: 'This replay queues 1 delivery (failed events only).' }).waitFor();
    await checkPage(owner, 'replay dialog');
    await shot(owner, 'replay-failed-only');
    await dialog.getByRole('button', { name: 'Replay 1 event' }).click();
    await owner.locator('#toasts', { hasText: 'Queued 1 delivery.' }).waitFor();

    const audit = (await api('GET', '/audit-log?action=endpoint.replayed')).body.data;
    expect(audit[0]).toMatchObject({ target: { type: 'endpoint', id: downId }, details: { failed_only: true, queued: 1 } });

    // The replayed delivery fails twice more: five in a row pause the endpoint, shown without a reload.
    await owner.locator('.callout', { hasText: 'Paused by the circuit breaker until' }).waitFor();
    await owner.locator('.page-title-line .badge', { hasText: /^Paused until/ }).waitFor();
    await owner.getByText('5 consecutive failed attempts').waitFor();
    await stats.getByText('5 attempts').waitFor();
    await checkPage(owner, 'endpoint paused (owner)');
    await shot(owner, 'webhook-endpoint-stats');
  });

  it('the viewer (390×844) has search, filters and statistics but no replay; the API refuses the replay with 403', async () => {
    const invite = await api('POST', '/admins/invitations', { email: VIEWER, role: 'viewer' });
    expect(invite.status).toBe(201);
    const code = new URL(invite.body.data.url).hash.split('code=')[1]!;
    viewerContext = await browser.newContext({ viewport: PHONE, locale: 'en-GB', timezoneId: 'UTC' });
    const joined = await viewerContext.request.post(`${server.url}/admin/links/use`, { data: { code, password: VIEWER_PASSWORD } });
    expect(joined.status()).toBe(200);
    const viewerCsrf = (await joined.json()).data.csrf_token;
    viewer = await viewerContext.newPage();
    watch(viewer, 'viewer');

    await viewer.goto(`${server.url}/admin#/deliveries`);
    await heading(viewer, 'Deliveries').waitFor();
    await rows(viewer).first().waitFor();
    const search = viewer.getByRole('search', { name: 'Search deliveries' });
    await search.getByLabel('Event type').selectOption('customer.created');
    await viewer.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '3 deliveries shown.');
    expect(await viewer.locator('.deliveries-panel [data-role="retry"]:visible').count()).toBe(0);
    await checkPage(viewer, 'deliveries (viewer, 390)');
    await viewer.getByRole('heading', { level: 1 }).scrollIntoViewIfNeeded();
    await viewer.evaluate(() => window.scrollBy(0, document.querySelector('h1')!.getBoundingClientRect().top - 16));
    await shot(viewer, 'deliveries-search-viewer-390');

    await viewer.goto(`${server.url}/admin#/webhooks/${downId}`);
    await viewer.locator('.endpoint-stats-card [data-stat="success-rate"]').first().waitFor();
    await viewer.locator('.callout', { hasText: 'Paused by the circuit breaker until' }).waitFor();
    expect(await viewer.getByRole('button', { name: 'Replay…' }).isVisible()).toBe(false);
    await checkPage(viewer, 'endpoint page (viewer, 390)');

    const refused = await viewerContext.request.post(`${server.url}/admin/api/v1/webhooks/endpoints/${downId}/replay`, {
      data: { from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date().toISOString() },
      headers: { 'x-csrf-token': viewerCsrf },
    });
    expect(refused.status()).toBe(403);
    expect(refused.headers()['content-type']).toMatch(/application\/problem\+json/);
    // The preview is a read: a viewer may count, but nothing is queued.
    const before = (await deliveries(`endpoint_id=${downId}`)).length;
    expect((await viewerContext.request.get(`${server.url}/admin/api/v1/webhooks/endpoints/${downId}/stats`)).status()).toBe(200);
    expect((await deliveries(`endpoint_id=${downId}`)).length).toBe(before);
  });

  it('walks the same pages at the other size for each role', async () => {
    await owner.setViewportSize(PHONE);
    await viewer.setViewportSize(DESKTOP);
    for (const [page, who] of [
      [owner, 'owner 390'],
      [viewer, 'viewer 1280'],
    ] as const) {
      await page.goto(`${server.url}/admin#/deliveries?event_type=customer.created`);
      await heading(page, 'Deliveries').waitFor();
      await page.waitForFunction(() => document.querySelector('.deliveries-panel [aria-live]')?.textContent === '3 deliveries shown.');
      await checkPage(page, `deliveries (${who})`);
      await page.goto(`${server.url}/admin#/webhooks/${okId}`);
      await page.locator('.endpoint-stats-card [data-stat="success-rate"]', { hasText: '100%' }).first().waitFor();
      await page.locator('.deliveries-panel tbody tr').first().waitFor();
      await checkPage(page, `endpoint page (${who})`);
    }
    // At 1280 the viewer's table fits too.
    await viewer.goto(`${server.url}/admin#/deliveries`);
    await rows(viewer).nth(3).waitFor();
    expect(
      await viewer.evaluate(
        () => document.querySelector('.deliveries-panel .table-wrap')!.scrollWidth - document.querySelector('.deliveries-panel .table-wrap')!.clientWidth,
      ),
    ).toBe(0);
    await owner.setViewportSize(DESKTOP);
    await owner.goto(`${server.url}/admin#/webhooks/${downId}`);
    await owner.getByRole('button', { name: 'Replay…' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Replay events' });
    await dialog.locator('[data-role="replay-count"]').filter({ hasText: /\S/ }).waitFor();
    await owner.setViewportSize(PHONE);
    await checkPage(owner, 'replay dialog (owner 390)');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
  });

  it('had no console error, no accessibility violation and no sideways scrolling on any page', () => {
    expect(consoleErrors).toEqual([]);
    expect(a11yViolations).toEqual([]);
    expect(sidewaysScroll).toEqual([]);
  });
});
