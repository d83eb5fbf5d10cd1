/**
 * Stock writes build each stored document once (decisions 0046, 0047): the variants' level writes
 * run with the documents' triggers silenced, and the products' recompute in the same transaction
 * (which also sets their own stock) builds their documents in its own UPDATE; the movements' INSERT
 * builds theirs too. A product already stamped at or past the transaction's stamp is recomputed the
 * old way (the forward trigger moves its stamp, the triggers rebuild its documents). Whatever the path — an import in one
 * transaction, an import in steps, a single adjustment — every stored document equals its rebuild
 * from the tables afterwards, and shows the new levels.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants } from '../helpers/store-fixtures.ts';
import { checkStoreDocuments, rebuildStoreDocuments } from '../../src/resources/store-schema.ts';
import { startStatementAudit } from '../helpers/statement-audit.ts';
import { adjustStock } from '../../src/inventory/stock.service.ts';
import { importStockCsv } from '../../src/inventory/stock-import.ts';
import { withDocumentsRebuiltLater } from '../../src/db/documents.ts';
import type { Database } from '../../src/db/schema.ts';

describe.each(backends)('stock writes and stored documents (%s)', (backend) => {
  let t: TestApp;
  let db: Kysely<Database>;
  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = t.database.db;
  });
  afterAll(async () => t?.close());

  const docs = async (id: string) =>
    (
      await sql<{ doc: { stock: number; variants: { sku: string; stock: number }[] }; inventory_doc: unknown }>`
      SELECT doc, inventory_doc FROM products WHERE id = ${id}::uuid`.execute(db)
    ).rows[0]!;

  for (const stepRows of [undefined, 1]) {
    it(`an import ${stepRows ? 'in steps' : 'in one transaction'} leaves every document rebuilt with the new levels`, async () => {
      // Every statement of the writes and of the check names its store (decision 0051).
      const audit = startStatementAudit();
      const plain = await aProduct(db);
      const withVariants = await aProductWithVariants(db, [5, 7]);
      const [v0, v1] = withVariants.variants!;
      await importStockCsv(db, `sku,stock\n${plain.sku},41\n${v0!.sku},3\n${v1!.sku},9\n`, stepRows ? { stepRows } : {});
      expect(await checkStoreDocuments(db)).toEqual([]);
      expect(audit.checked()).toBeGreaterThan(10);
      expect(audit.stop()).toEqual([]);
      expect((await docs(plain.id)).doc.stock).toBe(41);
      const doc = (await docs(withVariants.id)).doc;
      expect(doc.stock).toBe(12);
      expect(doc.variants.map((v) => v.stock)).toEqual([3, 9]);
    });
  }

  it('a single adjustment of a variant leaves every document rebuilt', async () => {
    const product = await aProductWithVariants(db, [5, 7]);
    const audit = startStatementAudit();
    await adjustStock(db, { product_id: product.id, variant_id: product.variants![1]!.id, quantity_change: -2 });
    expect(await checkStoreDocuments(db)).toEqual([]);
    expect(audit.stop()).toEqual([]);
    expect((await docs(product.id)).doc.stock).toBe(10);
  });

  it('a product stamped past the transaction (a later writer) is recomputed too, moved forward, its documents rebuilt', async () => {
    const product = await aProduct(db);
    const later = '2999-01-01 00:00:00+00';
    await sql`UPDATE products SET last_modified = ${later}::timestamptz WHERE id = ${product.id}::uuid`.execute(db);
    await adjustStock(db, { product_id: product.id, quantity_change: 5 });
    const { rows } = await sql<{ stock: number; moved: boolean }>`
      SELECT stock, last_modified = ${later}::timestamptz + interval '1 microsecond' AS moved FROM products WHERE id = ${product.id}::uuid`.execute(db);
    expect(rows[0]!.stock).toBe(25);
    expect(rows[0]!.moved).toBe(true);
    expect((await docs(product.id)).doc.stock).toBe(rows[0]!.stock);
    expect(await checkStoreDocuments(db)).toEqual([]);
  });

  it("refuses a change that takes a product's variants past an integer in sum, and writes nothing", async () => {
    const product = await aProductWithVariants(db, [2_147_483_000, 5]);
    const [, small] = product.variants!;
    await expect(adjustStock(db, { product_id: product.id, variant_id: small!.id, quantity_change: 1000 })).rejects.toMatchObject({
      message: expect.stringContaining('across its variants would exceed 2147483647'),
    });
    await expect(importStockCsv(db, `sku,stock\n${small!.sku},1000\n`)).rejects.toMatchObject({
      message: expect.stringContaining('across its variants would exceed 2147483647'),
    });
    expect((await docs(product.id)).doc.variants.map((v) => v.stock)).toEqual([2_147_483_000, 5]);
    expect(await checkStoreDocuments(db)).toEqual([]);
  });

  it('the documents backfill rebuilds every document of the store, each statement naming its store', async () => {
    await aProductWithVariants(db, [1, 2]);
    const audit = startStatementAudit();
    expect(await rebuildStoreDocuments(db)).toBeGreaterThan(0);
    expect(await rebuildStoreDocuments(db, { onlyMissing: true })).toBe(0);
    expect(await checkStoreDocuments(db)).toEqual([]);
    expect(audit.stop()).toEqual([]);
  });

  it('silences the triggers for the writes it wraps only, and the next write of the transaction rebuilds', async () => {
    const silenced = await aProduct(db);
    const after = await aProduct(db);
    await db.transaction().execute(async (trx) => {
      await withDocumentsRebuiltLater(trx, () => sql`UPDATE products SET name = 'not rebuilt' WHERE id = ${silenced.id}::uuid`.execute(trx));
      await sql`UPDATE products SET name = 'rebuilt' WHERE id = ${after.id}::uuid`.execute(trx);
    });
    const differences = await checkStoreDocuments(db);
    expect(differences.map((d) => d.id)).toContain(silenced.id);
    expect(differences.map((d) => d.id)).not.toContain(after.id);
    // Put right for the other tests (every document equal to its rebuild).
    await sql`UPDATE products SET name = 'rebuilt too' WHERE id = ${silenced.id}::uuid`.execute(db);
    expect(await checkStoreDocuments(db)).toEqual([]);
  });
});
