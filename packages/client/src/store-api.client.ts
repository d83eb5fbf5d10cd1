/**
 * StoreApiClient: the composition of the client. Its per-resource members (`products`, `orders`, …,
 * one per declared resource) come from generated/resource-clients.ts, generated from the OpenAPI
 * document's x-resources; here are the events feed, the attributes, the admin API and the flat
 * aliases (`listProducts()` …) kept for the callers of 0.1.
 */
import { AdminClient } from './admin.client.ts';
import { ResourceClients } from './generated/resource-clients.ts';
import { RecordIterator, type IterateOptions } from './record-iterator.ts';
import { ResourceClient } from './resource.client.ts';
import type { WithResponse } from './response-metadata.ts';
import type {
  Attribute,
  AttributeListQuery,
  Customer,
  CustomerExportQuery,
  CustomerListQuery,
  InventoryExportQuery,
  InventoryListQuery,
  InventoryRecord,
  Order,
  OrderExportQuery,
  OrderListQuery,
  Page,
  Product,
  ProductExportQuery,
  ProductListQuery,
  StockMovement,
  StockMovementExportQuery,
  StockMovementListQuery,
  StoreEvent,
  EventListQuery,
  EventExportQuery,
} from './resource-types.ts';

/** Typed client of the Store Integration API's read endpoints (see the package README). */
export class StoreApiClient extends ResourceClients {
  /** Stock movements (the same client as `stockMovements`, under its 0.1 name). */
  readonly movements = this.stockMovements;
  /** The events feed (the log of changes within its retention, as webhooks POST them): list, iterate, export. */
  readonly events: ResourceClient<StoreEvent, EventListQuery, EventExportQuery> = new ResourceClient(this, 'events');
  /** The admin API (admin-scoped token): tokens, webhook endpoints, deliveries, retries, replays. */
  readonly admin: AdminClient = new AdminClient(this);

  /** GET /api/v1/products: one page of products. */
  listProducts(query?: ProductListQuery): Promise<WithResponse<Page<Product>>> {
    return this.products.list(query);
  }
  /** GET /api/v1/products/{id}. */
  getProduct(id: string): Promise<WithResponse<Product>> {
    return this.products.get(id);
  }
  /** Every product, page after page. */
  iterateProducts(query?: ProductListQuery, options?: IterateOptions): RecordIterator<Product> {
    return this.products.iterate(query, options);
  }
  /** Every product through GET /api/v1/products/export (NDJSON, streamed). */
  exportProducts(query?: ProductExportQuery, options?: IterateOptions): RecordIterator<Product> {
    return this.products.export(query, options);
  }

  /** GET /api/v1/orders: one page of orders. */
  listOrders(query?: OrderListQuery): Promise<WithResponse<Page<Order>>> {
    return this.orders.list(query);
  }
  /** GET /api/v1/orders/{id}. */
  getOrder(id: string): Promise<WithResponse<Order>> {
    return this.orders.get(id);
  }
  /** Every order, page after page. */
  iterateOrders(query?: OrderListQuery, options?: IterateOptions): RecordIterator<Order> {
    return this.orders.iterate(query, options);
  }
  /** Every order through GET /api/v1/orders/export. */
  exportOrders(query?: OrderExportQuery, options?: IterateOptions): RecordIterator<Order> {
    return this.orders.export(query, options);
  }

  /** GET /api/v1/customers: one page of customers. */
  listCustomers(query?: CustomerListQuery): Promise<WithResponse<Page<Customer>>> {
    return this.customers.list(query);
  }
  /** GET /api/v1/customers/{id}. */
  getCustomer(id: string): Promise<WithResponse<Customer>> {
    return this.customers.get(id);
  }
  /** Every customer, page after page. */
  iterateCustomers(query?: CustomerListQuery, options?: IterateOptions): RecordIterator<Customer> {
    return this.customers.iterate(query, options);
  }
  /** Every customer through GET /api/v1/customers/export. */
  exportCustomers(query?: CustomerExportQuery, options?: IterateOptions): RecordIterator<Customer> {
    return this.customers.export(query, options);
  }

  /** GET /api/v1/inventory: one page of inventory records. */
  listInventory(query?: InventoryListQuery): Promise<WithResponse<Page<InventoryRecord>>> {
    return this.inventory.list(query);
  }
  /** Every inventory record, page after page. */
  iterateInventory(query?: InventoryListQuery, options?: IterateOptions): RecordIterator<InventoryRecord> {
    return this.inventory.iterate(query, options);
  }
  /** Every inventory record through GET /api/v1/inventory/export. */
  exportInventory(query?: InventoryExportQuery, options?: IterateOptions): RecordIterator<InventoryRecord> {
    return this.inventory.export(query, options);
  }

  /** GET /api/v1/inventory/movements: one page of stock movements. */
  listStockMovements(query?: StockMovementListQuery): Promise<WithResponse<Page<StockMovement>>> {
    return this.movements.list(query);
  }
  /** Every stock movement, page after page. */
  iterateStockMovements(query?: StockMovementListQuery, options?: IterateOptions): RecordIterator<StockMovement> {
    return this.movements.iterate(query, options);
  }
  /** Every stock movement through GET /api/v1/inventory/movements/export. */
  exportStockMovements(query?: StockMovementExportQuery, options?: IterateOptions): RecordIterator<StockMovement> {
    return this.movements.export(query, options);
  }

  /** GET /api/v1/events: one page of the events feed. */
  listEvents(query?: EventListQuery): Promise<WithResponse<Page<StoreEvent>>> {
    return this.events.list(query);
  }
  /** Every event of the feed from `query.cursor` on, page after page. */
  iterateEvents(query?: EventListQuery, options?: IterateOptions): RecordIterator<StoreEvent> {
    return this.events.iterate(query, options);
  }
  /** Every event through GET /api/v1/events/export. */
  exportEvents(query?: EventExportQuery, options?: IterateOptions): RecordIterator<StoreEvent> {
    return this.events.export(query, options);
  }

  /** GET /api/v1/attributes: one page of the variants' distinct attribute keys with their values, by key. */
  async listAttributes(query: AttributeListQuery = {}, options: { signal?: AbortSignal } = {}): Promise<WithResponse<Page<Attribute>>> {
    const page = await this.getJson<Page<Attribute>>('attributes', query, options.signal);
    if (!Array.isArray(page?.data) || typeof page.pagination?.has_more !== 'boolean') {
      throw this.notStoreApi('attributes', query, 'a list without data and pagination', page?.lastResponse);
    }
    return page;
  }
  /** Every attribute, page after page; `cursor` is the key of the last attribute consumed. */
  iterateAttributes(query: AttributeListQuery = {}, options: IterateOptions = {}): RecordIterator<Attribute> {
    return new RecordIterator<Attribute>(query.cursor, (self) => this.#walkAttributes(self, query, options));
  }

  async *#walkAttributes(self: RecordIterator<Attribute>, query: AttributeListQuery, options: IterateOptions): AsyncGenerator<Attribute> {
    let cursor = query.cursor;
    while (true) {
      const page = await this.listAttributes({ ...query, cursor }, { signal: options.signal });
      self.pages++;
      self.lastResponse = page.lastResponse;
      for (const attribute of page.data) {
        yield attribute;
        self.count++;
        self.cursor = attribute.key;
      }
      self.cursor = page.pagination.next_cursor ?? self.cursor;
      await options.onPage?.({ cursor: self.cursor, count: page.data.length, hasMore: page.pagination.has_more, lastResponse: page.lastResponse });
      if (!page.pagination.has_more || page.data.length === 0) return;
      cursor = self.cursor ?? undefined;
    }
  }
}
