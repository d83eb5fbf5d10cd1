/**
 * Admin API for store data with nested rows or state machines: catalog, orders (status and payment transitions), manual
 * stock adjustments and CSV bulk stock import. Responses are `{ "data": <resource> }` in the read
 * API's shape. Every write appends its events in the same transaction (see the services). Flat
 * resources (customers) get their writes from their declaration (record.admin-routes.ts).
 */
import type { FastifyInstance } from 'fastify';
import { Type, type TSchema } from '@sinclair/typebox';
import { PRODUCT_TYPES } from '../../catalog/product.json-sql.ts';
import {
  addImage,
  addVariant,
  createProduct,
  productById,
  updateImage,
  updateProduct,
  updateVariant,
  type ImageInput,
  type ImagePatch,
  type ProductInput,
  type ProductPatch,
  type VariantInput,
  type VariantPatch,
} from '../../catalog/catalog.service.ts';
import { changeOrderStatus, changePaymentStatus, placeOrder, type OrderInput } from '../../orders/order.service.ts';
import { ORDER_STATUSES, PAYMENT_STATUSES, type OrderStatus, type PaymentStatus } from '../../orders/order-status.ts';
import { adjustStock, importStockCsv } from '../../inventory/stock.service.ts';
import { ORDER_SOURCES } from '../../orders/order.json-sql.ts';
import { invalidParameter } from '../../shared/problem.ts';
import { Product } from '../../catalog/product.resource.ts';
import { Order } from '../../orders/order.resource.ts';
import { StockAdjustment, StockImport, dataOf } from '../admin-responses.ts';

const Nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);
const Enum = <T extends readonly string[]>(values: T) => Type.Unsafe<T[number]>({ type: 'string', enum: [...values] });
const Text = (max = 200) => Type.String({ minLength: 1, maxLength: max });
const Money = Type.Number({ minimum: 0, maximum: 999_999_999_999.99, multipleOf: 0.01 });
const Stock = Type.Integer({ minimum: -2_147_483_648, maximum: 2_147_483_647 });
const Url = Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2000 });
const Uuid = Type.String({ format: 'uuid' });
const Attributes = Type.Record(Type.String({ minLength: 1, maxLength: 100 }), Type.String({ maxLength: 500 }), { maxProperties: 50 });
const strict = { additionalProperties: false } as const;

