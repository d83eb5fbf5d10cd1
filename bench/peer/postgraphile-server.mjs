// PostGraphile 5 over the benchmark database, one process (bench/peer/graphql-page.ts starts it).
import { createServer } from 'node:http';
import { postgraphile } from 'postgraphile';
import { PostGraphileAmberPreset } from 'postgraphile/presets/amber';
import { makePgService } from 'postgraphile/adaptors/pg';
import { grafserv } from 'postgraphile/grafserv/node';

const port = Number(process.argv[2]);
const preset = {
  extends: [PostGraphileAmberPreset],
  // Without this, only indexed columns can be filtered on; is_active has no index of its own.
  disablePlugins: ['PgIndexBehaviorsPlugin'],
  pgServices: [makePgService({ connectionString: process.env.DATABASE_URL, schemas: ['public'], poolConfig: { max: 10 } })],
  grafserv: { port, host: '127.0.0.1' },
  grafast: { explain: false },
};
const pgl = postgraphile(preset);
const serv = pgl.createServ(grafserv);
const server = createServer();
serv.addTo(server).catch((e) => {
  console.error(e);
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => process.stdout.write('listening\n'));
