import { PGlite } from '@electric-sql/pglite';
let t=Date.now();
const pg = new PGlite(); await pg.waitReady; console.log('init', Date.now()-t);
t=Date.now(); await pg.exec('create table a(x int); insert into a select generate_series(1,1000)'); console.log('q', Date.now()-t);
t=Date.now(); const c = await pg.clone(); console.log('clone', Date.now()-t, (await c.query('select count(*) from a')).rows);
t=Date.now(); const p2 = new PGlite(); await p2.waitReady; console.log('init2', Date.now()-t);
t=Date.now(); const f = await pg.dumpDataDir('none'); console.log('dump', Date.now()-t, f.size);
t=Date.now(); const p3 = new PGlite({loadDataDir: f}); await p3.waitReady; console.log('load', Date.now()-t);
