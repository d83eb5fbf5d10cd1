/**
 * Admin API for store data with nested rows or state machines: catalog, orders (status and payment transitions), manual
 * stock adjustments and CSV bulk stock import. Responses are `{ "data": <resource> }` in the read
 * API's shape. Every write appends its events in the same transaction (see the services). Flat
 * resources (customers) get their writes from their declaration (record.admin-routes.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
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
import { adjustStock } from '../../inventory/stock.service.ts';
import { importStockCsv } from '../../inventory/stock-import.ts';
import { importJob, importJobs, importJobsQueued, importRunsAsJob, importsWaiting, submitImportJob } from '../../inventory/import-job.service.ts';
import { activeRequestTransaction } from '../../db/request-transaction.ts';
import { NamedValues, StringEnum } from '../../shared/typebox.ts';
import { ORDER_SOURCES } from '../../orders/order.json-sql.ts';
import { ApiError, invalidParameter } from '../../shared/problem.ts';
import { currentStoreId } from '../../db/store-scope.ts';
import { StoreSlots } from '../../stores/store-slots.ts';
import { checkRecordLimit } from '../../stores/record-limits.ts';
import { Product } from '../../catalog/product.resource.ts';
import { Order } from '../../orders/order.resource.ts';
import { ImportJob, StockAdjustment, StockImport, dataOf } from '../admin-responses.ts';

const Nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);
const Enum = <T extends readonly string[]>(values: T) => Type.Unsafe<T[number]>({ type: 'string', enum: [...values] });
const Text = (max = 200) => Type.String({ minLength: 1, maxLength: max });
const Money = Type.Number({ minimum: 0, maximum: 999_999_999_999.99, multipleOf: 0.01 });
const Stock = Type.Integer({ minimum: -2_147_483_648, maximum: 2_147_483_647 });
const Url = Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2000 });
const Uuid = Type.String({ format: 'uuid' });
const Attributes = NamedValues({ minLength: 1, maxLength: 100 }, Type.String({ maxLength: 500 }), { maxProperties: 50 });
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
const JobListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Jobs listed, newest first' })),
    status: Type.Optional(StringEnum(['waiting'] as const, { description: '`waiting`: only the jobs queued or running' })),
  },
  strict,
);
const VariantParams = Type.Object({ id: Uuid, variantId: Uuid }, strict);
const ImageParams = Type.Object({ id: Uuid, imageId: Uuid }, strict);

/** One store route: its operation in the OpenAPI document and what it answers as `{ "data": … }`. */
interface StoreRoute {
  /** Method, URL, tag (`Admin: …`), operationId and summary. */
  readonly operation: readonly ['GET' | 'POST' | 'PATCH', string, 'catalog' | 'orders' | 'inventory', string, string];
  readonly schemas: {
    readonly params?: TSchema;
    readonly consumes?: string[];
    readonly body?: TSchema;
    readonly querystring?: TSchema;
    /** The success status and the schema of its `data`. */
    readonly answers: readonly [200 | 201, TSchema];
    /** A 202 the route may answer instead (it sets `reply.code(202)`), with the schema of its `data`. */
    readonly accepted?: TSchema;
  };
  readonly handle: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
}

/** Declares `route` on `app`: reads need `read`, writes `write` (admin-api.routes.ts audits and keys them). */
function storeRoute(app: FastifyInstance, route: StoreRoute): void {
  const [method, url, tag, operationId, summary] = route.operation;
  const { answers, accepted, ...request } = route.schemas;
  const [status, data] = answers;
  app.route({
    method,
    url,
    config: { permission: method === 'GET' ? 'read' : 'write' },
    schema: {
      tags: [`Admin: ${tag}`],
      operationId,
      summary,
      ...request,
      response: { [status]: dataOf(data), ...(accepted ? { 202: dataOf(accepted) } : {}) },
    },
    handler: async (req, reply) => {
      const answer = await route.handle(req, reply);
      return reply.code(accepted && reply.statusCode === 202 ? 202 : status).send({ data: answer });
    },
  });
}

const id = (req: FastifyRequest) => (req.params as { id: string }).id;

