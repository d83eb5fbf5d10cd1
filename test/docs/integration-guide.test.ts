/**
 * docs/integration-guide.md: every fenced `sh` and `js` snippet, in order, against a test service
 * with a real token (the guide promises it works as written), on each back end.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClientTestServer, type ClientTestServer } from '../client/client-test-kit.ts';
import { UNLIMITED } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';
import { backends } from '../helpers/test-database.ts';
import { PROJECT_ROOT } from '../production/process-helpers.ts';

const run = promisify(execFile);
const guide = readFileSync(join(PROJECT_ROOT, 'docs/integration-guide.md'), 'utf8');
const snippets = [...guide.matchAll(/^```(sh|js)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1] as 'sh' | 'js', code: m[2]! }));

describe('the integration guide has a snippet for each way in', () => {
  it('curl, the client and the sync tool', () => {
    expect(snippets.filter((s) => s.code.includes('curl ')).length).toBeGreaterThanOrEqual(2);
    expect(snippets.filter((s) => s.lang === 'js' && s.code.includes('@store-api/client')).length).toBe(1);
    expect(snippets.some((s) => s.code.includes('store-api-sync verify'))).toBe(true);
  });
});

describe.each(backends)('docs/integration-guide.md, run as written (%s)', (backend) => {
  let s: ClientTestServer;
  let dir: string;

  beforeAll(async () => {
    s = await startClientTestServer(backend, UNLIMITED);
    for (let i = 0; i < 3; i++) await aProductWithVariants(s.t.database.db, [2]);
    for (let i = 0; i < 4; i++) await aProduct(s.t.database.db);
    // Under the checkout (git-ignored tmp/), so `@store-api/client` and `npx store-api-sync` resolve as in a project that installed them.
    mkdirSync(join(PROJECT_ROOT, 'tmp'), { recursive: true });
    dir = mkdtempSync(join(PROJECT_ROOT, 'tmp', 'integration-guide-'));
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every snippet succeeds in order and the mirror verifies', async () => {
    const env = {
      PATH: process.env.PATH!,
      HOME: process.env.HOME ?? '/tmp',
      STORE_API_URL: s.baseUrl,
      STORE_API_TOKEN: s.token,
      // The tests run the client's and the sync tool's sources (vitest.config.ts).
      NODE_OPTIONS: '--conditions=source --import tsx',
    };
    const outputs: string[] = [];
    for (const [i, snippet] of snippets.entries()) {
      let result: { stdout: string; stderr: string };
      if (snippet.lang === 'sh') {
        result = await run('bash', ['-euo', 'pipefail', '-c', snippet.code], { cwd: dir, env });
      } else {
        const file = join(dir, `snippet-${i}.mjs`);
        writeFileSync(file, snippet.code);
        result = await run(process.execPath, [file], { cwd: dir, env });
      }
      outputs.push(result.stdout);
    }
    const all = outputs.join('\n');
    expect(all).toMatch(/"data":\[/);
    expect(all).toMatch(/x-total-count: 7/i);
    expect(all).toMatch(/^7 of at most 7 products; continue from \S+_00000000-0000-0000-0000-000000000000$/m);
    expect(outputs.at(-1)).toMatch(/products +api 7 \((\w+)\) mirror 7 \(\1\) match/);
  }, 180_000);
});
