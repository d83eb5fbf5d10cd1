/**
 * `tsc --strict` on generated client code, as a user's project would compile it (NodeNext, ES2022,
 * Node's types), shared by the generator tests (generated-client, generated-generators). Never
 * throws: answers tsc's exit code and what it printed.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface StrictTscOptions {
  /** `--lib`; default ES2023 and the DOM (fetch, Response). */
  lib?: string;
  /** `--typeRoots`, for files outside the project (a temporary directory). */
  typeRoots?: string;
  cwd?: string;
}

export async function strictTsc(
  files: readonly string[],
  { lib = 'ES2023,DOM', typeRoots, cwd = ROOT }: StrictTscOptions = {},
): Promise<{ code: number; out: string }> {
  const args = [
    '--noEmit',
    '--strict',
    '--skipLibCheck',
    '--module',
    'NodeNext',
    '--moduleResolution',
    'NodeNext',
    '--target',
    'ES2022',
    '--allowImportingTsExtensions',
    '--lib',
    lib,
    '--types',
    'node',
    ...(typeRoots ? ['--typeRoots', typeRoots] : []),
    '--pretty',
    'false',
    ...files,
  ];
  return promisify(execFile)(join(ROOT, 'node_modules', '.bin', 'tsc'), args, { cwd })
    .then(({ stdout }) => ({ code: 0, out: stdout }))
    .catch((error: { code?: number; stdout?: string }) => ({ code: typeof error.code === 'number' ? error.code : 1, out: error.stdout ?? String(error) }));
}
