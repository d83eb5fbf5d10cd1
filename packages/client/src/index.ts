/**
 * @store-api/client: typed client of the Store Integration API and verification of its webhooks.
 * See README.md for usage.
 */
export { StoreApiClient } from './store-api.client.ts';
export { ApiConnection, VERSION } from './api-connection.ts';
export type { StoreApiClientOptions } from './api-connection.ts';
export { ResourceClient, ResourceWithGet, isSnapshotUnsupported, isChecksumsUnsupported } from './resource.client.ts';
export { RecordIterator, cursorAfter, DEFAULT_TO_ARRAY_MAX } from './record-iterator.ts';
export type { IterateOptions, PageProgress } from './record-iterator.ts';
export type { ResourceClientsByName } from './generated/resource-clients.ts';
export {
  AdminClient,
  AdminTokens,
  AdminWebhookEndpoints,
  AdminDeliveries,
  AdminProducts,
  AdminOrders,
  AdminCustomers,
  AdminInventory,
  AdminAuditLog,
} from './admin.client.ts';
export type {
  AdminAnswer,
  AdminCallOptions,
  AdminOperationId,
  AdminParams,
  ApiToken,
  ApiTokenWithSecret,
  AuditLogEntry,
  WebhookEndpoint,
  WebhookDelivery,
} from './admin.client.ts';
export { ADMIN_OPERATIONS } from './generated/admin-operations.ts';
export type { RateLimitInfo, ResponseMetadata, WithResponse } from './response-metadata.ts';
export { StoreApiError } from './store-api.error.ts';
export { lines as ndjsonLines, TruncatedBodyError } from './ndjson-lines.ts';
export type { ClientErrorCode, StoreApiErrorCode } from './store-api.error.ts';
export type { RetryInfo } from './http-transport.ts';
export { verifyWebhook, verifyWebhookBatch, WebhookVerificationError } from './webhook-verification.ts';
export type { VerifyWebhookOptions, WebhookHeaders, WebhookVerificationCode } from './webhook-verification.ts';
export type * from './resource-types.ts';
export { RESOURCES as API_RESOURCES } from './generated/resources.ts';
export type { components, operations, paths, webhooks } from './generated/api-types.ts';
