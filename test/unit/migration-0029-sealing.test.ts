/**
 * Migration 0029 seals the rows written before it with its own frozen copy of format v1 (decision
 * 0041), not with admin/idempotency/sealed-answer.ts: what it writes must be what the application
 * opens. Sealed by the migration's copy, opened by sealed-answer.ts; the same key hash and request
 * tag as the application's. (test/api/admin-idempotency.test.ts runs the migration on a table and
 * replays the converted row through the admin API, on both back ends.)
 */
import { describe, expect, it } from 'vitest';
import { answerKeys, idempotencyKeyHash, openAnswer, requestTag } from '../../src/admin/idempotency/sealed-answer.ts';
import { type OldRow, sealRowV1 } from '../../src/schema/migrations/0029-sealed-idempotent-answers.ts';

const rows: OldRow[] = [
  {
    idempotency_key: '7f0c2a9e-1d2b-4c3a-9e8f-0a1b2c3d4e5f',
    principal: 'token:3b1f7c52-8d7e-4f0a-a6c1-2e9d4b5a6c7d',
    request_hash: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
    response_status: 201,
    response_type: 'application/json; charset=utf-8',
    response_body: JSON.stringify({ data: { token: 'sia_secret', name: 'Zoë ✓' } }),
  },
  // No content type and an empty body (a 204), another principal.
  { idempotency_key: 'pos-7-sale-1001', principal: 'admin:42', request_hash: 'ab', response_status: 204, response_type: null, response_body: '' },
];

describe('migration 0029 seals what sealed-answer.ts opens', () => {
  it.each(rows)('a row keyed $idempotency_key by $principal', (row) => {
    const sealed = sealRowV1(row);
    const keys = answerKeys(row.idempotency_key, row.principal);
    expect(sealed.keyHash).toBe(idempotencyKeyHash(row.idempotency_key));
    expect(sealed.requestTag).toBe(requestTag(keys, row.request_hash));
    expect(openAnswer(keys, row.response_status, row.response_type, sealed.sealedBody)).toBe(row.response_body);
    // Bound as the application binds it: another status, another principal's keys do not open it.
    expect(() => openAnswer(keys, row.response_status + 1, row.response_type, sealed.sealedBody)).toThrow();
    expect(() => openAnswer(answerKeys(row.idempotency_key, 'admin:other'), row.response_status, row.response_type, sealed.sealedBody)).toThrow();
    // A fresh nonce each time, as a new answer gets.
    expect(sealRowV1(row).sealedBody).not.toBe(sealed.sealedBody);
  });
});
