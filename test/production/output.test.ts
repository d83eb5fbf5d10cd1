/**
 * Operable output (docs/decisions/0009): when stdout is not a terminal every line a server role
 * prints is JSON; the demo token and the one-time setup link appear only as `secret_value` of lines
 * flagged `"secret": true`; LOG_LEVEL=silent prints nothing, setup link included; a bad variable or
 * an unusable data directory stops the start with one JSON line naming it and exit 1; `--version`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { createAnnouncer } from '../../src/ops/announce.ts';
import { freePort } from '../dashboard/dashboard-harness.ts';
import { PROJECT_ROOT, startStoreApi } from './process-helpers.ts';

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'store-api-output-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** Splits `text` into lines and parses each as JSON (throwing, with the line, on the first that is not). */
function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${line}`);
      }
    });
}

/** Runs the CLI to its end; resolves with the exit code and both streams. */
async function runToEnd(args: string[], env: Record<string, string>) {
  const proc = startStoreApi(args, env);
  let stdout = '';
  let stderr = '';
  proc.child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  proc.child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await proc.exited;
  await new Promise((resolve) => setImmediate(resolve));
  return { code, stdout, stderr };
}

describe('the announcer', () => {
  const announcement = { text: 'Token:\n  sia_x\n', msg: 'the token', fields: { n: 1 }, secret: { kind: 'demo_token' as const, value: 'sia_x' } };
  const capture = (json: boolean | undefined, logLevel: string, isTTY: boolean) => {
    const stream = Object.assign(new PassThrough(), { isTTY });
    let out = '';
    stream.on('data', (c: Buffer) => (out += c.toString()));
    createAnnouncer({ logLevel, stream, ...(json === undefined ? {} : { json }) })(announcement);
    return out;
  };

  it('writes the text on a terminal and one JSON line, the secret flagged and kept out of msg, elsewhere', () => {
    expect(capture(undefined, 'info', true)).toBe('Token:\n  sia_x\n');
    const [line, ...rest] = jsonLines(capture(undefined, 'warn', false));
    expect(rest).toHaveLength(0);
    expect(line).toMatchObject({ level: 30, msg: 'the token', n: 1, secret: true, secret_kind: 'demo_token', secret_value: 'sia_x' });
    expect(typeof line!.time).toBe('string');
  });

  it('prints nothing at LOG_LEVEL=silent, on a terminal or not', () => {
    expect(capture(undefined, 'silent', true)).toBe('');
    expect(capture(undefined, 'silent', false)).toBe('');
  });
});

describe('server output when stdout is not a terminal', () => {
  it('is JSON on every line; the demo token and the setup link only as flagged secrets, and they work', async () => {
    const proc = startStoreApi(['all'], { DATA_DIR: tempDir(), SEED_DEMO: 'true', LOG_LEVEL: 'info' });
    let stdout = '';
    proc.child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    try {
      await proc.waitFor(/Webhook worker started/, 120_000);
      const lines = jsonLines(stdout);
      // Nothing twice: the worker's start is one line.
      expect(lines.filter((line) => /webhook worker started/i.test(String(line.msg)))).toHaveLength(1);
      const secrets = lines.filter((line) => line.secret === true);
      expect(secrets.map((line) => line.secret_kind).sort()).toEqual(['admin_setup_link', 'demo_token']);
      const token = secrets.find((line) => line.secret_kind === 'demo_token')!.secret_value as string;
      const link = secrets.find((line) => line.secret_kind === 'admin_setup_link')!.secret_value as string;
      expect(token).toMatch(/^sia_/);
      expect(link).toMatch(/\/admin#\/setup\?code=[\w-]{43}$/);
      // Only the secret_value of the flagged lines holds them.
      for (const line of lines) {
        const { secret_value: _value, ...rest } = line;
        expect(JSON.stringify(rest)).not.toContain(token);
        expect(JSON.stringify(rest)).not.toContain(link.split('code=')[1]);
      }
      const url = lines.find((line) => typeof line.msg === 'string' && line.msg.startsWith('Store Integration API listening on'))!.url as string;
      const res = await fetch(`${url}/api/v1/products?limit=1`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(await proc.stop()).toBe(0);
      expect(() => jsonLines(stdout)).not.toThrow();
    } finally {
      await proc.stop('SIGKILL');
    }
  });

  it('prints nothing at LOG_LEVEL=silent, not even the setup link, and still serves', async () => {
    const port = await freePort();
    const proc = startStoreApi(['all'], { DATA_DIR: tempDir(), SEED_DEMO: 'true', LOG_LEVEL: 'silent', PORT: String(port) });
    try {
      // Ready once it answers /readyz: the start (seeding, setup code) is over by then.
      for (;;) {
        const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) break;
        if (proc.child.exitCode !== null) throw new Error(`exited: ${proc.output()}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(await proc.stop()).toBe(0);
      expect(proc.output()).toBe('');
    } finally {
      await proc.stop('SIGKILL');
    }
  });
});

describe('a start that cannot go on', () => {
  it('names the bad variable in one JSON line and exits 1', async () => {
    const { code, stdout, stderr } = await runToEnd(['serve'], { DATA_DIR: tempDir(), PORT: 'eighty' });
    expect(code).toBe(1);
    expect(stdout).toBe('');
    const lines = jsonLines(stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 60, variables: ['PORT'] });
    expect(lines[0]!.msg).toContain('PORT="eighty"');
  });

  it('names an unusable data directory in one JSON line and exits 1', async () => {
    const notADirectory = join(tempDir(), 'a-file');
    writeFileSync(notADirectory, 'x');
    const { code, stderr } = await runToEnd(['all'], { DATA_DIR: notADirectory });
    expect(code).toBe(1);
    const lines = jsonLines(stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 60, path: notADirectory });
    expect(lines[0]!.msg).toContain('DATA_DIR');
  });

  it('migrate says so in JSON too', async () => {
    const { code, stdout } = await runToEnd(['migrate', '--create'], { DATA_DIR: tempDir(), LOG_LEVEL: 'info' });
    expect(code).toBe(0);
    expect(jsonLines(stdout)).toEqual([expect.objectContaining({ level: 30, msg: expect.stringMatching(/Schema is current\.$/), pending: [] })]);
  });
});

describe('store-api --version', () => {
  it('prints the version of package.json', async () => {
    const { code, stdout } = await runToEnd(['--version'], {});
    expect(code).toBe(0);
    expect(stdout.trim()).toBe(JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).version);
  });
});
