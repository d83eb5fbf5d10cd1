import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, verifyWebhookBatch, WebhookVerificationError } from '@store-api/client';
import { signatureOf, signedContent } from '@store-api/client/webhook-signature';
import { generateSecret, sign, signatureHeaders } from '../../src/webhooks/webhook-signing.ts';
import { batchBody, batchId } from '../../src/webhooks/fifo-line.ts';

describe('Standard Webhooks signing (verified with the public standardwebhooks package)', () => {
  const body = JSON.stringify({ id: 'evt', type: 'order.created', created_at: '2026-01-01T00:00:00.000000Z', data: { total: 19.99, name: 'Zoë' } });
  const now = Math.floor(Date.now() / 1000);

  it('produces whsec_ secrets of 24 random bytes', () => {
    const a = generateSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(Buffer.from(a.slice(6), 'base64')).toHaveLength(24);
    expect(generateSecret()).not.toBe(a);
  });

  it('signs exactly as the reference implementation', () => {
    const secret = generateSecret();
    const reference = new Webhook(secret).sign('msg_1', new Date(now * 1000), body);
    expect(sign(secret, 'msg_1', now, body)).toBe(reference);
  });

  it('headers verify with the current secret and, during a rotation, with the previous one too', () => {
    const current = generateSecret();
    const previous = generateSecret();
    const headers = signatureHeaders([current, previous], 'msg_2', now, body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(current).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(previous).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(generateSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(current).verify(`${body} `, headers)).toThrow();
    expect(() => new Webhook(current).verify(body, { ...headers, 'webhook-id': 'msg_3' })).toThrow();
  });

  it('signing and verification share one signed-content builder that matches the reference both ways', () => {
    const secret = generateSecret();
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    expect(signedContent('msg_4', now, body).toString('utf8')).toBe(`msg_4.${now}.${body}`);
    expect(signatureOf(key, 'msg_4', now, Buffer.from(body, 'utf8'))).toEqual(signatureOf(key, 'msg_4', String(now), body));
    // Signed by the reference implementation, not by the service: the client's verifier accepts it,
    // raw bytes or string, so a builder broken on both sides alike cannot pass.
    const headers = {
      'webhook-id': 'msg_4',
      'webhook-timestamp': String(now),
      'webhook-signature': new Webhook(secret).sign('msg_4', new Date(now * 1000), body),
    };
    expect(verifyWebhook(new TextEncoder().encode(body), headers, secret).id).toBe('evt');
    expect(verifyWebhook(body, headers, secret).id).toBe('evt');
  });

  it('a FIFO batch verifies as one body, signed by the reference implementation, and gives its events in order', () => {
    const secret = generateSecret();
    const events = ['e1', 'e2', 'e3'].map((id) => JSON.stringify({ id, type: 'customer.updated', created_at: '2026-01-01T00:00:00Z', data: { id } }));
    const body = batchBody(events);
    const id = batchId('e1', 3);
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(now), 'webhook-signature': new Webhook(secret).sign(id, new Date(now * 1000), body) };
    expect(signatureHeaders([secret], id, now, body)['webhook-signature']).toBe(headers['webhook-signature']);
    expect(verifyWebhookBatch(body, headers, secret, { now: now * 1000 }).map((e) => e.id)).toEqual(['e1', 'e2', 'e3']);
    // One event is not a batch, and a batch is not one event.
    const single = events[0]!;
    const singleHeaders = signatureHeaders([secret], 'e1', now, single);
    expect(() => verifyWebhookBatch(single, singleHeaders, secret, { now: now * 1000 })).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(body, headers, secret, { now: now * 1000 })).toThrow(/not a Store API event/);
    // A reordered batch is not the batch that was signed.
    const reordered = batchBody([events[1]!, events[0]!, events[2]!]);
    expect(() => verifyWebhookBatch(reordered, headers, secret, { now: now * 1000 })).toThrow(/No webhook signature matches/);
  });
});
