/**
 * Core data model: catalog, customers, orders, stock movements, the event log and API tokens.
 * Every list and export walks a (last_modified, id) index, so each page is a keyset lookup.
 */
import type { Kysely } from 'kysely';
import { executeScript } from '../../db/execute-script.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await executeScript(
    db,
    `
    -- ISO 8601 UTC with microseconds and Z: the one timestamp format of every response and cursor.
    CREATE FUNCTION iso_utc(timestamptz) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
      AS $$ SELECT to_char($1 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $$;

    CREATE TABLE products (
      id uuid PRIMARY KEY,
      name text NOT NULL,
      slug text NOT NULL,
      product_type text NOT NULL CHECK (product_type IN ('physical','food','digital','digital_card','service','bundle')),
      barcode text,
      sku text,
      price numeric(14,2) NOT NULL CHECK (price >= 0),
      cost_price numeric(14,2) CHECK (cost_price >= 0),
      own_stock integer NOT NULL DEFAULT 0,
      stock integer NOT NULL DEFAULT 0,
      category_id text,
      thumbnail_url text,
      is_active boolean NOT NULL DEFAULT true,
      created_at timestamptz NOT NULL,
      last_modified timestamptz NOT NULL
    );
    CREATE UNIQUE INDEX products_sku_key ON products (sku) WHERE sku IS NOT NULL;
    CREATE UNIQUE INDEX products_slug_key ON products (slug);
    CREATE INDEX products_last_modified_idx ON products (last_modified, id);
    CREATE INDEX products_active_last_modified_idx ON products (last_modified, id) WHERE is_active;
    CREATE INDEX products_stock_tracked_last_modified_idx ON products (last_modified, id)
      WHERE product_type IN ('physical','food','digital_card');

    CREATE TABLE variants (
      id uuid PRIMARY KEY,
      product_id uuid NOT NULL REFERENCES products(id),
      name text NOT NULL,
      sku text,
      price numeric(14,2) NOT NULL CHECK (price >= 0),
      stock integer NOT NULL DEFAULT 0,
      attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
      position integer NOT NULL DEFAULT 0,
      is_active boolean NOT NULL DEFAULT true,
      created_at timestamptz NOT NULL
    );
    CREATE INDEX variants_product_idx ON variants (product_id, position, id);
    CREATE UNIQUE INDEX variants_sku_key ON variants (sku) WHERE sku IS NOT NULL;

    CREATE TABLE images (
      id uuid PRIMARY KEY,
      product_id uuid NOT NULL REFERENCES products(id),
      image_url text NOT NULL,
      is_primary boolean NOT NULL DEFAULT false,
      position integer NOT NULL DEFAULT 0,
      is_active boolean NOT NULL DEFAULT true,
      created_at timestamptz NOT NULL
    );
    CREATE INDEX images_product_idx ON images (product_id, position, id);

    CREATE TABLE customers (
      id uuid PRIMARY KEY,
      name text NOT NULL,
      phone text,
      email text,
      city text,
      is_active boolean NOT NULL DEFAULT true,
      created_at timestamptz NOT NULL,
      last_modified timestamptz NOT NULL
    );
    CREATE INDEX customers_last_modified_idx ON customers (last_modified, id);

    CREATE TABLE orders (
      id uuid PRIMARY KEY,
      source text NOT NULL CHECK (source IN ('pos','online')),
      status text NOT NULL CHECK (status IN ('pending','processing','preparing','ready','shipped','delivered','completed','cancelled','refunded')),
      payment_status text NOT NULL CHECK (payment_status IN ('pending','paid','failed','expired')),
      payment_method text,
      customer_id uuid REFERENCES customers(id),
      customer_name text,
      customer_phone text,
      subtotal numeric(14,2) NOT NULL,
      discount numeric(14,2) NOT NULL DEFAULT 0,
      delivery_fee numeric(14,2) NOT NULL DEFAULT 0,
      total numeric(14,2) NOT NULL,
      created_at timestamptz NOT NULL,
      last_modified timestamptz NOT NULL,
      CHECK (total = subtotal - discount + delivery_fee)
    );
    CREATE INDEX orders_last_modified_idx ON orders (last_modified, id);
    CREATE INDEX orders_status_last_modified_idx ON orders (status, last_modified, id);
    CREATE INDEX orders_source_last_modified_idx ON orders (source, last_modified, id);

    CREATE TABLE order_items (
      id uuid PRIMARY KEY,
      order_id uuid NOT NULL REFERENCES orders(id),
      product_id uuid REFERENCES products(id),
      variant_id uuid REFERENCES variants(id),
      product_name text NOT NULL,
      variant_name text,
      quantity integer NOT NULL CHECK (quantity > 0),
      unit_price numeric(14,2) NOT NULL CHECK (unit_price >= 0),
      total numeric(14,2) NOT NULL,
      position integer NOT NULL DEFAULT 0,
      CHECK (total = quantity * unit_price)
    );
    CREATE INDEX order_items_order_idx ON order_items (order_id, position, id);

    CREATE TABLE stock_movements (
      id uuid PRIMARY KEY,
      product_id uuid NOT NULL REFERENCES products(id),
      variant_id uuid REFERENCES variants(id),
      sku text,
      reason text NOT NULL CHECK (reason IN ('sale','refund','cancel','adjustment','bulk_import')),
      quantity_change integer NOT NULL,
      stock_before integer NOT NULL,
      stock_after integer NOT NULL,
      order_id uuid REFERENCES orders(id),
      note text,
      created_at timestamptz NOT NULL,
      last_modified timestamptz NOT NULL,
      CHECK (stock_after = stock_before + quantity_change)
    );
    CREATE INDEX stock_movements_last_modified_idx ON stock_movements (last_modified, id);
    CREATE INDEX stock_movements_product_last_modified_idx ON stock_movements (product_id, last_modified, id);

    CREATE TABLE events (
      id uuid PRIMARY KEY,
      seq bigserial NOT NULL,
      type text NOT NULL,
      resource_type text NOT NULL,
      resource_id text NOT NULL,
      data jsonb NOT NULL,
      created_at timestamptz NOT NULL
    );
    CREATE INDEX events_created_at_idx ON events (created_at, seq);

    CREATE TABLE api_tokens (
      id uuid PRIMARY KEY,
      name text NOT NULL,
      prefix text NOT NULL,
      token_hash text NOT NULL UNIQUE,
      scopes text[] NOT NULL,
      rate_limit_standard integer,
      rate_limit_export integer,
      created_at timestamptz NOT NULL,
      expires_at timestamptz,
      revoked_at timestamptz,
      last_used_at timestamptz
    );
  `,
  );
}
