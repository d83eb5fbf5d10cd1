import { openDatabase } from '../src/db/database.ts';
import { generateBenchStore } from './generate-store.ts';
import { createToken } from '../src/tokens/token.service.ts';
const h = await openDatabase({ databaseUrl: 'postgres://root@127.0.0.1:5432/rss_probe' });
await generateBenchStore(h.db, { products: 10000, customers: 1000, orders: 2000 } as never);
const { token } = await createToken(h.db, { name: 'probe' });
console.log(token);
await h.close();
