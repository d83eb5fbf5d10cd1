// Webhook receiver of the benchmark, in its own process: answers every POST 204 at once and records
// its arrival time (epoch ms, sub-millisecond) under "<type>:<data.id>" for latency measurements.
// GET /count → deliveries received so far; GET /arrival?key=<type>:<id> → the last arrival time recorded under that key (empty if none).
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';

let count = 0;
const arrivals = new Map();
const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  if (req.method === 'POST') {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const at = performance.timeOrigin + performance.now();
      count++;
      res.writeHead(204).end();
      const body = JSON.parse(Buffer.concat(chunks).toString());
      arrivals.set(`${body.type}:${body.data?.id}`, at);
    });
    return;
  }
  if (req.url === '/count') return res.writeHead(200, { 'content-type': 'text/plain' }).end(String(count));
  if (req.url.startsWith('/arrival?key=')) {
    const at = arrivals.get(decodeURIComponent(req.url.slice('/arrival?key='.length)));
    return res.writeHead(200, { 'content-type': 'text/plain' }).end(at === undefined ? '' : String(at));
  }
  res.writeHead(404).end();
});
server.listen(Number(process.argv[2]), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
