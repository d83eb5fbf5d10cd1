/**
 * NATS over TLS goes to the address the URL policy allowed (resolveBrokerHost), not to its name
 * looked up again by the client (a DNS rebinding between the two lookups would reach a private
 * address): the host name is only the TLS server name (SNI and the certificate check). A fake
 * server on 127.0.0.1 asks for TLS and records the ClientHello; the URL's name resolves nowhere.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { connectNats } from '../../src/webhooks/nats-publisher.ts';
import { parseBrokerUrl } from '../../src/webhooks/webhook-destination.ts';

describe('NATS over TLS connects to the checked address', () => {
  let server: Server;
  let port = 0;
  const received: Buffer[] = [];
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('data', (chunk) => {
        received.push(chunk);
        // The TLS ClientHello is all we wanted: end it here (no certificate to offer).
        socket.destroy();
      });
      socket.write('INFO {"server_id":"fake","version":"2.10.0","proto":1,"max_payload":1048576,"headers":true,"tls_required":true}\r\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('dials the allowed address and names the host only in the TLS handshake', async () => {
    const destination = parseBrokerUrl(`nats+tls://token@broker.rebind.invalid:${port}/erp`);
    await expect(connectNats(destination, '127.0.0.1', 3000)).rejects.toThrow();
    const hello = Buffer.concat(received);
    expect(hello.length).toBeGreaterThan(0);
    expect(hello.includes('broker.rebind.invalid')).toBe(true);
  });
});
