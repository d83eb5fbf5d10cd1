/**
 * A loopback TCP proxy a test owns, in front of a real server (PostgreSQL): it holds the first
 * `holdFirst` connections silent (accepted, never answered, until the client gives up) and passes
 * every later one through, counting both. What a CPU-starved host looks like to a client whose
 * connect timer fires before the answer is read, without any timing assumption: a held connection
 * is never answered at all.
 */
import { connect, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  /** The proxy's port on 127.0.0.1. */
  readonly port: number;
  /** Connections accepted so far (held and passed). */
  readonly accepted: number;
  /** Connections held silent so far. */
  readonly held: number;
  /** `url` (a connection string) pointing at the proxy instead of its own host and port. */
  through(url: string): string;
  close(): Promise<void>;
}

/** Starts a proxy to `target` (host and port) on 127.0.0.1; `holdFirst` may be Infinity (hold every connection). */
export async function startTcpProxy(target: { host: string; port: number }, { holdFirst = 0 }: { holdFirst?: number } = {}): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let held = 0;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = createServer((client) => {
    accepted += 1;
    track(client);
    if (held < holdFirst) {
      held += 1;
      return; // never answered: the client's own timeout ends it
    }
    const upstream = connect(target.port, target.host);
    track(upstream);
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    get accepted() {
      return accepted;
    },
    get held() {
      return held;
    },
    through(url) {
      const rewritten = new URL(url);
      rewritten.hostname = '127.0.0.1';
      rewritten.port = String(port);
      return rewritten.toString();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Host and port of a postgres:// connection string. */
export function hostAndPort(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 5432) };
}
