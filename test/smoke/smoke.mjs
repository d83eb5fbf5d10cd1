#!/usr/bin/env node
/**
 * Smoke test of an install or an image: `node test/smoke/smoke.mjs` starts `store-api all` with the
 * Node running this script on a fresh embedded data directory (or, with SMOKE_IMAGE=<image>, that
 * container image on a volume, host network), reads one list with the demo token it prints, creates
 * the first administrator through the setup link it prints, registers a webhook endpoint on a
 * loopback receiver, sends a ping and waits for the signed delivery, stops the server with SIGTERM
 * and expects exit 0; then starts it again on the same data (the token still lists), kills it with
 * SIGKILL (leaving the data directory's lock behind) and starts it once more (no stale lock), and
 * stops it with SIGTERM (exit 0). Output may be text or JSON lines. Plain JavaScript so it needs nothing but Node and the installed
 * dependencies. Every wait is on an event, bounded by SMOKE_TIMEOUT_MS (default 120 s).
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const TIMEOUT_MS = Number(process.env.SMOKE_TIMEOUT_MS ?? 120_000);
const CLI = fileURLToPath(new URL('../../bin/store-api.js', import.meta.url));
const step = (text) => process.stdout.write(`smoke (node ${process.version}): ${text}\n`);

/** Resolves with `promise`, or fails naming `what` once TIMEOUT_MS has passed. */
function within(what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function expectOk(response, what) {
  const body = await response.text();
  if (!response.ok) throw new Error(`${what}: HTTP ${response.status} ${body}`);
  return body ? JSON.parse(body) : null;
}

// SMOKE_IMAGE: run the server as that container image (host network; the data directory is the
// volume SMOKE_VOLUME, default a fresh one) instead of `node bin/store-api.js`.
const IMAGE = process.env.SMOKE_IMAGE;
const VOLUME = process.env.SMOKE_VOLUME ?? `store-api-smoke-${process.pid}`;
const dataDir = IMAGE ? '/var/lib/store-api' : mkdtempSync(join(tmpdir(), 'store-api-smoke-'));
let server;
let started = 0;

/**
 * Starts `store-api all` on the smoke's data directory with `env`: { output(), printed(pattern),
 * kill(signal), exited (resolves with the exit code) }.
 */
function startServer(env) {
  const vars = { DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', ...env };
  const name = `store-api-smoke-${process.pid}-${++started}`;
  const child = IMAGE
    ? spawn(
        'docker',
        [
          'run',
          '--rm',
          '--name',
          name,
          '--network',
          'host',
          '-v',
          `${VOLUME}:${dataDir}`,
          ...Object.entries(vars).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
          IMAGE,
          'all',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      )
    : spawn(process.execPath, [CLI, 'all'], { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...vars }, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  const waiters = new Set();
  const onData = (chunk) => {
    text += chunk;
    for (const check of waiters) check();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  return {
    output: () => text,
    exited,
    printed: (pattern) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (pattern.test(text)) {
            waiters.delete(check);
            resolve();
          }
        };
        waiters.add(check);
        check();
        exited.then((code) => reject(new Error(`the server exited (${code}) before printing ${pattern}:\n${text}`)));
      }),
    kill: async (signal) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // A container gets the signal through the engine (PID 1 in it is node itself).
      if (IMAGE) spawn('docker', ['kill', '--signal', signal, name], { stdio: 'ignore' });
      else child.kill(signal);
      await exited;
    },
  };
}

/** Sends `signal` and, when `expected` is given, fails unless the server exits with it. */
async function stopWith(running, signal, expected) {
  await within(`the server to stop on ${signal}`, running.kill(signal));
  const code = await running.exited;
  if (expected !== undefined && code !== expected) throw new Error(`the server exited with ${code} on ${signal}, not ${expected}:\n${running.output()}`);
}
const receiver = createServer();
try {
  // A loopback webhook receiver that resolves on its first request.
  const delivered = new Promise((resolve) => {
    receiver.on('request', (req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
        resolve({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) });
      });
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  const receiverUrl = `http://127.0.0.1:${receiver.address().port}/hook`;

  server = startServer({ SEED_DEMO_PRODUCTS: '10', LOG_LEVEL: 'warn', WEBHOOK_POLL_INTERVAL_MS: '100', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
  await within('the server to print its setup link', server.printed(/#\/setup\?code=[\w-]+["\n]/));
  const output = server.output();
  const base = /listening on (http:\/\/[^\s"]+)/.exec(output)[1];
  const demoToken = /(sia_[\w-]+)/.exec(output)[1];
  const code = /#\/setup\?code=([\w-]+)/.exec(output)[1];
  step(`server up at ${base}`);

  const list = await expectOk(await fetch(`${base}/api/v1/products?limit=2`, { headers: { authorization: `Bearer ${demoToken}` } }), 'product list');
  if (!Array.isArray(list.data) || list.data.length !== 2) throw new Error(`product list: unexpected body ${JSON.stringify(list)}`);
  step('listed products with the demo token');

  const setup = await fetch(`${base}/admin/setup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code, email: 'smoke@example.com', password: 'smoke test password' }),
  });
  const session = await expectOk(setup, 'setup link');
  const cookie = setup.headers.get('set-cookie').split(';')[0];
  const admin = { cookie, 'x-csrf-token': session.data.csrf_token, 'content-type': 'application/json' };
  step('created the first administrator through the setup link');

  const endpoint = await expectOk(
    await fetch(`${base}/admin/api/v1/webhooks/endpoints`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ url: receiverUrl, event_types: ['product.updated'] }),
    }),
    'register endpoint',
  );
  await expectOk(await fetch(`${base}/admin/api/v1/webhooks/endpoints/${endpoint.data.id}/ping`, { method: 'POST', headers: admin, body: '{}' }), 'ping');
  const { headers, body } = await within('the webhook delivery', delivered);
  if (body.type !== 'ping' || !headers['webhook-signature']) throw new Error(`unexpected delivery: ${JSON.stringify({ headers, body })}`);
  step('received the signed ping');

  await stopWith(server, 'SIGTERM', 0);
  step('stopped cleanly on SIGTERM');

  // The same data again: the store, the token and the administrator are still there.
  server = startServer({ LOG_LEVEL: 'warn' });
  await within('the restarted server to start', server.printed(/Webhook worker started/));
  const again = /listening on (http:\/\/[^\s"]+)/.exec(server.output())[1];
  await expectOk(await fetch(`${again}/api/v1/products?limit=1`, { headers: { authorization: `Bearer ${demoToken}` } }), 'product list after a restart');
  step('restarted on the same data: the demo token still lists');
  // A hard kill leaves the data directory's lock behind; the next start must not trip on it.
  await stopWith(server, 'SIGKILL');
  server = startServer({ LOG_LEVEL: 'warn' });
  await within('the server to start after a hard kill', server.printed(/Webhook worker started/));
  const third = /listening on (http:\/\/[^\s"]+)/.exec(server.output())[1];
  await expectOk(await fetch(`${third}/api/v1/products?limit=1`, { headers: { authorization: `Bearer ${demoToken}` } }), 'product list after a hard kill');
  step('started again after SIGKILL: no stale lock');
  await stopWith(server, 'SIGTERM', 0);
  step('OK');
} catch (error) {
  process.stderr.write(`smoke (node ${process.version}) FAILED: ${error.stack ?? error}\n`);
  process.exitCode = 1;
} finally {
  await server?.kill('SIGKILL');
  receiver.close();
  if (!IMAGE) rmSync(dataDir, { recursive: true, force: true });
  else if (!process.env.SMOKE_VOLUME) spawn('docker', ['volume', 'rm', '-f', VOLUME], { stdio: 'ignore' });
}
