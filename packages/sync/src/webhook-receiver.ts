/**
 * The webhook receiver: verifies each request's signature and applies its event to the mirror in
 * one local transaction (the event id noted, the record written only when newer), answering 2xx only
 * after that transaction committed. A redelivered event id or an older payload changes nothing but
 * is still answered 2xx so the service stops retrying it.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inTransaction, type MirrorDatabase } from './mirror/mirror-database.ts';
import { applyRecords, markEventApplied, recordEvent } from './mirror/mirror.repository.ts';
import { describeError } from './sync-errors.ts';
import { resourceOfEvent } from './sync-resources.ts';
import type { WebhookEvent, WebhookVerifier } from './webhook-verifier.ts';

/** What happened to one request. */
export type EventOutcome = 'applied' | 'stale' | 'duplicate' | 'ignored' | 'bad-signature' | 'bad-request' | 'error';

export interface HandledRequest {
  status: number;
  outcome: EventOutcome;
  event?: WebhookEvent;
  message?: string;
}

/** Largest body accepted: a product with many variants is a few hundred kB at most. */
const MAX_BODY_BYTES = 5 * 1024 * 1024;

/** Verifies and applies one request; never throws (failures become a status and an outcome). */
export async function handleWebhook(
  mirror: MirrorDatabase,
  verify: WebhookVerifier,
  rawBody: string,
  headers: Record<string, string>,
): Promise<HandledRequest> {
  let event: WebhookEvent;
  try {
    event = verify(rawBody, headers);
  } catch (error) {
    return {
      status: 401,
      outcome: 'bad-signature',
      message: `webhook signature rejected (${(error as Error).message}): check --secret against the endpoint's secret`,
    };
  }
  if (!event || typeof event.id !== 'string' || typeof event.type !== 'string')
    return { status: 400, outcome: 'bad-request', message: 'webhook payload without id or type' };
  try {
    const outcome = await inTransaction(mirror, async (trx): Promise<EventOutcome> => {
      const first = await recordEvent(trx, { id: event.id, type: event.type, created_at: String(event.created_at ?? '') });
      if (!first) return 'duplicate';
      const resource = resourceOfEvent(event.type);
      if (!resource) return 'ignored';
      const written = await applyRecords(trx, resource, [event.data]);
      if (written.length === 0) return 'stale';
      await markEventApplied(trx, event.id);
      return 'applied';
    });
    return { status: 200, outcome, event };
  } catch (error) {
    // Rolled back, event id included: the service's retry applies it again from scratch.
    return { status: 500, outcome: 'error', event, message: describeError(error) };
  }
}

export interface ReceiverOptions {
  host?: string;
  port?: number;
  /** Only requests to this path are handled (default: any path). */
  path?: string;
  onRequest?: (result: HandledRequest) => void;
}

export interface RunningReceiver {
  readonly server: Server;
  readonly url: string;
  close(): Promise<void>;
}

/** Starts the HTTP receiver on host:port (default 127.0.0.1:0). */
export async function startReceiver(mirror: MirrorDatabase, verify: WebhookVerifier, options: ReceiverOptions = {}): Promise<RunningReceiver> {
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'POST' || (options.path && req.url?.split('?')[0] !== options.path)) {
        res.writeHead(404).end();
        return;
      }
      let body: string;
      try {
        body = await readBody(req);
      } catch (error) {
        res.writeHead(413).end((error as Error).message);
        return;
      }
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
      const result = await handleWebhook(mirror, verify, body, headers);
      options.onRequest?.(result);
      res.writeHead(result.status, { 'content-type': 'application/json' }).end(JSON.stringify({ outcome: result.outcome }));
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    server,
    url: `http://${address.address}:${address.port}${options.path ?? '/'}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('body too large'));
        req.destroy();
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
