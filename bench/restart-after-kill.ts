/**
 * Restart of the embedded default after a crash (issue 25: "`npm start` after a SIGKILL answers
 * within 3 s on an idle machine"): `npm start`'s command (its node flags and two malloc arenas:
 * `node --max-semi-space-size=4 --optimize-for-size bin/store-api.js all`) on a fresh
 * DATA_DIR (the demo store and its token written by the first start), SIGKILL while it runs, then the same command
 * again: milliseconds from the second spawn to the first /healthz 200, which includes PostgreSQL's
 * recovery of the data directory (its log replayed) inside PGlite. BENCH_RESTART_ROUNDS rounds
 * (default 3) on the same directory; prints JSON with each round and the median's ratio to 3 s.
 *
 * `node --import tsx bench/restart-after-kill.ts`; `npm run bench` runs it (docs/benchmarks.md).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EMBEDDED_NODE_ARGS, SERVER_ENV, freePort, startServer } from './bench-tools.ts';

const CLI = fileURLToPath(new URL('../bin/store-api.js', import.meta.url));
const NODE_ARGS = [...EMBEDDED_NODE_ARGS, CLI, 'all'];

export async function benchRestartAfterKill(rounds = 3): Promise<{ firstStartMs: number; restartMs: number[]; medianMs: number; ratio: number }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'store-api-restart-'));
  try {
    const port = await freePort();
    const env = { ...SERVER_ENV, DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' };
    const first = await startServer(NODE_ARGS, env, port);
    const firstStartMs = first.startMs;
    let running = first;
    const restartMs: number[] = [];
    for (let i = 0; i < rounds; i++) {
      // Something written since the last checkpoint, so the restart has a log to replay.
      await fetch(`${running.origin}/readyz`).then((r) => r.arrayBuffer());
      running.child.kill('SIGKILL');
      await new Promise((resolve) => running.child.once('exit', resolve));
      running = await startServer(NODE_ARGS, env, port);
      restartMs.push(Math.round(running.startMs));
    }
    await running.stop();
    const sorted = [...restartMs].sort((a, b) => a - b);
    const medianMs = sorted[Math.floor(sorted.length / 2)]!;
    return { firstStartMs: Math.round(firstStartMs), restartMs, medianMs, ratio: Number((medianMs / 3000).toFixed(2)) };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.log(JSON.stringify(await benchRestartAfterKill(Number(process.env.BENCH_RESTART_ROUNDS ?? 3))));
}
