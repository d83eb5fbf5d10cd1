/** Products as a resource of the read API, the events and the mirror (resources/resource.ts). */
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import { defineResource } from '../resources/resource.ts';
import { Money, Nullable, StringEnum, Timestamp, Uuid } from '../shared/typebox.ts';
import { PRODUCT_TYPES, productSource } from './product.json-sql.ts';

export const Variant = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    sku: Nullable(Type.String()),
    price: Money,
    stock: Type.Integer(),
    attributes: Type.Record(Type.String(), Type.String(), { description: 'Attribute name → value' }),
  },
  { title: 'Variant', additionalProperties: false },
);

export const Image = Type.Object(
  {
    id: Uuid,
    image_url: Type.String({ format: 'uri' }),
    is_primary: Type.Boolean(),
  },
  { title: 'Image', additionalProperties: false },
);

export const Product = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    slug: Type.String(),
    product_type: StringEnum(PRODUCT_TYPES),
    barcode: Nullable(Type.String()),
    sku: Nullable(Type.String()),
    price: Money,
    cost_price: Nullable(Money),
    stock: Type.Integer({ description: "Σ variants' stock when the product has variants, else its own" }),
    category_id: Nullable(Type.String()),
    thumbnail_url: Nullable(Type.String({ format: 'uri' })),
    is_active: Type.Boolean(),
    variants: Type.Array(Variant),
    images: Type.Array(Image),
    created_at: Timestamp,
    last_modified: Timestamp,
  },
  { title: 'Product', additionalProperties: false },
);
/** A product as the read API serves it. */
export type Product = Static<typeof Product>;

export const productResource = defineResource({
  name: 'products',
  path: 'products',
  noun: 'product',
  summary: 'products, variants and images',
  label: 'Products',
  scope: 'products:read',
  table: 'products',
  key: 'id',
  record: Product,
  nested: [Variant, Image],
  source: productSource,
  filters: {
    include_inactive: Type.Optional(Type.Boolean({ default: false, description: 'Include deactivated products' })),
  },
  conditions: (q) => (q.include_inactive === true ? [] : [sql`p.is_active`]),
  single: true,
  description: {
    list: 'List active products with variants and images (include_inactive=true for all)',
    get: 'One product with all its variants and images',
    export: 'Export products as NDJSON, up to 500 per request',
  },
  events: { prefix: 'product', kinds: ['created', 'updated'] },
  mirrorQuery: { include_inactive: 'true' },
});
