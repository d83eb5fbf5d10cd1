/**
 * The CLI as an operator runs it: `bin/store-api.js` in a child process of this Node, its output
 * collected (tests of the command line).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';

export const BIN = join(import.meta.dirname, '../../bin/store-api.js');

/** Runs `store-api …args` with `env` over this process's; resolves with its exit code and output. */
export function runCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