export async function storeAdminRoutes(app: FastifyInstance): Promise<void> {
  const db = app.ctx.database.db;
  const imports = new StoreSlots('imports', app.ctx.config.STORE_MAX_IMPORTS, app.sharedStore);

  // CSV bodies for the stock import (text/csv), up to the app's body limit.
  app.addContentTypeParser(['text/csv', 'text/plain'], { parseAs: 'string' }, (_req, body, done) => done(null, body));

  const routes: StoreRoute[] = [
    {
      operation: ['POST', '/products', 'catalog', 'createProduct', 'Create a product with variants and images'],
      schemas: { body: ProductBody, answers: [201, Product] },
      handle: async (req) => {
        await checkRecordLimit(db, 'products', app.ctx.config.STORE_MAX_PRODUCTS);
        return createProduct(db, req.body as ProductInput);
      },
    },
    {
      operation: ['GET', '/products/:id', 'catalog', 'getAdminProduct', 'A product, inactive variants and images included'],
      schemas: { params: IdParam, answers: [200, Product] },
      handle: (req) => productById(db, id(req)),
    },
    {
      operation: ['PATCH', '/products/:id', 'catalog', 'updateProduct', 'Update a product (is_active=false deactivates)'],
      schemas: { params: IdParam, body: ProductPatchBody, answers: [200, Product] },
      handle: (req) => updateProduct(db, id(req), req.body as ProductPatch),
    },
    {
      operation: ['POST', '/products/:id/variants', 'catalog', 'addVariant', 'Add a variant to a product; answers the product'],
      schemas: { params: IdParam, body: VariantBody, answers: [201, Product] },
      handle: (req) => addVariant(db, id(req), req.body as VariantInput),
    },
    {
      operation: [
        'PATCH',
        '/products/:id/variants/:variantId',
        'catalog',
        'updateVariant',
        'Update a variant (is_active=false deactivates); answers the product',
      ],
      schemas: { params: VariantParams, body: VariantPatchBody, answers: [200, Product] },
      handle: (req) => updateVariant(db, id(req), (req.params as { variantId: string }).variantId, req.body as VariantPatch),
    },
    {
      operation: ['POST', '/products/:id/images', 'catalog', 'addImage', 'Add an image to a product; answers the product'],
      schemas: { params: IdParam, body: ImageBody, answers: [201, Product] },
      handle: (req) => addImage(db, id(req), req.body as ImageInput),
    },
    {
      operation: ['PATCH', '/products/:id/images/:imageId', 'catalog', 'updateImage', 'Update an image (is_active=false removes it); answers the product'],
      schemas: { params: ImageParams, body: ImagePatchBody, answers: [200, Product] },
      handle: (req) => updateImage(db, id(req), (req.params as { imageId: string }).imageId, req.body as ImagePatch),
    },
    {
      operation: ['POST', '/orders', 'orders', 'placeOrder', 'Place an order (takes stock: sale movements)'],
      schemas: { body: OrderBody, answers: [201, Order] },
      handle: async (req) => {
        await checkRecordLimit(db, 'orders', app.ctx.config.STORE_MAX_ORDERS);
        return placeOrder(db, req.body as OrderInput);
      },
    },
    {
      operation: ['POST', '/orders/:id/status', 'orders', 'changeOrderStatus', 'Move the order status (cancel/refund restore stock)'],
      schemas: { params: IdParam, body: StatusBody, answers: [200, Order] },
      handle: (req) => {
        const body = req.body as { status: OrderStatus; note?: string | null };
        return changeOrderStatus(db, id(req), body.status, body.note);
      },
    },
    {
      operation: ['POST', '/orders/:id/payment-status', 'orders', 'changePaymentStatus', 'Move the payment status'],
      schemas: { params: IdParam, body: PaymentBody, answers: [200, Order] },
      handle: (req) => changePaymentStatus(db, id(req), (req.body as { payment_status: PaymentStatus }).payment_status),
    },
    {
      operation: ['POST', '/inventory/adjustments', 'inventory', 'adjustStock', 'Manual stock adjustment'],
      schemas: { body: AdjustmentBody, answers: [201, StockAdjustment] },
      handle: async (req) => {
        const body = req.body as { product_id: string; variant_id?: string | null; quantity_change: number; note?: string | null };
        const movementId = await adjustStock(db, body);
        return { movement_id: movementId, product: await productById(db, body.product_id) };
      },
    },
    {
      operation: [
        'POST',
        '/inventory/import',
        'inventory',
        'importStockCsv',
        'CSV bulk stock import (text/csv; header sku,stock or sku,quantity_change; optional note). All rows or none. ' +
          'Over IMPORT_JOB_ROWS rows, or while the store has import jobs queued or running: 202 with an import job to poll (Location), run in the background one job at a time per store, in the order sent.',
      ],
      schemas: { consumes: ['text/csv'], body: CsvBody, answers: [201, StockImport], accepted: ImportJob },
      handle: async (req, reply) => {
        if (typeof req.body !== 'string') throw invalidParameter('body', 'send the CSV as text/csv');
        const csv = req.body;
        const { config, database } = app.ctx;
        // A large import is a job (decision 0060): stored in this request's transaction (a keyed
        // retry replays the same job), run by the process that runs background work, polled. So is
        // any import while the store has jobs queued or running: imports apply in the order sent.
        if (importRunsAsJob(csv, config.IMPORT_JOB_ROWS) || (await importsWaiting(db))) {
          const admin = req.admin;
          const job = await submitImportJob(db, csv, {
            createdBy: admin ? { kind: admin.kind, id: admin.id ?? null, name: admin.name } : null,
            queueMax: config.IMPORT_JOB_QUEUE,
          });
          // The runners of this process look at once the job is committed (others within IMPORT_JOB_POLL_MS).
          const transaction = activeRequestTransaction();
          if (transaction) transaction.afterCommit(() => importJobsQueued.emit('queued'));
          else importJobsQueued.emit('queued');
          reply.code(202).header('location', `/admin/api/v1/inventory/import-jobs/${job.id}`);
          return job;
        }
        // One store's imports at a time (STORE_MAX_IMPORTS): one more is refused at once, nothing
        // written, rather than queued behind the first with no answer (decision 0051).
        const storeId = currentStoreId();
        const release = storeId === undefined ? () => {} : await imports.acquire(storeId);
        if (!release) {
          throw new ApiError(
            'rate_limited',
            `This store already runs ${imports.limit} stock import${imports.limit === 1 ? '' : 's'}, its limit (STORE_MAX_IMPORTS = ${imports.limit}). Retry after it ends.`,
            undefined,
            { 'Retry-After': String(StoreSlots.RETRY_AFTER_SECONDS) },
          );
        }
        try {
          const options = { log: req.log, intervalMs: config.PROGRESS_LOG_INTERVAL_MS };
          // The embedded database is one session: a long import in one transaction would hold every read
          // behind it, so an absolute import runs in committed steps there, outside this request's
          // transaction (decision 0036). PostgreSQL's readers pass a long transaction by themselves.
          const stepRows = database.backend === 'pglite' && config.STOCK_IMPORT_STEP_ROWS > 0 ? config.STOCK_IMPORT_STEP_ROWS : undefined;
          if (stepRows === undefined || !req.writeTransaction) return await importStockCsv(db, csv, options);
          const gone = new AbortController();
          const onClose = () => {
            if (!reply.raw.writableFinished) gone.abort();
          };
          reply.raw.once('close', onClose);
          try {
            return await req.writeTransaction.detach(() => importStockCsv(db, csv, { ...options, stepRows, signal: gone.signal }));
          } finally {
            reply.raw.off('close', onClose);
          }
        } finally {
          release();
        }
      },
    },
    {
      operation: ['GET', '/inventory/import-jobs', 'inventory', 'listImportJobs', "The store's import jobs, newest first, with their progress"],
      schemas: { querystring: JobListQuery, answers: [200, Type.Array(ImportJob)] },
      handle: (req) => {
        const query = req.query as { limit?: number; status?: 'waiting' };
        return importJobs(db, { limit: query.limit ?? 20, waiting: query.status === 'waiting' });
      },
    },
    {
      operation: ['GET', '/inventory/import-jobs/:id', 'inventory', 'getImportJob', 'An import job: its status, progress, result or errors'],
      schemas: { params: IdParam, answers: [200, ImportJob] },
      handle: (req) => importJob(db, id(req)),
    },
  ];
  for (const route of routes) storeRoute(app, route);
}
