/**
 * The webhook tables as Kysely sees them (migration 0002-webhooks), added to the Database interface
 * by module augmentation so the feature stays in its folder.
 */
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<string, string | undefined, string>;
type NullableTimestamp = ColumnType<string | null, string | null | undefined, string | null>;

export interface WebhookEndpointTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  url: string;
  description: string | null;
  /** Empty: every event type. */
  event_types: ColumnType<string[], string[], string[]>;
  enabled: boolean;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: NullableTimestamp;
  consecutive_failures: Generated<number>;
  paused_until: NullableTimestamp;
  /** When the breaker last closed on a success after a pause (migration 0022, decision 0029). */
  recovered_at: NullableTimestamp;
  disabled_reason: string | null;
  /** What the admin API shows of the endpoint's credentials (migration 0040, decision 0058); null: none. */
  credentials: ColumnType<unknown, string | null | undefined, string | null>;
  /** The credentials whole, sealed under WEBHOOK_CREDENTIALS_KEY (webhooks/endpoint-credentials.ts); null: none. */
  credentials_sealed: string | null;
  /** `fifo`: deliveries go out in the events' order, a batch at a time (migration 0041, decision 0059). */
  delivery_order: Generated<DeliveryOrder>;
  /** Most events in one FIFO batch (1–500, default 50). */
  batch_size: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** How an endpoint's deliveries are ordered (decision 0059). */
export type DeliveryOrder = 'unordered' | 'fifo';

export interface WebhookDeliveryTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  status: 'pending' | 'succeeded' | 'failed' | 'dead';
  attempt_count: Generated<number>;
  next_attempt_at: NullableTimestamp;
  locked_by: string | null;
  locked_at: NullableTimestamp;
  locked_until: NullableTimestamp;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  succeeded_at: NullableTimestamp;
  dead_at: NullableTimestamp;
  /** A test delivery of an example event (migration 0013, decision 0020). */
  test: Generated<boolean>;
}

export interface WebhookAttemptTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  delivery_id: string;
  attempt_number: number;
  started_at: Timestamp;
  duration_ms: number;
  status_code: number | null;
  response_body_excerpt: string | null;
  error: string | null;
  outcome: string;
  /** What the attempt sent, credential values redacted (migration 0049). */
  request_headers: ColumnType<Record<string, string> | null, string | null | undefined, string | null>;
  /** What the receiver answered with, bounded (migration 0049). */
  response_headers: ColumnType<Record<string, string> | null, string | null | undefined, string | null>;
}

export interface WebhookPollerStateTable {
  id: number;
  position_created_at: Timestamp;
  position_seq: number;
  updated_at: Timestamp;
}

export interface WebhookStorePositionTable {
  store_id: string;
  position_created_at: Timestamp;
  position_seq: number;
  target_created_at: Timestamp;
  target_seq: number;
  served_at: Timestamp;
}

declare module '../db/schema.ts' {
  interface Database {
    webhook_endpoints: WebhookEndpointTable;
    webhook_deliveries: WebhookDeliveryTable;
    webhook_attempts: WebhookAttemptTable;
    webhook_poller_state: WebhookPollerStateTable;
    webhook_store_positions: WebhookStorePositionTable;
  }
}
