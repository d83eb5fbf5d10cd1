/**
 * Placeholder until the webhooks feature lands: the worker role starts nothing yet.
 * (Replaced by the event poller + dispatcher; see issue "Webhooks".)
 */
import type { AppContext } from '../app-context.ts';

export interface WebhookWorker {
  stop(): Promise<void>;
}

export async function startWebhookWorker(_ctx: AppContext): Promise<WebhookWorker> {
  return { stop: async () => {} };
}
