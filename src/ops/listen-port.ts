/**
 * The ports a server role listens on, checked before the database opens: a port already
 * in use was reported only once the database had opened and migrated (26 s later on a loaded host),
 * as a stack. `checkPortFree` binds the port and lets it go at once, before anything is opened; the
 * real listen, later, can still lose a race for it, so `listenFailure` gives its errors the same
 * one line: the address, the variable that set it and what to do (a ConfigError naming the
 * variable, printed like a bad variable by cli/run-command.ts, exit 1).
 */
import { createServer } from 'node:net';
import { ConfigError } from '../config/config.ts';

/** PORT (the API) or METRICS_PORT (the worker's operational listener). */
type PortVariable = 'PORT' | 'METRICS_PORT';

/** Why a listen failed and what to do, by the socket error's code; `variable` set the port. */
const LISTEN_FAILURES: Record<string, (variable: PortVariable) => { why: string; variables: string[] }> = {
  EADDRINUSE: (variable) => ({
    why: `the port is already in use (another store-api, or another server). Stop that process, or set ${variable} to a free port`,
    variables: [variable],
  }),
  EACCES: (variable) => ({
    why: `this process may not listen there (ports below 1024 need privileges). Set ${variable} to 1024 or above, or give the process the right to bind it`,
    variables: [variable],
  }),
  EADDRNOTAVAIL: () => ({
    why: 'HOST is not an address of this machine. Set HOST to one of its addresses (0.0.0.0 for every interface)',
    variables: ['HOST'],
  }),
};

/** `error` from listening on `host`:`port` as one clear ConfigError when its code is known; else `error` itself. */
export function listenFailure(error: unknown, variable: PortVariable, host: string, port: number): unknown {
  const known = LISTEN_FAILURES[(error as NodeJS.ErrnoException | undefined)?.code ?? ''];
  if (!known) return error;
  const { why, variables } = known(variable);
  const code = (error as NodeJS.ErrnoException).code;
  return new ConfigError(`Cannot listen on ${host}:${port} (${variable}=${port}, ${code}): ${why}. Nothing was started.`, variables);
}

/**
 * Throws listenFailure's error when `host`:`port` cannot be listened on now. Port 0 (any free port)
 * is always free.
 */
export async function checkPortFree(variable: PortVariable, host: string, port: number): Promise<void> {
  if (port === 0) return;
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port, host, exclusive: true }, resolve);
    });
  } catch (error) {
    throw listenFailure(error, variable, host, port);
  }
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