const VariantBody = Type.Object(
  {
    name: Text(),
    sku: Type.Optional(Nullable(Text(100))),
    price: Money,
    stock: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647 })),
    attributes: Type.Optional(Attributes),
  },
  strict,
);
const VariantPatchBody = Type.Object(
  {
    name: Type.Optional(Text()),
    sku: Type.Optional(Nullable(Text(100))),
    price: Type.Optional(Money),
    attributes: Type.Optional(Attributes),
    is_active: Type.Optional(Type.Boolean()),
  },
  { ...strict, minProperties: 1 },
);
const ImageBody = Type.Object({ image_url: Url, is_primary: Type.Optional(Type.Boolean()) }, strict);
const ImagePatchBody = Type.Object(
  {
    image_url: Type.Optional(Url),
    is_primary: Type.Optional(Type.Boolean()),
    is_active: Type.Optional(Type.Boolean()),
  },
  { ...strict, minProperties: 1 },
);
const productFields = {
  name: Text(),
  slug: Type.String({ pattern: '^[a-z0-9]+(?:-[a-z0-9]+)*$', maxLength: 120 }),
  barcode: Nullable(Text(64)),
  sku: Nullable(Text(100)),
  price: Money,
  cost_price: Nullable(Money),
  category_id: Nullable(Text(100)),
  thumbnail_url: Nullable(Url),
  is_active: Type.Boolean(),
};
const ProductBody = Type.Object(
  {
    name: productFields.name,
    slug: Type.Optional(productFields.slug),
    product_type: Enum(PRODUCT_TYPES),
    barcode: Type.Optional(productFields.barcode),
    sku: Type.Optional(productFields.sku),
    price: Money,
    cost_price: Type.Optional(productFields.cost_price),
    stock: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: 'Initial stock of a product without variants' })),
    category_id: Type.Optional(productFields.category_id),
    thumbnail_url: Type.Optional(productFields.thumbnail_url),
    is_active: Type.Optional(Type.Boolean()),
    variants: Type.Optional(Type.Array(VariantBody, { maxItems: 500 })),
    images: Type.Optional(Type.Array(ImageBody, { maxItems: 100 })),
  },
  strict,
);
const ProductPatchBody = Type.Object(Object.fromEntries(Object.entries(productFields).map(([k, v]) => [k, Type.Optional(v)])) as Record<string, TSchema>, {
  ...strict,
  minProperties: 1,
});
const OrderBody = Type.Object(
  {
    source: Enum(ORDER_SOURCES),
    payment_method: Type.Optional(Nullable(Text(50))),
    customer_id: Type.Optional(Nullable(Uuid)),
    customer_name: Type.Optional(Nullable(Text())),
    customer_phone: Type.Optional(Nullable(Text(40))),
    discount: Type.Optional(Money),
    delivery_fee: Type.Optional(Money),
    items: Type.Array(
      Type.Object(
        {
          product_id: Uuid,
          variant_id: Type.Optional(Nullable(Uuid)),
          quantity: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
          unit_price: Type.Optional(Money),
        },
        strict,
      ),
      { minItems: 1, maxItems: 500 },
    ),
  },
  strict,
);
const StatusBody = Type.Object({ status: Enum(ORDER_STATUSES), note: Type.Optional(Nullable(Text(500))) }, strict);
const PaymentBody = Type.Object({ payment_status: Enum(PAYMENT_STATUSES) }, strict);
const AdjustmentBody = Type.Object(
  {
    product_id: Uuid,
    variant_id: Type.Optional(Nullable(Uuid)),
    quantity_change: Stock,
    note: Type.Optional(Nullable(Text(500))),
  },
  strict,
);

const IdParam = Type.Object({ id: Uuid }, strict);
const CsvBody = Type.String({
  description:
    'CSV, UTF-8, first line the header: `sku,stock` (set the stock) or `sku,quantity_change` (add to it), with an optional `note` column. Up to the body limit (10 MiB).',
  examples: ['sku,stock\nTSHIRT-M,12\nTSHIRT-L,7\n'],
});
const VariantParams = Type.Object({ id: Uuid, variantId: Uuid }, strict);
const ImageParams = Type.Object({ id: Uuid, imageId: Uuid }, strict);

