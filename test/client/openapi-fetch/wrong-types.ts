/**
 * Must NOT compile (generated-client.test.ts expects exactly these errors): a generated client given
 * wrong types is refused by tsc, not by the service at run time.
 */
import createClient from 'openapi-fetch';
import type { paths } from '../../../packages/client/src/generated/api-types.ts';

const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:1' });
// WRONG-1: limit is an integer
void client.GET('/api/v1/products', { params: { query: { limit: 'fifty' } } });
// WRONG-2: no such order status
void client.GET('/api/v1/orders', { params: { query: { status: 'lost' } } });
// WRONG-3: the path parameter is required
void client.GET('/api/v1/products/{id}', { params: {} });
// WRONG-4: no such path
void client.GET('/api/v1/product');
