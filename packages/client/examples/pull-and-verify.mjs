import { createServer } from 'node:http';
import { StoreApiClient, verifyWebhook } from '@store-api/client';

const client = new StoreApiClient({ baseUrl: process.env.STORE_API_URL ?? 'http://127.0.0.1:3000', token: process.env.STORE_API_TOKEN });
let count = 0;
for await (const _product of client.products.export({ include_inactive: true })) count += 1; // product: one record, streamed
console.log(`pulled ${count} products`);

createServer(async (req, res) => {
  try {
    const event = verifyWebhook(Buffer.concat(await req.toArray()), req.headers, process.env.STORE_WEBHOOK_SECRET);
    console.log(`verified ${event.type} ${event.id}`);
    res.writeHead(204).end();
  } catch (error) {
    console.error(error.message);
    res.writeHead(400).end();
  }
}).listen(Number(process.env.WEBHOOK_PORT ?? 4000), () => console.log('waiting for webhooks'));
