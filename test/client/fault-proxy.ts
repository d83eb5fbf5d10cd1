/**
 * A small HTTP proxy in front of a real server for the client's retry tests: each request is either
 * forwarded, answered with a chosen status, dropped (socket destroyed before any answer), or
 * forwarded and cut after some bytes of the body, as `fault(request, n)` decides.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type Fault =
  | { kind: 'forward' }
  | { kind: 'status'; status: number; contentType?: string; body?: string; headers?: Record<string, string> }
  | { kind: 'drop' }
  | { kind: 'cut'; afterBytes: number }
  /** Forwards `afterBytes` of the body, then holds the rest back until `until` resolves. */
  | { kind: 'hold'; afterBytes: number; until: Promise<void> };

export const forward: Fault = { kind: 'forward' };

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

export class FaultProxy {
  /** Decides the fate of request number `n` (1-based). */
  fault: (request: IncomingMessage, n: number) => Fault = () => forward;
  /** Every request's path (with query) and what was done with it, in arrival order. */
  readonly log: { url: string; fault: Fault['kind'] }[] = [];
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();

  constructor(private readonly upstream: string) {
    this.#server = createServer((req, res) => {
      const fault = this.fault(req, this.log.length + 1);
      this.log.push({ url: req.url ?? '', fault: fault.kind });
      if (fault.kind === 'drop') {
        req.socket.destroy();
        return;
      }
      if (fault.kind === 'status') {
        res.writeHead(fault.status, { 'content-type': fault.contentType ?? 'text/html', ...fault.headers }).end(fault.body ?? '<html>bad gateway</html>');
        return;
      }
      const target = new URL(req.url ?? '/', this.upstream);
      const headers = { ...req.headers, host: target.host };
      const out = httpRequest(target, { method: req.method, headers }, (up) => {
        const forwarded = Object.fromEntries(Object.entries(up.headers).filter(([k]) => !HOP_BY_HOP.has(k)));
        res.writeHead(up.statusCode ?? 502, forwarded as Record<string, string>);
        if (fault.kind === 'forward') {
          up.pipe(res);
          return;
        }
        if (fault.kind === 'hold') {
          let sent = 0;
          let released = false;
          void fault.until.then(() => {
            released = true;
            up.resume();
          });
          up.on('data', (chunk: Buffer) => {
            if (released || sent + chunk.length <= fault.afterBytes) {
              sent += chunk.length;
              res.write(chunk);
              return;
            }
            const head = chunk.subarray(0, Math.max(0, fault.afterBytes - sent));
            sent += head.length;
            if (head.length > 0) res.write(head);
            // Hold the remainder: unshift it back and stop reading until released.
            up.pause();
            up.unshift(chunk.subarray(head.length));
          });
          up.on('end', () => res.end());
          return;
        }
        let sent = 0;
        up.on('data', (chunk: Buffer) => {
          if (sent >= fault.afterBytes) return;
          const part = chunk.subarray(0, fault.afterBytes - sent);
          sent += part.length;
          res.write(part);
          if (sent >= fault.afterBytes) {
            // Let the bytes go out, then break the connection in the middle of the body.
            res.once('drain', () => res.socket?.destroy());
            setImmediate(() => res.socket?.destroy());
            up.destroy();
          }
        });
        up.on('end', () => res.end());
      });
      out.on('error', () => res.socket?.destroy());
      req.pipe(out);
    });
    this.#server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  /** http://127.0.0.1:<port> */
  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
