/**
 * A real HTTP receiver on 127.0.0.1 for webhook tests: records every request (time, headers, raw
 * body) and answers through a programmable handler. Tests wait for the Nth request with
 * `waitForRequests`, a promise, never a sleep.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface ReceivedRequest {
  /** Epoch ms when the body had arrived. */
  readonly at: number;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly json: { id: string; type: string; created_at: string; data: any };
}

/** Answers request number `n` (1-based); may answer late or never (the client's timeout ends it). */
export type Responder = (request: ReceivedRequest, n: number, res: ServerResponse, socket: Socket) => void;

export const ok: Responder = (_req, _n, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
};

export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  respond: Responder = ok;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #waiters: { n: number; resolve: () => void }[] = [];
  /** Distinct TCP connections that carried requests (keep-alive reuse shows as fewer). */
  readonly connections = new Set<Socket>();

  constructor() {
    this.#server = createServer((req, res) => this.#handle(req, res));
    this.#server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hooks`;
  }

  /** Resolves when at least `n` requests have arrived; rejects after `timeoutMs`. */
  waitForRequests(n: number, timeoutMs = 30_000): Promise<ReceivedRequest[]> {
    if (this.requests.length >= n) return Promise.resolve(this.requests.slice(0, n));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`receiver got ${this.requests.length} of ${n} requests within ${timeoutMs} ms`)), timeoutMs);
      this.#waiters.push({
        n,
        resolve: () => {
          clearTimeout(timer);
          resolve(this.requests.slice(0, n));
        },
      });
    });
  }

  /** Requests whose payload satisfies `match`, waiting until there are `n`. */
  async waitFor(match: (r: ReceivedRequest) => boolean, n = 1, timeoutMs = 30_000): Promise<ReceivedRequest[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.requests.filter(match);
      if (found.length >= n) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`receiver got ${found.length} of ${n} matching requests within ${timeoutMs} ms`);
      await this.waitForRequests(this.requests.length + 1, left);
    }
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: ReceivedRequest['json'];
      try {
        json = JSON.parse(body);
      } catch {
        json = { id: '', type: '', created_at: '', data: null };
      }
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
      const received: ReceivedRequest = { at: Date.now(), path: req.url ?? '', headers, body, json };
      this.requests.push(received);
      this.connections.add(req.socket);
      const n = this.requests.length;
      try {
        this.respond(received, n, res, req.socket);
      } finally {
        const ready = this.#waiters.filter((w) => this.requests.length >= w.n);
        this.#waiters = this.#waiters.filter((w) => this.requests.length < w.n);
        for (const w of ready) w.resolve();
      }
    });
  }
}
