#!/usr/bin/env node
/**
 * Smoke test of one Node version (CI runs it on Node 22 and 24 from the npm registry, besides the
 * full suite on 20): `node test/smoke/smoke.mjs` starts `store-api all` with the Node running this
 * script on a fresh embedded data directory, reads one list with the demo token it prints, creates
 * the first administrator through the setup link it prints, registers a webhook endpoint on a
 * loopback receiver, sends a ping and waits for the signed delivery, then stops the server with
 * SIGTERM and expects exit 0. Plain JavaScript so it needs nothing but Node and the installed
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
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), TIMEOUT_MS); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function expectOk(response, what) {
  const body = await response.text();
  if (!response.ok) throw new Error(`${what}: HTTP ${response.status} ${body}`);
  return body ? JSON.parse(body) : null;
}

const dataDir = mkdtempSync(join(tmpdir(), 'store-api-smoke-'));
let server;
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

  server = spawn(process.execPath, [CLI, 'all'], {
    env: {
      PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0',
      SEED_DEMO_PRODUCTS: '10', LOG_LEVEL: 'warn', WEBHOOK_POLL_INTERVAL_MS: '100', WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = once(server, 'exit');
  await within('the server to print its setup link', new Promise((resolve, reject) => {
    server.stdout.on('data', (chunk) => { output += chunk; if (/#\/setup\?code=[\w-]+["\n]/.test(output)) resolve(); });
    server.stderr.on('data', (chunk) => { output += chunk; });
    exited.then(([code]) => reject(new Error(`the server exited (${code}) before it was ready:\n${output}`)));
  }));
  const base = /listening on (http:\/\/[^\s"]+)/.exec(output)[1];
  const demoToken = /(sia_[\w-]+)/.exec(output)[1];
  const code = /#\/setup\?code=([\w-]+)/.exec(output)[1];
  step(`server up at ${base}`);

  const list = await expectOk(await fetch(`${base}/api/v1/products?limit=2`, { headers: { authorization: `Bearer ${demoToken}` } }), 'product list');
  if (!Array.isArray(list.data) || list.data.length !== 2) throw new Error(`product list: unexpected body ${JSON.stringify(list)}`);
  step('listed products with the demo token');

  const setup = await fetch(`${base}/admin/setup`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code, email: 'smoke@example.com', password: 'smoke test password' }),
  });
  const session = await expectOk(setup, 'setup link');
  const cookie = setup.headers.get('set-cookie').split(';')[0];
  const admin = { cookie, 'x-csrf-token': session.data.csrf_token, 'content-type': 'application/json' };
  step('created the first administrator through the setup link');

  const endpoint = await expectOk(await fetch(`${base}/admin/api/v1/webhooks/endpoints`, {
    method: 'POST', headers: admin, body: JSON.stringify({ url: receiverUrl, event_types: ['product.updated'] }),
  }), 'register endpoint');
  await expectOk(await fetch(`${base}/admin/api/v1/webhooks/endpoints/${endpoint.data.id}/ping`, { method: 'POST', headers: admin, body: '{}' }), 'ping');
  const { headers, body } = await within('the webhook delivery', delivered);
  if (body.type !== 'ping' || !headers['webhook-signature']) throw new Error(`unexpected delivery: ${JSON.stringify({ headers, body })}`);
  step('received the signed ping');

  server.kill('SIGTERM');
  const [exitCode] = await within('the server to stop', exited);
  if (exitCode !== 0) throw new Error(`the server exited with ${exitCode} on SIGTERM:\n${output}`);
  step('stopped cleanly: OK');
} catch (error) {
  process.stderr.write(`smoke (node ${process.version}) FAILED: ${error.stack ?? error}\n`);
  process.exitCode = 1;
} finally {
  if (server && server.exitCode === null) server.kill('SIGKILL');
  receiver.close();
  rmSync(dataDir, { recursive: true, force: true });
}
