/**
 * Stock imports in the dashboard, in Chromium (decision 0060): an owner sends a small CSV from the
 * Stock imports page (applied at once, its counts in a toast), then one over IMPORT_JOB_ROWS (a job:
 * the page follows it to Succeeded with its rows and counts, refreshing by itself), then one with an
 * unknown sku (its job Failed, the refused line shown). The levels are read back through the admin
 * API. The page is checked with axe and for sideways scrolling at 1280 and 390 px, and for console
 * errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM, hasChromium, pageChecks, runCli, startServer, type RunningServer } from './dashboard-harness.ts';

const OWNER = 'owner@example.com';
const OWNER_PASSWORD = 'correct horse battery staple';
const LONG = 30_000;

describe.skipIf(!hasChromium)('stock imports in Chromium', () => {
  let dataDir: string;
  let server: RunningServer;
  let browser: Browser;
  let page: Page;
  const checks = pageChecks(join(tmpdir(), `store-api-screenshots-imports-${process.pid}`), LONG);
  const { consoleErrors, a11yViolations, sidewaysScroll, watch, checkPage } = checks;
  const products: { id: string; sku: string }[] = [];
  const csvFile = (name: string, text: string) => {
    const path = join(dataDir, name);
    writeFileSync(path, text);
    return path;
  };
  const api = async (method: 'GET' | 'POST', path: string, data?: object) => {
    const csrf = (await (await page.request.get(`${server.url}/admin/session`)).json()).data.csrf_token as string;
    const res = await page.request.fetch(`${server.url}/admin/api/v1${path}`, { method, data, headers: { 'x-csrf-token': csrf } });
    return { status: res.status(), body: await res.json() };
  };
  const stockOf = async (id: string) => (await api('GET', `/products/${id}`)).body.data.stock as number;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'store-api-imports-'));
    mkdirSync(join(tmpdir(), `store-api-screenshots-imports-${process.pid}`), { recursive: true });
    await runCli(['admin', 'create', '--create', '--email', OWNER], { DATA_DIR: dataDir, ADMIN_PASSWORD: OWNER_PASSWORD });
    server = await startServer({ DATA_DIR: dataDir, SEED_DEMO: 'false', IMPORT_JOB_ROWS: '3', STOCK_IMPORT_STEP_ROWS: '2', IMPORT_JOB_POLL_MS: '50' });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-GB', timezoneId: 'UTC' })).newPage();
    watch(page, 'owner');
    await page.goto(`${server.url}/admin`);
    await page.getByLabel('Email').fill(OWNER);
    await page.getByLabel('Password').fill(OWNER_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    for (let i = 0; i < 5; i++) {
      const created = await api('POST', '/products', { sku: `IMP-${i}`, name: `Import product ${i}`, product_type: 'physical', price: 1, stock: 1 });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      products.push({ id: created.body.data.id, sku: created.body.data.sku });
    }
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  const send = async (file: string) => {
    await page.getByLabel('Stock CSV').setInputFiles(file);
    await page.getByRole('button', { name: 'Import' }).click();
  };
  const rows = () => page.locator('#import-jobs-table tbody tr');

  it('applies a small CSV at once, and follows a large one as a job to Succeeded', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Stock imports' }).click();
    await page.getByRole('heading', { level: 1, name: 'Stock imports' }).waitFor();
    await page.getByText('No import jobs').waitFor();
    await checkPage(page, 'stock imports, empty (1280)');

    await send(csvFile('small.csv', `sku,stock\n${products[0]!.sku},40\n`));
    await page.getByText('small.csv imported: 1 rows, 1 stock movements.').waitFor();
    expect(await stockOf(products[0]!.id)).toBe(40);

    await send(csvFile('large.csv', `sku,stock\n${products.map((p, i) => `${p.sku},${100 + i}`).join('\n')}\n`));
    await page.getByText('large.csv is queued as an import job').waitFor();
    // The page refreshes by itself until the job ends.
    const job = rows().first();
    await job.locator('[data-status="succeeded"], .badge', { hasText: 'Succeeded' }).waitFor({ timeout: LONG });
    await expect(job.getByText('5 of 5 rows').count()).resolves.toBe(1);
    await expect(job.getByText('5 movements, 5 products').count()).resolves.toBe(1);
    expect(await Promise.all(products.map((p) => stockOf(p.id)))).toEqual([100, 101, 102, 103, 104]);
    await checkPage(page, 'stock imports, a job succeeded (1280)');
  });

  it('shows a failed job with the line it refused, nothing written', async () => {
    await send(csvFile('bad.csv', `sku,stock\n${products.map((p) => `${p.sku},7`).join('\n')}\nNO-SUCH-SKU,3\n`));
    await page.getByText('bad.csv is queued as an import job').waitFor();
    const job = rows().first();
    await job.locator('.badge', { hasText: 'Failed' }).waitFor({ timeout: LONG });
    await job.locator('.import-error summary').click();
    await job.getByText('line 7', { exact: false }).first().waitFor();
    expect(await Promise.all(products.map((p) => stockOf(p.id)))).toEqual([100, 101, 102, 103, 104]);
    await page.setViewportSize({ width: 390, height: 844 });
    await checkPage(page, 'stock imports, a job failed (390)');
    expect(consoleErrors).toEqual([]);
    expect(a11yViolations).toEqual([]);
    expect(sidewaysScroll).toEqual([]);
  });
});
