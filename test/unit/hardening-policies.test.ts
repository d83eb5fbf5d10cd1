/** Pure rules behind the hardening: timestamp range, storable text, log redaction, request ids. */
import { describe, expect, it } from 'vitest';
import { parseIsoTimestamp } from '../../src/shared/time.ts';
import { findUnsafeInput, unstorableText } from '../../src/api/plugins/input-guard.ts';
import { isSafeRequestId, redactUrl } from '../../src/ops/log-redaction.ts';
import { storableCents } from '../../src/shared/money.ts';

describe('timestamps', () => {
  it.each(['0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999999Z', '0004-02-29', '2026-11-23T10:00:00+14:00', '9999-12-31T09:59:59-14:00'])(
    'accepts %s',
    (value) => {
      expect(parseIsoTimestamp(value)).toBeDefined();
    },
  );
  it.each(['0000-01-01', '0000-12-31T23:59:59Z', '0001-01-01T00:00:00+00:01', '9999-12-31T23:59:59-00:01', '0003-02-29', '-infinity', 'epoch', '10000-01-01'])(
    'refuses %s',
    (value) => {
      expect(parseIsoTimestamp(value)).toBeUndefined();
    },
  );
});

describe('input PostgreSQL can store', () => {
  it('names the first non-finite number or unstorable string by its path', () => {
    const param = (path: string[]) => ['body', ...path].join('.');
    expect(findUnsafeInput({ a: [1, { b: Infinity }] }, [], param)).toEqual({ param: 'body.a.1.b', message: 'must be a finite number' });
    expect(findUnsafeInput({ name: 'ok', note: 'x\u0000' }, [], param)?.param).toBe('body.note');
    expect(findUnsafeInput({ attrs: { 'k\ud800': 'v' } }, [], param)?.param).toBe('body.attrs');
    expect(findUnsafeInput({ emoji: '😀', text: 'ünïcödé', n: -0, big: 1e308 }, [], param)).toBeUndefined();
    // A body no schema checked may nest without end: refused, not a stack overflow.
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    expect(findUnsafeInput(deep, [], param)?.message).toMatch(/nested more than 32 levels/);
  });
  it('tells NUL from lone surrogates, and accepts surrogate pairs', () => {
    expect(unstorableText('a\u0000')).toMatch(/NUL/);
    expect(unstorableText('\udc00x')).toMatch(/surrogate/);
    expect(unstorableText('\ud83d\ude00')).toBeUndefined();
  });
  it('keeps money sums inside numeric(14,2)', () => {
    expect(storableCents(99_999_999_999_999)).toBe(99_999_999_999_999);
    expect(storableCents(100_000_000_000_000)).toBeUndefined();
    expect(storableCents(99_999_999_999_999 * 1_000_000)).toBeUndefined();
  });
});

describe('log redaction', () => {
  const token = `sia_${'aB3'.repeat(14)}x`;
  it.each([
    [`/api/v1/products?token=${token}&limit=2`, '/api/v1/products?token=[redacted]&limit=2'],
    ['/api/v1/products?Access-Token=abc', '/api/v1/products?Access-Token=[redacted]'],
    ['/api/v1/products?api_key=short', '/api/v1/products?api_key=[redacted]'],
    [`/api/v1/${token}/x`, '/api/v1/[redacted]/x'],
    [`/x?note=hello%20${token}`, '/x?note=[redacted]'],
    [
      '/api/v1/products?cursor=2026-11-23T10%3A24%3A57.919000Z_4a9c51be-79c1-4270-a81e-9284e0b8a442',
      '/api/v1/products?cursor=2026-11-23T10%3A24%3A57.919000Z_4a9c51be-79c1-4270-a81e-9284e0b8a442',
    ],
    ['/api/v1/orders/0b8d3d1e-4a9c-4270-a81e-9284e0b8a442', '/api/v1/orders/0b8d3d1e-4a9c-4270-a81e-9284e0b8a442'],
    // A broker endpoint URL's password (decision 0031), pasted where it does not belong.
    ['/x?target=amqp://erp:hunter2@mq.example.com/%2F', '/x?target=[redacted]'],
    ['/x?target=mqtts%3A%2F%2Ferp%3Ahunter2%40mq.example.com%2Ferp', '/x?target=[redacted]'],
    ['/x?target=nats://mq.example.com:4222/erp.store', '/x?target=nats://mq.example.com:4222/erp.store'],
  ])('%s → %s', (url, logged) => {
    expect(redactUrl(url)).toBe(logged);
  });
  it('redacts the body of a token that happens to hold no digit (1 token in ~1,500: a CI run logged one)', () => {
    // 43 base64url characters like every token body, with letters, '-' and '_' only.
    const body = 'STlhYe-NqWkPzRbTvXcLmJdGfHs_KoPuYiEwQaZxCvB';
    expect(body).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(redactUrl(`/healthz?${body}=1`)).toBe('/healthz?[redacted]=1');
    expect(redactUrl(`/api/v1/products/${body}`)).toBe('/api/v1/products/[redacted]');
    expect(isSafeRequestId(body)).toBe(false);
  });
  it('keeps request ids that cannot be secrets', () => {
    for (const id of ['erp-sync-42', '4edff348-1815-437c-b604-59a191060921', '0af7651916cd43dd8448eb211c80319c', '01ARZ3NDEKTSV4RRFFQ69G5FAV'])
      expect(isSafeRequestId(id), id).toBe(true);
    for (const id of [token, 'whsec_c2VjcmV0', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig', 'Zm9vYmFyQmF6UXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpL'])
      expect(isSafeRequestId(id), id).toBe(false);
  });
});
