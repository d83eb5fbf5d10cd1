/**
 * Large imports as jobs (decision 0060): a stock CSV import over IMPORT_JOB_ROWS rows is answered
 * 202 with a row here, run by the process that runs background work (worker / all) one job at a time
 * per store, and polled for its progress. The CSV stays in `body` until the job ends, so a job
 * survives a restart: a job whose process stopped is resumed from the last committed step (`done`
 * moves in the same transaction as each step's rows), and says so in `notes`.
 *
 * A store's table: `store_id` leads its key and indexes, row-level security forced with the stores'
 * policy (migration 0031), and at most one running job per store (the partial unique index: two
 * workers claiming the same store's jobs at once cannot both win).
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    CREATE TABLE import_jobs (
      store_id uuid NOT NULL DEFAULT store_api_insert_store() REFERENCES stores (id),
      id uuid NOT NULL,
      kind text NOT NULL CHECK (kind IN ('stock_csv')),
      status text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
      body text,
      rows_total integer NOT NULL,
      rows_done integer NOT NULL DEFAULT 0,
      movements integer NOT NULL DEFAULT 0,
      products integer NOT NULL DEFAULT 0,
      step_rows integer,
      attempts integer NOT NULL DEFAULT 0,
      error jsonb,
      notes jsonb NOT NULL DEFAULT '[]'::jsonb,
      created_by jsonb,
      runner text,
      heartbeat_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      started_at timestamptz,
      finished_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (store_id, id)
    );
    CREATE INDEX import_jobs_store_created_idx ON import_jobs (store_id, created_at DESC, id DESC);
    CREATE INDEX import_jobs_waiting_idx ON import_jobs (created_at, id) WHERE status IN ('queued', 'running');
    CREATE UNIQUE INDEX import_jobs_one_running_idx ON import_jobs (store_id) WHERE status = 'running';
    ALTER TABLE import_jobs ENABLE ROW LEVEL SECURITY;
    ALTER TABLE import_jobs FORCE ROW LEVEL SECURITY;
    CREATE POLICY store_isolation ON import_jobs
      USING (store_id = store_api_current_store()) WITH CHECK (store_id = store_api_current_store());
  `,
  );
}
