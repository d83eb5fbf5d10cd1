import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { generateSecret, sign, signatureHeaders } from '../../src/webhooks/webhook-signing.ts';

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
});