export async function storeAdminRoutes(app: FastifyInstance): Promise<void> {
  const db = app.ctx.database.db;
  type P<T> = { params: T };

  // CSV bodies for the stock import (text/csv), up to the app's body limit.
  app.addContentTypeParser(['text/csv', 'text/plain'], { parseAs: 'string' }, (_req, body, done) => done(null, body));

  app.post(
    '/products',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: catalog'],
        operationId: 'createProduct',
        summary: 'Create a product with variants and images',
        body: ProductBody,
        response: { 201: dataOf(Product) },
      },
    },
    async (req, reply) => reply.code(201).send({ data: await createProduct(db, req.body as ProductInput) }),
  );
  app.get(
    '/products/:id',
    {
      config: { permission: 'read' },
      schema: {
        tags: ['Admin: catalog'],
        operationId: 'getAdminProduct',
        summary: 'A product, inactive variants and images included',
        params: IdParam,
        response: { 200: dataOf(Product) },
      },
    },
    async (req) => ({ data: await productById(db, (req.params as P<{ id: string }>['params']).id) }),
  );
  app.patch(
    '/products/:id',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: catalog'],
        operationId: 'updateProduct',
        summary: 'Update a product (is_active=false deactivates)',
        params: IdParam,
        body: ProductPatchBody,
        response: { 200: dataOf(Product) },
      },
    },
    async (req) => ({ data: await updateProduct(db, (req.params as { id: string }).id, req.body as ProductPatch) }),
  );
  app.post(
    '/products/:id/variants',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: catalog'],
        operationId: 'addVariant',
        summary: 'Add a variant to a product; answers the product',
        params: IdParam,
        body: VariantBody,
        response: { 201: dataOf(Product) },
      },
    },
    async (req, reply) => reply.code(201).send({ data: await addVariant(db, (req.params as { id: string }).id, req.body as VariantInput) }),
  );
  app.patch(
    '/products/:id/variants/:variantId',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: catalog'],
        operationId: 'updateVariant',
        summary: 'Update a variant (is_active=false deactivates); answers the product',
        params: VariantParams,
        body: VariantPatchBody,
        response: { 200: dataOf(Product) },
      },
    },
    async (req) => {
      const p = req.params as { id: string; variantId: string };
      return { data: await updateVariant(db, p.id, p.variantId, req.body as VariantPatch) };
    },
  );
  app.post(
    '/products/:id/images',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: catalog'],
        operationId: 'addImage',
        summary: 'Add an image to a product; answers the product',
        params: IdParam,
        body: ImageBody,
        response: { 201: dataOf(Product) },
      },
    },
    async (req, reply) => reply.code(201).send({ data: await addImage(db, (req.params as { id: string }).id, req.body as ImageInput) }),
  );
  app.patch(
    '/products/:id/images/:imageId',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: catalog'],
        operationId: 'updateImage',
        summary: 'Update an image (is_active=false removes it); answers the product',
        params: ImageParams,
        body: ImagePatchBody,
        response: { 200: dataOf(Product) },
      },
    },
    async (req) => {
      const p = req.params as { id: string; imageId: string };
      return { data: await updateImage(db, p.id, p.imageId, req.body as ImagePatch) };
    },
  );

  app.post(
    '/orders',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: orders'],
        operationId: 'placeOrder',
        summary: 'Place an order (takes stock: sale movements)',
        body: OrderBody,
        response: { 201: dataOf(Order) },
      },
    },
    async (req, reply) => reply.code(201).send({ data: await placeOrder(db, req.body as OrderInput) }),
  );
  app.post(
    '/orders/:id/status',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: orders'],
        operationId: 'changeOrderStatus',
        summary: 'Move the order status (cancel/refund restore stock)',
        params: IdParam,
        body: StatusBody,
        response: { 200: dataOf(Order) },
      },
    },
    async (req) => {
      const body = req.body as { status: OrderStatus; note?: string | null };
      return { data: await changeOrderStatus(db, (req.params as { id: string }).id, body.status, body.note) };
    },
  );
  app.post(
    '/orders/:id/payment-status',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: orders'],
        operationId: 'changePaymentStatus',
        summary: 'Move the payment status',
        params: IdParam,
        body: PaymentBody,
        response: { 200: dataOf(Order) },
      },
    },
    async (req) => ({ data: await changePaymentStatus(db, (req.params as { id: string }).id, (req.body as { payment_status: PaymentStatus }).payment_status) }),
  );

  app.post(
    '/inventory/adjustments',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: inventory'],
        operationId: 'adjustStock',
        summary: 'Manual stock adjustment',
        body: AdjustmentBody,
        response: { 201: dataOf(StockAdjustment) },
      },
    },
    async (req, reply) => {
      const body = req.body as { product_id: string; variant_id?: string | null; quantity_change: number; note?: string | null };
      const movementId = await adjustStock(db, body);
      return reply.code(201).send({ data: { movement_id: movementId, product: await productById(db, body.product_id) } });
    },
  );
  app.post(
    '/inventory/import',
    {
      config: { permission: 'write' },
      schema: {
        tags: ['Admin: inventory'],
        operationId: 'importStockCsv',
        summary: 'CSV bulk stock import (text/csv; header sku,stock or sku,quantity_change; optional note). All rows or none.',
        consumes: ['text/csv'],
        body: CsvBody,
        response: { 201: dataOf(StockImport) },
      },
    },
    async (req, reply) => {
      if (typeof req.body !== 'string') throw invalidParameter('body', 'send the CSV as text/csv');
      return reply.code(201).send({ data: await importStockCsv(db, req.body, { log: req.log, intervalMs: app.ctx.config.PROGRESS_LOG_INTERVAL_MS }) });
    },
  );
}
