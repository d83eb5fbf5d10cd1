/**
 * The one list of store resources (resources/resource.ts declarations). Everything else derives from
 * it (registry.ts, store-schema.ts); a new resource is its declaration added here plus its migration.
 */
import { productResource } from '../catalog/product.resource.ts';
import { customerResource } from '../customers/customer.resource.ts';
import { inventoryResource, movementResource } from '../inventory/inventory.resource.ts';
import { orderResource } from '../orders/order.resource.ts';

/** Every resource of the read API, in the order of the API, the OpenAPI document and the initial sync. */
export const RESOURCES = [productResource, orderResource, customerResource, inventoryResource, movementResource] as const;
