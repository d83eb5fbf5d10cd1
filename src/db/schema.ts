/**
 * The Database type: one interface per table, as Kysely sees it. Timestamps are text (see
 * database.ts), numeric and int8 are numbers. Keep in step with schema/migrations/.
 */
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<string, string | undefined, string>;
type NullableText = string | null;

export interface ProductTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  name: string;
  slug: string;
  product_type: string;
  barcode: NullableText;
  sku: NullableText;
  price: ColumnType<number, number | string, number | string>;
  cost_price: ColumnType<number | null, number | string | null, number | string | null>;
  /** Stock of a product without variants; ignored while it has active variants. */
  own_stock: number;
  /** Maintained: Σ active variants' stock when it has any, else own_stock. */
  stock: number;
  category_id: NullableText;
  thumbnail_url: NullableText;
  is_active: boolean;
  created_at: Timestamp;
  last_modified: Timestamp;
  /** Stored documents (db/documents.ts), kept by triggers: never written by the application. */
  doc: ColumnType<unknown, never, never>;
  inventory_doc: ColumnType<unknown, never, never>;
  /** The record's version (migration 0039, decision 0057): 1 when inserted, bumped once per changing transaction by the document triggers. */
  version: Generated<number>;
  /** The transaction that last bumped `version` (xid8 as text). */
  version_xact: ColumnType<string | null, never, never>;
  /** What the last change changed in `doc` / `inventory_doc` (decision 0057), kept by the same triggers. */
  doc_previous: ColumnType<unknown, never, never>;
  inventory_doc_previous: ColumnType<unknown, never, never>;
}

export interface VariantTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  product_id: string;
  name: string;
  sku: NullableText;
  price: ColumnType<number, number | string, number | string>;
  stock: number;
  attributes: ColumnType<Record<string, string>, string, string>;
  position: number;
  is_active: boolean;
  created_at: Timestamp;
}

export interface ImageTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  product_id: string;
  image_url: string;
  is_primary: boolean;
  position: number;
  is_active: boolean;
  created_at: Timestamp;
}

export interface CustomerTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  name: string;
  phone: NullableText;
  email: NullableText;
  city: NullableText;
  is_active: boolean;
  created_at: Timestamp;
  last_modified: Timestamp;
  /** Stored document (db/documents.ts), kept by triggers: never written by the application. */
  doc: ColumnType<unknown, never, never>;
  /** The record's version (migration 0039, decision 0057): 1 when inserted, bumped once per changing transaction by the document triggers. */
  version: Generated<number>;
  /** The transaction that last bumped `version` (xid8 as text). */
  version_xact: ColumnType<string | null, never, never>;
  /** What the last change changed in `doc` (decision 0057), kept by the same triggers. */
  doc_previous: ColumnType<unknown, never, never>;
}

export interface OrderTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  source: string;
  status: string;
  payment_status: string;
  payment_method: NullableText;
  customer_id: NullableText;
  customer_name: NullableText;
  customer_phone: NullableText;
  subtotal: ColumnType<number, number | string, number | string>;
  discount: ColumnType<number, number | string, number | string>;
  delivery_fee: ColumnType<number, number | string, number | string>;
  total: ColumnType<number, number | string, number | string>;
  created_at: Timestamp;
  last_modified: Timestamp;
  /** Stored document (db/documents.ts), kept by triggers: never written by the application. */
  doc: ColumnType<unknown, never, never>;
  /** The record's version (migration 0039, decision 0057): 1 when inserted, bumped once per changing transaction by the document triggers. */
  version: Generated<number>;
  /** The transaction that last bumped `version` (xid8 as text). */
  version_xact: ColumnType<string | null, never, never>;
  /** What the last change changed in `doc` (decision 0057), kept by the same triggers. */
  doc_previous: ColumnType<unknown, never, never>;
}

