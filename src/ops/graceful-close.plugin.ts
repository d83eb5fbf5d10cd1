/**
 * Lets `app.close()` finish in-flight requests without waiting on keep-alive clients.
 *
 * Node's server.close() closes idle connections and stops listening, but a connection whose
 * response is still in flight (a streaming export) stays keep-alive once that response ends, and
 * then lingers for keepAliveTimeout (72 s in Fastify) before close() resolves — longer than any
 * shutdown grace period. So at preClose every response still in flight is told to close its
 * connection when done: `Connection: close` if its headers are not out yet, else the socket is
 * ended right after the last byte. New requests on open connections get Fastify's 503 meanwhile.
 */
import type { FastifyInstance } from 'fastify';
import type { ServerResponse } from 'node:http';
import fp from 'fastify-plugin';

export const gracefulClosePlugin = fp(
  async function gracefulClose(app: FastifyInstance) {
    const inFlight = new Set<ServerResponse>();
    let closing = false;

    const closeWhenDone = (res: ServerResponse) => {
      if (!res.headersSent) {
        res.shouldKeepAlive = false;
        res.setHeader('Connection', 'close');
        return;
      }
      // Node detaches the socket from the response on 'finish' before our listener runs: hold it now.
      const socket = res.socket;
      if (res.writableFinished) socket?.end();
      else res.once('finish', () => socket?.end());
    };

    app.addHook('onRequest', async (_request, reply) => {
      const res = reply.raw;
      inFlight.add(res);
      res.once('close', () => inFlight.delete(res));
      if (closing) closeWhenDone(res);
    });

    app.addHook('preClose', async () => {
      closing = true;
      for (const res of inFlight) closeWhenDone(res);
    });
  },
  { name: 'graceful-close' },
);
