/**
 * Connection hygiene: no client address may hold more than
 * MAX_CONNECTIONS_PER_ADDRESS connections at once, and the process warns when its open descriptors
 * near its limit.
 *
 * Why per address, at accept: a process has a fixed number of descriptors (1,024 by default under
 * systemd and many container runtimes). Idle keep-alive connections and slow bodies each hold one
 * for up to KEEP_ALIVE_TIMEOUT_MS / REQUEST_TIMEOUT_MS, so one client opening thousands of them
 * took every descriptor and nobody else was answered. A connection over the cap is destroyed as
 * soon as it is accepted (its descriptor is released at once; it gets no HTTP answer: it has sent
 * nothing yet), counted in `store_api_connections_refused_total` and logged at most once a minute
 * per address. The cap is on the socket's address: behind a reverse proxy every client has the
 * proxy's address, so there raise it above the proxy's connection pool or set 0 and cap at the proxy.
 *
 * The descriptor watch reads /proc/self (Linux; elsewhere it does nothing): when open descriptors
 * reach DESCRIPTOR_WARN_RATIO of the soft limit it logs a warning (again at most once a minute while
 * it lasts) and sets `store_api_descriptors_near_limit` to 1.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { Server, Socket } from 'node:net';
import { counter, gauge } from '../shared/prometheus.ts';
import type { Logger } from 'pino';

/** Share of the descriptor limit at which the watch warns (80 %). */
export const DESCRIPTOR_WARN_RATIO = 0.8;
/** Least time between two log lines about the same address, or about descriptors (1 min). */
const LOG_EVERY_MS = 60_000;
/** How often the descriptor watch looks (10 s). */
const DESCRIPTOR_CHECK_MS = 10_000;

/** Connections closed at accept because their address already held MAX_CONNECTIONS_PER_ADDRESS. */
export const connectionsRefused = counter({
  name: 'store_api_connections_refused_total',
  help: 'Connections closed as soon as accepted because their client address already held MAX_CONNECTIONS_PER_ADDRESS',
});

/** 1 while open descriptors are at or above DESCRIPTOR_WARN_RATIO of the process limit, else 0. */
export const descriptorsNearLimit = gauge({
  name: 'store_api_descriptors_near_limit',
  help: `1 while the process's open file descriptors are at or above ${DESCRIPTOR_WARN_RATIO * 100}% of its limit (see process_open_fds, process_max_fds), else 0`,
});

/**
 * Caps the connections each client address holds on `server` at `maxPerAddress` (0: no cap).
 * Returns the live count per address (for tests and the log).
 */
export function limitConnectionsPerAddress(
  server: Server,
  { maxPerAddress, logger, now = Date.now }: { maxPerAddress: number; logger: Logger; now?: () => number },
): ReadonlyMap<string, number> {
  const open = new Map<string, number>();
  const refusedSinceLog = new Map<string, { count: number; loggedAt: number }>();
  if (maxPerAddress <= 0) return open;
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    if (address === undefined) return;
    const held = open.get(address) ?? 0;
    if (held >= maxPerAddress) {
      socket.destroy();
      connectionsRefused.inc();
      const seen = refusedSinceLog.get(address) ?? { count: 0, loggedAt: Number.NEGATIVE_INFINITY };
      seen.count += 1;
      if (now() - seen.loggedAt >= LOG_EVERY_MS) {
        logger.warn(
          { client_address: address, refused: seen.count, max_connections_per_address: maxPerAddress },
          `refused ${seen.count} connection(s) from ${address}: it already holds ${maxPerAddress} (MAX_CONNECTIONS_PER_ADDRESS)`,
        );
        seen.count = 0;
        seen.loggedAt = now();
      }
      refusedSinceLog.set(address, seen);
      return;
    }
    open.set(address, held + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) {
        open.delete(address);
        // Forget quiet addresses, so the map does not grow with every client ever seen.
        const seen = refusedSinceLog.get(address);
        if (seen && seen.count === 0 && now() - seen.loggedAt >= LOG_EVERY_MS) refusedSinceLog.delete(address);
      } else open.set(address, left);
    });
  });
  return open;
}

/** Open descriptors and their soft limit, from /proc/self; null where there is no /proc (not Linux). */
export function descriptorUsage(): { open: number; limit: number } | null {
  try {
    const limits = readFileSync('/proc/self/limits', 'utf8');
    const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1];
    if (!soft || soft === 'unlimited') return null;
    return { open: readdirSync('/proc/self/fd').length, limit: Number(soft) };
  } catch {
    return null;
  }
}

/** Whether `open` descriptors are near `limit` (at or above DESCRIPTOR_WARN_RATIO of it). */
export function nearDescriptorLimit(open: number, limit: number): boolean {
  return open >= limit * DESCRIPTOR_WARN_RATIO;
}

/**
 * One look at the process's descriptors: sets the gauge and, near the limit, logs a warning (at
 * most once a minute). Keeps its own memory of the last line.
 */
export function descriptorCheck(logger: Logger, { now = Date.now, usage = descriptorUsage } = {}): () => void {
  let loggedAt = Number.NEGATIVE_INFINITY;
  return () => {
    const u = usage();
    if (!u) return;
    const near = nearDescriptorLimit(u.open, u.limit);
    descriptorsNearLimit.set(near ? 1 : 0);
    if (near && now() - loggedAt >= LOG_EVERY_MS) {
      loggedAt = now();
      logger.warn(
        { open_descriptors: u.open, descriptor_limit: u.limit },
        `${u.open} of ${u.limit} file descriptors are open: new connections and files will soon fail; raise the limit (LimitNOFILE, --ulimit nofile) or lower MAX_CONNECTIONS_PER_ADDRESS`,
      );
    }
  };
}

/** Runs descriptorCheck now and every 10 s (unref'd); returns a function that stops it. */
export function watchDescriptors(logger: Logger): () => void {
  const check = descriptorCheck(logger);
  check();
  const timer = setInterval(check, DESCRIPTOR_CHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}
