/**
 * Signature check of incoming webhooks with the client's verifyWebhook (Standard Webhooks:
 * HMAC-SHA256 over id.timestamp.body, a recent timestamp). Several secrets may be given, so our side
 * can rotate too; the service's own rotation sends two signatures, which verifyWebhook accepts.
 */
import { verifyWebhook } from '@store-api/client';
import type { MirrorRecord } from './sync-resources.ts';

export interface WebhookEvent {
  id: string;
  type: string;
  created_at: string;
  /** The record (store events); ping's data is no record, and the receiver skips it by type. */
  data: MirrorRecord;
}

/** Returns the verified event, or throws with a one-line reason. */
export type WebhookVerifier = (rawBody: string, headers: Record<string, string>) => WebhookEvent;

/** A verifier for `secrets`; throws at once when one is not a whsec_… secret. */
export function webhookVerifier(secrets: readonly string[]): WebhookVerifier {
  if (secrets.length === 0) throw new Error('no signing secret given (--secret whsec_…)');
  // verifyWebhook decodes any base64; a mistyped secret must stop the start, not reject every event.
  for (const secret of secrets) {
    if (!/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret)) throw new Error('the signing secret is not a whsec_… secret');
  }
  return (rawBody, headers) => verifyWebhook(rawBody, headers, secrets) as unknown as WebhookEvent;
}
