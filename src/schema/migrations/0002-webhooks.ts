/**
 * Webhooks: endpoints (with their signing secrets and circuit-breaker state), the delivery queue
 * (one row per event × endpoint, claimed under a lease), every attempt, and the event poller's
 * position in the event log. See src/webhooks/ and docs/decisions/0002-webhook-delivery-queue.md.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE webhook_endpoints (
      id uuid PRIMARY KEY,
      url text NOT NULL,
      description text,
      -- Empty array: every event type.
      event_types text[] NOT NULL DEFAULT '{}',
      enabled boolean NOT NULL DEFAULT true,
      secret text NOT NULL,
      previous_secret text,
      previous_secret_expires_at timestamptz,
      consecutive_failures integer NOT NULL DEFAULT 0,
      paused_until timestamptz,
      disabled_reason text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );

    CREATE TABLE webhook_deliveries (
      id uuid PRIMARY KEY,
      event_id uuid NOT NULL REFERENCES events(id),
      event_type text NOT NULL,
      endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id),
      status text NOT NULL CHECK (status IN ('pending','succeeded','failed','dead')),
      attempt_count integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz,
      -- The lease: which worker holds the row, since when, and until when (then anyone may take it).
      locked_by text,
      locked_at timestamptz,
      locked_until timestamptz,
      last_status_code integer,
      last_error text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      succeeded_at timestamptz,
      dead_at timestamptz,
      CHECK ((status IN ('pending','failed')) = (next_attempt_at IS NOT NULL))
    );
    -- The claim takes each endpoint's oldest due rows (so one endpoint's backlog never starves another),
    -- and finds leases to wait for among the few rows in flight.
    CREATE INDEX webhook_deliveries_endpoint_due_idx ON webhook_deliveries (endpoint_id, next_attempt_at, id) WHERE status IN ('pending','failed');
    CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (locked_until) WHERE locked_until IS NOT NULL;
    CREATE INDEX webhook_deliveries_created_idx ON webhook_deliveries (created_at DESC, id DESC);
    CREATE INDEX webhook_deliveries_endpoint_created_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
    CREATE INDEX webhook_deliveries_status_created_idx ON webhook_deliveries (status, created_at DESC, id DESC);
    CREATE INDEX webhook_deliveries_succeeded_at_idx ON webhook_deliveries (succeeded_at) WHERE succeeded_at IS NOT NULL;
    CREATE INDEX webhook_deliveries_dead_at_idx ON webhook_deliveries (dead_at) WHERE dead_at IS NOT NULL;
    CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);

    CREATE TABLE webhook_attempts (
      id uuid PRIMARY KEY,
      delivery_id uuid NOT NULL REFERENCES webhook_deliveries(id),
      attempt_number integer NOT NULL,
      started_at timestamptz NOT NULL,
      duration_ms integer NOT NULL,
      status_code integer,
      response_body_excerpt text,
      error text,
      outcome text NOT NULL
    );
    CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, attempt_number);
    CREATE INDEX webhook_attempts_started_idx ON webhook_attempts (started_at);

    -- One row: how far the poller has read the event log, as (created_at, seq) of the last event read.
    CREATE TABLE webhook_poller_state (
      id integer PRIMARY KEY CHECK (id = 1),
      position_created_at timestamptz NOT NULL,
      position_seq bigint NOT NULL,
      updated_at timestamptz NOT NULL
    );
    -- Start at the beginning of the log: events written before the first endpoint exist fan out to
    -- no one, and the poller skips over them in one step while no endpoint is enabled.
    INSERT INTO webhook_poller_state (id, position_created_at, position_seq, updated_at)
      VALUES (1, '-infinity', 0, now());

    -- Wakes pollers listening on PostgreSQL as soon as a write that appended events commits
    -- (NOTIFY is delivered at commit). One notification per statement, not per row.
    -- (Body on one line: execute-script.ts splits statements at a ';' that ends a line.)
    CREATE FUNCTION notify_store_events() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('store_events', ''); RETURN NULL; END $$;
    CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION notify_store_events();
  `,
  );
}
