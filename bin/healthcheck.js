#!/usr/bin/env node
// The container image's HEALTHCHECK: GET /healthz of this container's listener, exit 0 when it
// answers 200. The role is read from PID 1's command line: `serve` and `all` answer on PORT, `worker`
// on METRICS_PORT (without METRICS_PORT a worker has no listener, and a running process is healthy).
import { readFileSync } from 'node:fs';

const args = (() => {
  try {
    return readFileSync('/proc/1/cmdline', 'utf8').split('\0');
  } catch {
    return [];
  }
})();
const port = args.includes('worker') ? process.env.METRICS_PORT : (process.env.PORT ?? '3000');
if (port === undefined || port === '') process.exit(0);

const controller = new AbortController();
const timer = setTimeout(() => controller.abort(), Number(process.env.HEALTHCHECK_TIMEOUT_MS ?? 4000));
try {
  const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: controller.signal });
  process.exit(res.status === 200 ? 0 : 1);
} catch (error) {
  process.stderr.write(`healthcheck: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
} finally {
  clearTimeout(timer);
}
