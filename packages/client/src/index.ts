/**
 * @store-api/client: typed client of the Store Integration API and verification of its webhooks.
 * See README.md for usage.
 */
export {
  StoreApiClient,
  ResourceClient,
  ResourceWithGet,
  RecordIterator,
  cursorAfter,
  DEFAULT_TO_ARRAY_MAX,
  VERSION,
  isSnapshotUnsupported,
  isChecksumsUnsupported,
  type RangeChecksum,
  type RecordChecksum,
} from './store-api.client.ts';
export { AdminClient, AdminTokens, AdminWebhookEndpoints, AdminDeliveries } from './admin.client.ts';
export type { AdminCallOptions, ApiToken, ApiTokenWithSecret, WebhookEndpoint, WebhookDelivery } from './admin.client.ts';
export type { StoreApiClientOptions, IterateOptions, PageProgress } from './store-api.client.ts';
export { StoreApiError } from './store-api.error.ts';
export { lines as ndjsonLines, TruncatedBodyError } from './ndjson-lines.ts';
export type { ClientErrorCode, StoreApiErrorCode } from './store-api.error.ts';
export type { RetryInfo } from './http-transport.ts';
export { verifyWebhook, WebhookVerificationError } from './webhook-verification.ts';
export type { VerifyWebhookOptions, WebhookHeaders, WebhookVerificationCode } from './webhook-verification.ts';
export type * from './resource-types.ts';
export { RESOURCES as API_RESOURCES } from './generated/resources.ts';
export type { components, operations, paths, webhooks } from './generated/api-types.ts';
