/**
 * An independent linter passes the OpenAPI document: Redocly CLI's `lint` with its recommended rules
 * (redocly.yaml) reports no error and no warning. Run alone with `npm run openapi:lint`.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../../packages/client/scripts/generate-api-types.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const REDOCLY = join(ROOT, 'node_modules', '.bin', 'redocly');

describe('the OpenAPI document under redocly lint (recommended rules)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'openapi-lint-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has no error and no warning', async () => {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(await buildOpenApiDocument(), null, 2));
    const run = await promisify(execFile)(REDOCLY, ['lint', file, '--config', join(ROOT, 'redocly.yaml'), '--format', 'json'], {
      cwd: dir,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      maxBuffer: 50 * 1024 * 1024,
    }).catch((error: { stdout?: string; stderr?: string }) => ({ stdout: error.stdout ?? '', stderr: error.stderr ?? '' }));
    const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('{'))) as {
      totals: { errors: number; warnings: number };
      problems: { ruleId: string; message: string; location: { pointer?: string }[] }[];
    };
    const problems = report.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`);
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  });
});
