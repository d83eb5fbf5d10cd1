/**
 * The log on a terminal (decision 0033): one short line per request, when it completes, and short
 * lines for other records; JSON lines anywhere else, as before.
 */
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/main/runtime.ts';
import { TerminalLogFormatter } from '../../src/ops/terminal-log.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/test-database.ts';
import { createToken } from '../../src/tokens/token.service.ts';

function capture() {
  const out = new PassThrough();
  let text = '';
  out.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return { out, text: () => text };
}

describe('the terminal log of a serving app', () => {
  let database: TestDatabase;
  let app: App;
  let terminal: ReturnType<typeof capture>;
  const config = loadConfig({ LOG_LEVEL: 'info', SEED_DEMO: 'false' });

  beforeAll(async () => {
    database = await openTestDatabase('pglite');
    terminal = capture();
    app = await buildApp({ config, database, logger: createLogger(config, terminal.out, { terminal: true }) });
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  it('is one short line per request, credentials in the URL redacted, and nothing twice', async () => {
    const { token } = await createToken(database.db, { name: 'terminal' });
    const before = terminal.text().length;
    await app.inject({ url: '/api/v1/products?limit=1', headers: { authorization: `Bearer ${token}` } });
    await app.inject({ url: `/api/v1/orders?access_token=${token}` });
    const lines = terminal.text().slice(before).trimEnd().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(/^\d\d:\d\d:\d\d GET \/api\/v1\/products\?limit=1 200 \d+\.\d ms$/),
      expect.stringMatching(/^\d\d:\d\d:\d\d GET \/api\/v1\/orders\?access_token=\S+ \d{3} \d+\.\d ms$/),
    ]);
    expect(terminal.text()).not.toContain(token);
    expect(terminal.text()).not.toContain('{"level"');
  });

  it('stays JSON lines when the destination is not a terminal', async () => {
    const pipe = capture();
    createLogger(config, pipe.out).info({ n: 1 }, 'hello');
    await new Promise((resolve) => setImmediate(resolve));
    expect(JSON.parse(pipe.text())).toMatchObject({ level: 30, msg: 'hello', n: 1 });
  });
});

describe('TerminalLogFormatter', () => {
  it("shows the level above info, the message, further fields, and an error's message (its stack from error on)", () => {
    const f = new TerminalLogFormatter();
    expect(f.format({ level: 30, time: '2026-11-26T18:30:01.123Z', pid: 1, hostname: 'h', msg: 'Webhook worker started' })).toBe(
      '18:30:01 Webhook worker started\n',
    );
    expect(f.format({ level: 40, time: '2026-11-26T18:30:02.000Z', msg: 'slow', endpoint: 'a b', attempts: 3 })).toBe(
      '18:30:02 WARN slow  endpoint="a b" attempts=3\n',
    );
    expect(f.format({ level: 40, time: '2026-11-26T18:30:03.000Z', msg: 'lost', err: { message: 'reset', stack: 'Error: reset\n    at x' } })).toBe(
      '18:30:03 WARN lost (reset)\n',
    );
    expect(f.format({ level: 50, time: '2026-11-26T18:30:04.000Z', msg: 'failed', err: { message: 'boom', stack: 'Error: boom\n    at y' } })).toBe(
      '18:30:04 ERROR failed\nError: boom\n    at y\n',
    );
  });
});
