/** The client's retry policy (packages/client/src/retry-policy.ts): pure, no I/O. */
import { describe, expect, it } from 'vitest';
import { backoffDelay, decideRetry, retryAfterMs, type RetrySettings } from '../../packages/client/src/retry-policy.ts';

const settings: RetrySettings = { maxRetries: 3, retryBaseDelayMs: 100, retryMaxDelayMs: 1_000, maxRetryAfterMs: 5_000 };
const fixed = { random: () => 1, now: 0 };

describe('client retry policy', () => {
  it('backoff grows exponentially, is capped, and is jittered within [half, whole] of the step', () => {
    expect(backoffDelay(1, 100, 10_000, () => 0)).toBe(50);
    expect(backoffDelay(1, 100, 10_000, () => 1)).toBe(100);
    expect(backoffDelay(4, 100, 10_000, () => 0.5)).toBe(600);
    expect(backoffDelay(20, 100, 1_000, () => 1)).toBe(1_000);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(retryAfterMs(null)).toBeUndefined();
    expect(retryAfterMs('soon')).toBeUndefined();
  });

  it('retries 5xx with backoff, up to maxRetries', () => {
    const outcome = { kind: 'status', status: 503, retryAfter: null } as const;
    expect(decideRetry(outcome, 1, settings, fixed)).toEqual({ retry: true, delayMs: 100 });
    expect(decideRetry(outcome, 3, settings, fixed)).toEqual({ retry: true, delayMs: 400 });
    expect(decideRetry(outcome, 4, settings, fixed)).toEqual({ retry: false, reason: 'retries_exhausted' });
  });

  it('waits the Retry-After of a 429, falls back to backoff without one, and refuses one too long', () => {
    expect(decideRetry({ kind: 'status', status: 429, retryAfter: '2' }, 1, settings, fixed)).toEqual({ retry: true, delayMs: 2_000 });
    expect(decideRetry({ kind: 'status', status: 429, retryAfter: null }, 2, settings, fixed)).toEqual({ retry: true, delayMs: 200 });
    expect(decideRetry({ kind: 'status', status: 429, retryAfter: '60' }, 1, settings, fixed)).toEqual({ retry: false, reason: 'retry_after_too_long' });
  });

  it('never retries other 4xx', () => {
    for (const status of [400, 401, 403, 404, 409]) {
      expect(decideRetry({ kind: 'status', status, retryAfter: '1' }, 1, settings, fixed)).toEqual({ retry: false, reason: 'not_retryable' });
    }
  });

  it('retries transient network failures, not a host that does not exist or a TLS failure', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'EAI_AGAIN', undefined]) {
      expect(decideRetry({ kind: 'network', code }, 1, settings, fixed).retry).toBe(true);
    }
    for (const code of ['ENOTFOUND', 'ERR_TLS_CERT_ALTNAME_INVALID', 'DEPTH_ZERO_SELF_SIGNED_CERT']) {
      expect(decideRetry({ kind: 'network', code }, 1, settings, fixed)).toEqual({ retry: false, reason: 'not_retryable' });
    }
  });

  it('with maxRetries 0 never retries', () => {
    expect(decideRetry({ kind: 'status', status: 500, retryAfter: null }, 1, { ...settings, maxRetries: 0 }, fixed)).toEqual({
      retry: false,
      reason: 'retries_exhausted',
    });
  });

  it('does not retry its own timeouts unless maxTimeoutRetries allows, and never for an unkeyed POST', () => {
    expect(decideRetry({ kind: 'timeout' }, 1, settings, fixed)).toEqual({ retry: false, reason: 'retries_exhausted' });
    expect(decideRetry({ kind: 'timeout' }, 1, { ...settings, maxTimeoutRetries: 1 }, fixed)).toEqual({ retry: true, delayMs: 100 });
    expect(decideRetry({ kind: 'timeout' }, 2, { ...settings, maxTimeoutRetries: 1 }, fixed).retry).toBe(false);
    expect(decideRetry({ kind: 'timeout' }, 1, { ...settings, maxTimeoutRetries: 1 }, { ...fixed, idempotent: false })).toEqual({
      retry: false,
      reason: 'not_retryable',
    });
  });

  it('retries a POST without an Idempotency-Key only when it surely never ran (refused, 429)', () => {
    const unkeyed = { ...fixed, idempotent: false };
    expect(decideRetry({ kind: 'status', status: 503, retryAfter: null }, 1, settings, unkeyed)).toEqual({ retry: false, reason: 'not_retryable' });
    expect(decideRetry({ kind: 'network', code: 'ECONNRESET' }, 1, settings, unkeyed)).toEqual({ retry: false, reason: 'not_retryable' });
    expect(decideRetry({ kind: 'network', code: 'ECONNREFUSED' }, 1, settings, unkeyed).retry).toBe(true);
    expect(decideRetry({ kind: 'status', status: 429, retryAfter: '1' }, 1, settings, unkeyed)).toEqual({ retry: true, delayMs: 1000 });
    // A keyed POST still being processed elsewhere: wait its Retry-After and ask again.
    expect(decideRetry({ kind: 'status', status: 409, retryAfter: '1', code: 'idempotency_key_in_use' }, 1, settings, fixed)).toEqual({
      retry: true,
      delayMs: 1000,
    });
    expect(decideRetry({ kind: 'status', status: 409, retryAfter: null, code: 'conflict' }, 1, settings, fixed).retry).toBe(false);
  });
});
