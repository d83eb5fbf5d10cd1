/**
 * Endpoint credentials (decision 0058), on both back ends: extra headers, OAuth 2.0 client
 * credentials and a client certificate reach a TLS receiver that requires one and a loopback token
 * server, both run here; the token is cached and fetched anew on the receiver's 401; a token
 * server's refusal is an attempt failure with its reason; a client certificate reaches RabbitMQ
 * (amqps) and Mosquitto (mqtts) through a TLS-terminating proxy that requires it in front of the
 * real broker, which gets the message. The API shows every secret as "set", the database holds them
 * sealed, and bad input is 400 naming the field with nothing stored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { backends } from '../helpers/test-database.ts';
import { createCustomer } from '../../src/customers/customer.service.ts';
import { waitForAttempts, webhookTestKit, type WebhookTestKit } from './webhook-test-kit.ts';
import { MutualTlsProxy, MutualTlsReceiver, testCertificates, TokenServer, type TestCertificates } from './tls-kit.ts';
import { amqpConsumer, mqttConsumer, MOSQUITTO, RABBITMQ } from './broker-kit.ts';

const HEADER_VALUE = `gw-key-${randomBytes(12).toString('hex')}`;
const CLIENT_SECRET = `s3cr3t+/${randomBytes(12).toString('hex')}`;

describe.each(backends)('endpoint credentials (%s)', (backend) => {
  let kit: WebhookTestKit;
  let certs: TestCertificates;
  let receiver: MutualTlsReceiver;
  let tokens: TokenServer;
  /** Every secret the tests hand the API: none may be found in an answer, a row or an attempt. */
  let secrets: string[];

  const customer = (name: string) => createCustomer(kit.t.database.db, { name, email: `${name.toLowerCase().replaceAll(' ', '.')}@example.com` });
  /** Every row of the tables an endpoint's credentials could leak into, as text. */
  const storedText = async () => {
    const { rows } = await sql<{ t: string }>`
      SELECT row_to_json(e)::text AS t FROM webhook_endpoints e
      UNION ALL SELECT row_to_json(a)::text FROM webhook_attempts a
      UNION ALL SELECT row_to_json(d)::text FROM webhook_deliveries d
      UNION ALL SELECT row_to_json(l)::text FROM admin_audit_log l
    `.execute(kit.t.database.db);
    return rows.map((r) => r.t).join('\n');
  };
  const endpointCount = async () => (await kit.api('GET', '/webhooks/endpoints')).body.data.length as number;

  beforeAll(async () => {
    certs = await testCertificates();
    secrets = [HEADER_VALUE, CLIENT_SECRET, certs.client.key.split('\n')[1]!];
    kit = await webhookTestKit(backend, {
      WEBHOOK_CREDENTIALS_KEY: randomBytes(32).toString('base64'),
      WEBHOOK_BREAKER_THRESHOLD: '1000',
      WEBHOOK_RETRY_SCHEDULE_MS: '60000,60000',
    });
    receiver = await new MutualTlsReceiver(certs).start();
    tokens = await new TokenServer('erp-client', CLIENT_SECRET).start();
  });
  afterAll(async () => {
    await kit?.close();
    await receiver?.close();
    await tokens?.close();
  });

  it('sends the extra headers, an OAuth bearer token and the client certificate; caches the token and renews it on a 401', async () => {
    const created = await kit.api('POST', '/webhooks/endpoints', {
      url: receiver.url,
      event_types: ['customer.created'],
      credentials: {
        headers: { 'X-Gateway-Key': HEADER_VALUE },
        oauth: { token_url: tokens.url, client_id: 'erp-client', client_secret: CLIENT_SECRET, scope: 'webhooks.write' },
        client_certificate: { certificate: certs.client.cert, private_key: certs.client.key },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const endpoint = created.body.data;
    expect(endpoint.credentials).toEqual({
      headers: { 'X-Gateway-Key': 'set' },
      oauth: { token_url: tokens.url, client_id: 'erp-client', scope: 'webhooks.write', client_auth: 'basic', client_secret: 'set' },
      client_certificate: {
        subject: 'CN=store-api webhooks',
        issuer: 'CN=store-api test CA',
        not_after: expect.stringMatching(/^\d{4}-/),
        fingerprint_sha256: expect.stringMatching(/^[0-9A-F:]+$/),
        private_key: 'set',
      },
    });
    expect((await kit.api('GET', `/webhooks/endpoints/${endpoint.id}`)).body.data.credentials).toEqual(endpoint.credentials);

    // One after the other: the second finds the first's token cached (not a fetch both share).
    const reports = [];
    for (const name of ['Mutual One', 'Mutual Two']) {
      const attempted = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
      await customer(name);
      reports.push(...(await attempted));
    }
    expect(reports.map((r) => [r.result.outcome, r.result.error])).toEqual([
      ['success', null],
      ['success', null],
    ]);
    expect(receiver.requests).toHaveLength(2);
    for (const request of receiver.requests) {
      expect(request.clientCn).toBe('store-api webhooks');
      expect(request.headers['x-gateway-key']).toBe(HEADER_VALUE);
      expect(request.headers.authorization).toBe(`Bearer ${tokens.issued[0]}`);
      // The signature is the delivery's own, untouched by the extra headers.
      const headers = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, String(v)]));
      expect(new Webhook(endpoint.secret).verify(request.body, headers)).toMatchObject({ type: 'customer.created' });
    }
    // One token for both. Asked for with HTTP Basic client authentication and the scope.
    expect(tokens.requests).toHaveLength(1);
    expect(tokens.requests[0]!.form.get('grant_type')).toBe('client_credentials');
    expect(tokens.requests[0]!.form.get('scope')).toBe('webhooks.write');
    expect(tokens.requests[0]!.form.get('client_secret')).toBeNull();
    expect(tokens.requests[0]!.authorization).toMatch(/^Basic /);

    // The receiver stops accepting the cached token: a 401, a new token, the same attempt succeeds.
    const revoked = tokens.issued[0];
    receiver.respond = (request, res) => void res.writeHead(request.headers.authorization === `Bearer ${revoked}` ? 401 : 200).end();
    const renewed = waitForAttempts(kit.worker, 1, (r) => r.endpointId === endpoint.id);
    await customer('Mutual Three');
    const [report] = await renewed;
    expect(report!.result).toMatchObject({ outcome: 'success', statusCode: 200 });
    expect(report!.attemptNumber).toBe(1);
    expect(tokens.requests).toHaveLength(2);
    expect(receiver.requests.slice(-2).map((r) => r.headers.authorization)).toEqual([`Bearer ${revoked}`, `Bearer ${tokens.issued[1]}`]);

    // Each attempt keeps the headers it sent, credential values redacted, and the ones answered.
    const deliveries = (await kit.api('GET', `/webhooks/deliveries?endpoint_id=${endpoint.id}`)).body.data as { id: string; event_id: string }[];
    expect(deliveries).toHaveLength(3);
    for (const delivery of deliveries) {
      const detail = (await kit.api('GET', `/webhooks/deliveries/${delivery.id}`)).body.data;
      expect(detail.attempts).toHaveLength(1);
      const [attempt] = detail.attempts;
      const sent = receiver.requests.filter((r) => r.headers['webhook-id'] === delivery.event_id).at(-1)!;
      expect(attempt.request_headers).toEqual({
        'content-type': 'application/json',
        'user-agent': 'store-api-webhooks/1',
        'X-Gateway-Key': '[redacted]',
        'webhook-id': delivery.event_id,
        'webhook-timestamp': sent.headers['webhook-timestamp'],
        'webhook-signature': sent.headers['webhook-signature'],
        authorization: 'Bearer [redacted]',
      });
      expect(attempt.response_headers).toMatchObject({ connection: 'keep-alive', date: expect.stringMatching(/ GMT$/) });
    }
    secrets.push(...tokens.issued);

    const stored = await storedText();
    for (const secret of secrets) expect(stored.includes(secret), 'a secret stored in clear').toBe(false);
    await kit.api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { enabled: false });
  });

  it('a receiver requiring a client certificate refuses an endpoint without one, or with one it does not trust', async () => {
    const bare = await kit.createEndpoint(receiver.url, { event_types: ['customer.created'] });
    const stranger = await kit.createEndpoint(receiver.url, {
      event_types: ['customer.created'],
      credentials: { client_certificate: { certificate: certs.stranger.cert, private_key: certs.stranger.key } },
    });
    const before = receiver.requests.length;
    const attempts = waitForAttempts(kit.worker, 2, (r) => r.endpointId === bare.id || r.endpointId === stranger.id);
    await customer('No Certificate');
    for (const report of await attempts) {
      expect(report.result.outcome).toBe('connection_error');
      expect(report.result.statusCode).toBeNull();
    }
    expect(receiver.requests.length).toBe(before);
    for (const id of [bare.id, stranger.id]) await kit.api('PATCH', `/webhooks/endpoints/${id}`, { enabled: false });
  });

  it("a token server's refusal fails the attempt with its reason and no secret; client_secret in the body when asked", async () => {
    const created = await kit.createEndpoint(receiver.url, {
      event_types: ['customer.created'],
      credentials: {
        oauth: { token_url: tokens.url, client_id: 'erp-client', client_secret: CLIENT_SECRET, client_auth: 'body' },
        client_certificate: { certificate: certs.client.cert, private_key: certs.client.key },
      },
    });
    tokens.failWith = 401;
    try {
      const failed = waitForAttempts(kit.worker, 1, (r) => r.endpointId === created.id);
      await customer('Token Refused');
      const [report] = await failed;
      expect(report!.result.outcome).toBe('credentials_error');
      expect(report!.result.error).toBe(`OAuth token request to ${tokens.url} failed: HTTP 401 (invalid_client)`);
      const asked = tokens.requests.at(-1)!;
      expect(asked.authorization).toBeUndefined();
      expect(asked.form.get('client_id')).toBe('erp-client');
      expect(asked.form.get('client_secret')).toBe(CLIENT_SECRET);
      // Recorded as the attempt's failure, like any other.
      const deliveries = await kit.api('GET', `/webhooks/deliveries?endpoint_id=${created.id}`);
      const detail = await kit.api('GET', `/webhooks/deliveries/${deliveries.body.data[0].id}`);
      // Nothing was sent to the receiver: no headers either way.
      expect(detail.body.data.attempts[0]).toMatchObject({
        outcome: 'credentials_error',
        status_code: null,
        error: report!.result.error,
        request_headers: null,
        response_headers: null,
      });
    } finally {
      tokens.failWith = null;
    }
    const stored = await storedText();
    for (const secret of secrets) expect(stored.includes(secret), 'a secret stored in clear').toBe(false);
    await kit.api('PATCH', `/webhooks/endpoints/${created.id}`, { enabled: false });
  });

  it('updates credentials: headers merge by name, an OAuth edit keeps the stored secret, null removes', async () => {
    const created = await kit.createEndpoint(receiver.url, {
      enabled: false,
      credentials: { headers: { 'X-One': 'one', 'X-Two': 'two' }, oauth: { token_url: tokens.url, client_id: 'a', client_secret: CLIENT_SECRET } },
    });
    const patch = (body: unknown) => kit.api('PATCH', `/webhooks/endpoints/${created.id}`, body);
    const merged = await patch({
      credentials: { headers: { 'X-Two': null, 'X-Three': 'three' }, oauth: { token_url: tokens.url, client_id: 'b', scope: 's' } },
    });
    expect(merged.status, JSON.stringify(merged.body)).toBe(200);
    expect(merged.body.data.credentials).toEqual({
      headers: { 'X-One': 'set', 'X-Three': 'set' },
      oauth: { token_url: tokens.url, client_id: 'b', scope: 's', client_auth: 'basic', client_secret: 'set' },
      client_certificate: null,
    });
    // A URL that cannot carry them is refused while they are there.
    const toBroker = await patch({ url: `amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=x` });
    expect(toBroker.status).toBe(400);
    expect(toBroker.body.errors[0].param).toBe('credentials.headers');
    expect((await patch({ credentials: { oauth: null, headers: { 'X-One': null, 'X-Three': null } } })).body.data.credentials).toBeNull();
    await patch({ credentials: { headers: { 'X-Again': 'again' } } });
    expect((await patch({ credentials: null })).body.data.credentials).toBeNull();
    const { rows } = await sql<{ credentials: unknown; credentials_sealed: string | null }>`
      SELECT credentials, credentials_sealed FROM webhook_endpoints WHERE id = ${created.id}
    `.execute(kit.t.database.db);
    expect(rows[0]).toEqual({ credentials: null, credentials_sealed: null });
  });

  it('refuses bad credentials with 400 problem+json naming the field, storing nothing', async () => {
    const https = receiver.url;
    const cert = { certificate: certs.client.cert, private_key: certs.client.key };
    const cases: [unknown, string][] = [
      [{ url: https, credentials: { headers: { 'webhook-signature': 'v1,forged' } } }, 'credentials.headers.webhook-signature'],
      [{ url: https, credentials: { headers: { 'Content-Type': 'text/plain' } } }, 'credentials.headers.Content-Type'],
      [{ url: https, credentials: { headers: { 'Bad Name': 'x' } } }, 'credentials.headers.Bad Name'],
      [{ url: https, credentials: { headers: { 'X-Split': 'a\r\nInjected: b' } } }, 'credentials.headers.X-Split'],
      // Header names are 1-100 characters (the schema's bound on the name, lost before propertyNames).
      [{ url: https, credentials: { headers: { [`X-${'n'.repeat(99)}`]: 'x' } } }, 'body.credentials.headers'],
      [{ url: https, credentials: { oauth: { token_url: 'http://example.com/token', client_id: 'a', client_secret: 'b' } } }, 'credentials.oauth.token_url'],
      [{ url: https, credentials: { oauth: { token_url: 'not a url', client_id: 'a', client_secret: 'b' } } }, 'credentials.oauth.token_url'],
      [{ url: https, credentials: { oauth: { token_url: tokens.url, client_id: 'a' } } }, 'credentials.oauth.client_secret'],
      [
        { url: https, credentials: { headers: { Authorization: 'Basic x' }, oauth: { token_url: tokens.url, client_id: 'a', client_secret: 'b' } } },
        'credentials.headers.Authorization',
      ],
      [{ url: https, credentials: { client_certificate: { ...cert, certificate: 'not a certificate' } } }, 'credentials.client_certificate.certificate'],
      [{ url: https, credentials: { client_certificate: { ...cert, private_key: 'not a key' } } }, 'credentials.client_certificate.private_key'],
      [{ url: https, credentials: { client_certificate: { ...cert, private_key: certs.stranger.key } } }, 'credentials.client_certificate.private_key'],
      [{ url: https.replace('https:', 'http:'), credentials: { client_certificate: cert } }, 'credentials.client_certificate'],
      [
        { url: `amqp://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=x`, credentials: { client_certificate: cert } },
        'credentials.client_certificate',
      ],
      [
        {
          url: `amqps://guest:guest@${RABBITMQ.host}:${RABBITMQ.port}/%2F?exchange=x`,
          credentials: { oauth: { token_url: tokens.url, client_id: 'a', client_secret: 'b' } },
        },
        'credentials.oauth',
      ],
    ];
    const count = await endpointCount();
    for (const [body, param] of cases) {
      const res = await kit.t.app.inject({ method: 'POST', url: '/admin/api/v1/webhooks/endpoints', headers: kit.admin, payload: body as object });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.json().errors.map((e: { param: string }) => e.param)).toEqual([param]);
    }
    expect(await endpointCount()).toBe(count);
    // The same on update: nothing changes.
    const plain = await kit.createEndpoint(https, { enabled: false });
    const res = await kit.api('PATCH', `/webhooks/endpoints/${plain.id}`, { credentials: { headers: { 'webhook-id': 'x' } } });
    expect(res.status).toBe(400);
    expect(res.body.errors[0].param).toBe('credentials.headers.webhook-id');
    expect((await kit.api('GET', `/webhooks/endpoints/${plain.id}`)).body.data.credentials).toBeNull();
  });

  it('presents the client certificate to RabbitMQ (amqps) and Mosquitto (mqtts) through a TLS proxy that requires it', { timeout: 120_000 }, async () => {
    const amqpProxy = await new MutualTlsProxy(certs, RABBITMQ).start();
    const mqttProxy = await new MutualTlsProxy(certs, MOSQUITTO).start();
    const amqp = await amqpConsumer();
    const mqtt = await mqttConsumer();
    try {
      const certificate = { client_certificate: { certificate: certs.client.cert, private_key: certs.client.key } };
      const subscribed = { event_types: ['customer.created'] };
      const toAmqp = await kit.createEndpoint(`amqps://guest:guest@127.0.0.1:${amqpProxy.port}/%2F?exchange=${amqp.exchange}`, {
        ...subscribed,
        credentials: certificate,
      });
      const toMqtt = await kit.createEndpoint(`mqtts://127.0.0.1:${mqttProxy.port}/${mqtt.prefix}`, { ...subscribed, credentials: certificate });
      // Without the certificate the proxy refuses the handshake.
      const bare = await kit.createEndpoint(`mqtts://127.0.0.1:${mqttProxy.port}/${mqtt.prefix}`, subscribed);
      const ids = [toAmqp.id, toMqtt.id, bare.id];
      const attempts = waitForAttempts(kit.worker, 3, (r) => ids.includes(r.endpointId), 90_000);
      const made = (await customer('Broker Mutual')) as { id: string };
      const reports = await attempts;
      const outcome = (id: string) => reports.find((r) => r.endpointId === id)!.result.outcome;
      expect(outcome(toAmqp.id)).toBe('success');
      expect(outcome(toMqtt.id)).toBe('success');
      expect(outcome(bare.id)).toBe('connection_error');
      expect(mqttProxy.refusedHandshakes).toBeGreaterThanOrEqual(1);
      expect(amqpProxy.clientCns).toContain('store-api webhooks');
      expect(mqttProxy.clientCns).toContain('store-api webhooks');
      // The real brokers behind the proxies have the message.
      await amqp.log.waitFor((l) => l.distinct().size >= 1);
      await mqtt.log.waitFor((l) => l.distinct().size >= 1);
      expect(JSON.parse(amqp.log.messages[0]!.body).data.id).toBe(made.id);
      expect(JSON.parse(mqtt.log.messages[0]!.body).data.id).toBe(made.id);
      for (const id of ids) await kit.api('PATCH', `/webhooks/endpoints/${id}`, { enabled: false });
    } finally {
      await amqp.close();
      await mqtt.close();
      await amqpProxy.close();
      await mqttProxy.close();
    }
  });
});