export interface OrderItemTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  order_id: string;
  product_id: NullableText;
  variant_id: NullableText;
  product_name: string;
  variant_name: NullableText;
  quantity: number;
  unit_price: ColumnType<number, number | string, number | string>;
  total: ColumnType<number, number | string, number | string>;
  position: number;
}

export interface StockMovementTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  product_id: string;
  variant_id: NullableText;
  sku: NullableText;
  reason: string;
  quantity_change: number;
  stock_before: number;
  stock_after: number;
  order_id: NullableText;
  note: NullableText;
  created_at: Timestamp;
  last_modified: Timestamp;
  /** Stored document (db/documents.ts), kept by triggers: never written by the application. */
  doc: ColumnType<unknown, never, never>;
  /** The record's version (migration 0039, decision 0057): 1 when inserted, bumped once per changing transaction by the document triggers. */
  version: Generated<number>;
  /** The transaction that last bumped `version` (xid8 as text). */
  version_xact: ColumnType<string | null, never, never>;
  /** What the last change changed in `doc` (decision 0057), kept by the same triggers. */
  doc_previous: ColumnType<unknown, never, never>;
}

export interface EventTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  /** Insertion order inside one stamp; the poller orders by (created_at, seq). */
  seq: Generated<number>;
  type: string;
  resource_type: string;
  resource_id: string;
  data: ColumnType<unknown, string, string>;
  /** An `*.updated` event's fields changed, with their values before the change (migration 0039, decision 0057); null otherwise. */
  previous: ColumnType<unknown, string | null | undefined, never>;
  created_at: Timestamp;
  /** An example sent by an administrator to one endpoint (migration 0013): never in the feed, fan-out or replays. */
  test: Generated<boolean>;
  /** The W3C trace context of the write that appended it (migration 0038, decision 0052); null when untraced. */
  trace_parent: string | null;
  trace_state: string | null;
}

export interface ApiTokenTable {
  /** The store the row belongs to (migration 0031); set from the statement's store scope when not named. */
  store_id: Generated<string>;
  id: string;
  name: string;
  /** First characters of the token, shown in lists so an admin can tell tokens apart. */
  prefix: string;
  token_hash: string;
  scopes: ColumnType<string[], string[], string[]>;
  rate_limit_standard: number | null;
  rate_limit_export: number | null;
  created_at: Timestamp;
  expires_at: ColumnType<string | null, string | null | undefined, string | null>;
  revoked_at: ColumnType<string | null, string | null | undefined, string | null>;
  last_used_at: ColumnType<string | null, string | null | undefined, string | null>;
  /** After a roll (migration 0012): the replaced secret's hash, accepted until previous_token_expires_at. */
  previous_token_hash: ColumnType<string | null, string | null | undefined, string | null>;
  previous_token_expires_at: ColumnType<string | null, string | null | undefined, string | null>;
  /** The administrator who made the key (migration 0017); NULL: the machine's operator (CLI). */
  made_by_admin_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** That administrator's email when the key was made or transferred to her; NULL with the id. */
  made_by_email: ColumnType<string | null, string | null | undefined, string | null>;
  /** Who was shown the current secret when not its maker (migration 0036: set by a transfer); NULL: the maker. */
  shown_to_admin_id: ColumnType<string | null, string | null | undefined, string | null>;
  shown_to_email: ColumnType<string | null, string | null | undefined, string | null>;
  /** After a roll (migration 0036): who was shown the rolled-out secret; NULL: the operator, or rolled before 0036. */
  previous_shown_to_admin_id: ColumnType<string | null, string | null | undefined, string | null>;
  previous_shown_to_email: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface Database {
  products: ProductTable;
  variants: VariantTable;
  images: ImageTable;
  customers: CustomerTable;
  orders: OrderTable;
  order_items: OrderItemTable;
  stock_movements: StockMovementTable;
  events: EventTable;
  api_tokens: ApiTokenTable;
  // Tables of other features are added to this interface by module augmentation in their folders.
}
