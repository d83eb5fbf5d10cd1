// Webhook receiver of the benchmark, in its own process: answers every POST at once (204, or the status it is given) and records
// its arrival time (epoch ms, sub-millisecond) under "<type>:<data.id>" for latency measurements.
// GET /count → deliveries received so far; GET /arrival?key=<type>:<id> → the last arrival time recorded under that key (empty if none);
// GET /arrivals → every arrival time recorded, as JSON {"<type>:<id>": [ms, …]}.
// Arguments: <port> [host] [status]. host defaults to 127.0.0.1; 0.0.0.0 lets the multi-store bench
// give each store's endpoint its own loopback address (127.x.y.z: an origin per store).
// status defaults to 204; 500 makes a failing receiver (every POST answered 500, still counted).
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';

const HOST = process.argv[3] ?? '127.0.0.1';
const STATUS = Number(process.argv[4] ?? 204);
let count = 0;
const arrivals = new Map();
const every = new Map();
const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  if (req.method === 'POST') {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const at = performance.timeOrigin + performance.now();
      count++;
      res.writeHead(STATUS).end();
      const body = JSON.parse(Buffer.concat(chunks).toString());
      const key = `${body.type}:${body.data?.id}`;
      arrivals.set(key, at);
      const list = every.get(key);
      if (list) list.push(at);
      else every.set(key, [at]);
    });
    return;
  }
  if (req.url === '/count') return res.writeHead(200, { 'content-type': 'text/plain' }).end(String(count));
  if (req.url === '/arrivals') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(Object.fromEntries(every)));
  if (req.url.startsWith('/arrival?key=')) {
    const at = arrivals.get(decodeURIComponent(req.url.slice('/arrival?key='.length)));
    return res.writeHead(200, { 'content-type': 'text/plain' }).end(at === undefined ? '' : String(at));
  }
  res.writeHead(404).end();
});
server.listen(Number(process.argv[2]), HOST, () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
