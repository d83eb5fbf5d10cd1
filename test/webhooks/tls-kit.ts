/**
 * What the endpoint-credentials tests run on loopback (decision 0058): test certificates made by
 * `selfsigned` (a CA, a server certificate for 127.0.0.1 and client certificates), a TLS receiver
 * that requires a client certificate from that CA, a TLS-terminating proxy that requires one in
 * front of a real broker's plain port (the machine's RabbitMQ and Mosquitto listen without TLS),
 * and an OAuth 2.0 token server (client credentials grant) whose answers a test programs.
 */
import { generate } from 'selfsigned';
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { connect as tcpConnect, type AddressInfo, type Socket } from 'node:net';
import { createServer as createTlsServer, getCACertificates, setDefaultCACertificates, type Server as TlsServer, type TLSSocket } from 'node:tls';

export interface TestCertificates {
  ca: { cert: string; key: string };
  server: { cert: string; key: string };
  client: { cert: string; key: string };
  /** A client certificate from another CA: a receiver trusting only `ca` refuses it. */
  stranger: { cert: string; key: string };
}

const EC = { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' } as const;

async function makeCa(name: string) {
  const ca = await generate([{ name: 'commonName', value: name }], {
    ...EC,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { cert: ca.cert, key: ca.private };
}

async function issue(ca: { cert: string; key: string }, commonName: string, server: boolean) {
  const made = await generate([{ name: 'commonName', value: commonName }], {
    ...EC,
    ca,
    extensions: server
      ? [
          { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] },
          { name: 'extKeyUsage', serverAuth: true },
        ]
      : [{ name: 'extKeyUsage', clientAuth: true }],
  });
  return { cert: made.cert, key: made.private };
}

/** This process's test certificates, made once (see testCertificates). */
let made: Promise<TestCertificates> | undefined;

/**
 * The test certificates, made once per process, with the test CA added to this process's default
 * trust store, so the worker's TLS connections (undici, amqplib, MQTT.js) accept the test servers as
 * they would a receiver with a public certificate. Once: a second CA of the same name added beside
 * the first (a test file running on both back ends) made OpenSSL check the new servers' certificates
 * against the first CA's key (CERT_SIGNATURE_FAILURE) on the second back end.
 */
export function testCertificates(): Promise<TestCertificates> {
  made ??= makeTestCertificates();
  return made;
}

async function makeTestCertificates(): Promise<TestCertificates> {
  const ca = await makeCa('store-api test CA');
  const other = await makeCa('another CA');
  const certificates = {
    ca,
    server: await issue(ca, '127.0.0.1', true),
    client: await issue(ca, 'store-api webhooks', false),
    stranger: await issue(other, 'store-api webhooks', false),
  };
  setDefaultCACertificates([...getCACertificates('default'), ca.cert]);
  return certificates;
}

export interface TlsRequest {
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** The client certificate's subject CN. */
  readonly clientCn: string | undefined;
}

/** An HTTPS receiver on 127.0.0.1 that requires a client certificate issued by the test CA. */
export class MutualTlsReceiver {
  readonly requests: TlsRequest[] = [];
  /** Answers a request; default 200. */
  respond: (request: TlsRequest, res: ServerResponse) => void = (_request, res) => void res.writeHead(200).end('ok');
  /** TLS handshakes refused (no or untrusted client certificate). */
  refusedHandshakes = 0;
  readonly #server: HttpsServer;
  readonly #sockets = new Set<Socket>();

  constructor(certificates: TestCertificates) {
    this.#server = createHttpsServer(
      { cert: certificates.server.cert, key: certificates.server.key, ca: certificates.ca.cert, requestCert: true, rejectUnauthorized: true },
      (req, res) => void this.#handle(req, res),
    );
    this.#server.on('tlsClientError', () => this.refusedHandshakes++);
    this.#server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get url(): string {
    return `https://127.0.0.1:${(this.#server.address() as AddressInfo).port}/hooks`;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const peer = (req.socket as TLSSocket).getPeerCertificate();
    const request = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), clientCn: peer?.subject?.CN as string | undefined };
    this.requests.push(request);
    this.respond(request, res);
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

/**
 * A TLS-terminating proxy on 127.0.0.1 in front of a broker's plain port: it requires a client
 * certificate issued by the test CA and records the subject of each one it accepted.
 */
export class MutualTlsProxy {
  readonly clientCns: string[] = [];
  refusedHandshakes = 0;
  readonly #server: TlsServer;
  readonly #sockets = new Set<Socket>();

  constructor(certificates: TestCertificates, target: { host: string; port: number }) {
    this.#server = createTlsServer(
      { cert: certificates.server.cert, key: certificates.server.key, ca: certificates.ca.cert, requestCert: true, rejectUnauthorized: true },
      (client) => {
        this.clientCns.push(client.getPeerCertificate().subject.CN as string);
        const upstream = tcpConnect(target.port, target.host);
        this.#sockets.add(client);
        this.#sockets.add(upstream);
        const end = () => {
          this.#sockets.delete(client);
          this.#sockets.delete(upstream);
          client.destroy();
          upstream.destroy();
        };
        client.on('error', end).on('close', end);
        upstream.on('error', end).on('close', end);
        client.pipe(upstream);
        upstream.pipe(client);
      },
    );
    this.#server.on('tlsClientError', () => this.refusedHandshakes++);
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

export interface TokenRequest {
  readonly authorization: string | undefined;
  readonly form: URLSearchParams;
}

/**
 * An OAuth 2.0 token server on 127.0.0.1 (client credentials grant): checks the client id and
 * secret (HTTP Basic or in the body) and issues a new random token each time, valid `expiresIn`
 * seconds; `failWith` makes it answer that status with `{"error":"invalid_client"}` instead.
 */
export class TokenServer {
  readonly requests: TokenRequest[] = [];
  readonly issued: string[] = [];
  expiresIn = 3600;
  failWith: number | null = null;
  readonly #server: HttpServer;

  constructor(
    readonly clientId: string,
    readonly clientSecret: string,
  ) {
    this.#server = createHttpServer((req, res) => void this.#handle(req, res));
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/oauth/token`;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    this.requests.push({ authorization: req.headers.authorization, form });
    const json = (status: number, body: unknown) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (this.failWith !== null) return json(this.failWith, { error: 'invalid_client', error_description: 'refused by the test' });
    let id = form.get('client_id');
    let secret = form.get('client_secret');
    const basic = req.headers.authorization?.match(/^Basic (.+)$/);
    if (basic) {
      const [user, pass] = Buffer.from(basic[1]!, 'base64').toString('utf8').split(':');
      id = decodeURIComponent(user!.replaceAll('+', ' '));
      secret = decodeURIComponent(pass!.replaceAll('+', ' '));
    }
    if (form.get('grant_type') !== 'client_credentials') return json(400, { error: 'unsupported_grant_type' });
    if (id !== this.clientId || secret !== this.clientSecret) return json(401, { error: 'invalid_client' });
    const token = `tok-${randomUUID()}`;
    this.issued.push(token);
    json(200, { access_token: token, token_type: 'Bearer', expires_in: this.expiresIn, scope: form.get('scope') });
  }

  async close(): Promise<void> {
    await new Promise((resolve) => this.#server.close(resolve));
  }
}
