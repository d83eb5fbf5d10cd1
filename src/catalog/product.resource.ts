/** Products as a resource of the read API, the events and the mirror (resources/resource.ts). */
import { type Static, Type } from '@sinclair/typebox';
import { sql } from 'kysely';
import { defineResource } from '../records/resource.ts';
import { Money, Nullable, StringEnum, Timestamp, Uuid, Version } from '../shared/typebox.ts';
import { PRODUCT_TYPES, productJson, productJsonBeforeStores, productSource } from './product.json-sql.ts';

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
    version: Version,
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
  events: {
    prefix: 'product',
    kinds: ['created', 'updated'],
    when: 'a product, one of its variants or images, its price or its stock changes',
    examplePrevious: {
      stock: 14,
      variants: [
        {
          id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f61',
          name: 'M / white',
          sku: 'SHIRT-LIN-M-W',
          price: 49.9,
          stock: 14,
          attributes: { size: 'M', color: 'white' },
        },
      ],
    },
  },
  mirrorQuery: { include_inactive: 'true' },
  document: {
    name: 'product',
    alias: 'p',
    column: 'doc',
    build: productJson,
    buildBeforeStores: productJsonBeforeStores,
    children: [
      { table: 'variants', key: 'product_id' },
      { table: 'images', key: 'product_id' },
    ],
  },
  labelDescription: 'The catalog: products with their variants and images.',
  example: {
    id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f60',
    name: 'Linen shirt',
    slug: 'linen-shirt',
    product_type: 'physical',
    barcode: null,
    sku: 'SHIRT-LIN',
    price: 49.9,
    cost_price: 21.5,
    stock: 12,
    category_id: 'shirts',
    thumbnail_url: 'https://cdn.example.com/linen-shirt.jpg',
    is_active: true,
    variants: [
      {
        id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f61',
        name: 'M / white',
        sku: 'SHIRT-LIN-M-W',
        price: 49.9,
        stock: 12,
        attributes: { size: 'M', color: 'white' },
      },
    ],
    images: [{ id: '0193a5c2-7e41-7a3b-9f10-2b6c8d4e5f62', image_url: 'https://cdn.example.com/linen-shirt.jpg', is_primary: true }],
    created_at: '2026-11-20T09:12:44.120034Z',
    last_modified: '2026-11-21T14:05:30.770123Z',
    version: 3,
  },
});
