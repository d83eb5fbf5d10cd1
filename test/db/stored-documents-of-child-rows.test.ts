/**
 * A record's stored document follows every write to its child rows (db/documents.ts), whichever
 * statement made it: images and variants of a product, items of an order, inserted, changed or
 * deleted by a statement that does not touch the owner's row. The services also stamp the owner's
 * row, which rebuilds its document anyway and would hide a child table whose trigger is missing;
 * these statements do not, so a missing or wrong trigger of a child table fails here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { backends } from '../helpers/test-database.ts';
import { buildTestApp, type TestApp } from '../helpers/test-app.ts';
import { aProduct, aProductWithVariants, anOrder } from '../helpers/store-fixtures.ts';
import { checkStoreDocuments } from '../../src/resources/store-schema.ts';
import type { Database } from '../../src/db/schema.ts';

describe.each(backends)('stored documents follow their child rows (%s)', (backend) => {
  let t: TestApp;
  let db: Kysely<Database>;

  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = t.database.db;
  });
  afterAll(async () => {
    await t?.close();
  });

  const productDoc = async (id: string) =>
    (await sql<{ doc: any; inventory_doc: any }>`SELECT doc, inventory_doc FROM products WHERE id = ${id}::uuid`.execute(db)).rows[0]!;
  const orderDoc = async (id: string) => (await sql<{ doc: any }>`SELECT doc FROM orders WHERE id = ${id}::uuid`.execute(db)).rows[0]!.doc;
  /** Every stored document equals its rebuild from the tables. */
  const documentsMatch = async () => expect(await checkStoreDocuments(db)).toEqual([]);

  it("a product's images: inserted, changed and deleted by their own statements", async () => {
    const product = await aProduct(db);
    const imageId = randomUUID();
    await sql`INSERT INTO images (id, product_id, image_url, is_primary, position, created_at)
      VALUES (${imageId}::uuid, ${product.id}::uuid, 'https://img.example.com/new.jpg', true, 0, now())`.execute(db);
    expect((await productDoc(product.id)).doc.images.map((i: { id: string }) => i.id)).toEqual([imageId]);
    await documentsMatch();

    await sql`UPDATE images SET image_url = 'https://img.example.com/changed.jpg' WHERE id = ${imageId}::uuid`.execute(db);
    expect((await productDoc(product.id)).doc.images[0].image_url).toBe('https://img.example.com/changed.jpg');
    await documentsMatch();

    await sql`DELETE FROM images WHERE id = ${imageId}::uuid`.execute(db);
    expect((await productDoc(product.id)).doc.images).toEqual([]);
    await documentsMatch();
  });

  it("a deleted variant leaves its product's document and inventory document", async () => {
    const product = await aProductWithVariants(db, [3, 4]);
    const [kept, gone] = product.variants;
    // Its stock movements and their document go first (they reference the variant).
    await sql`DELETE FROM stock_movements WHERE variant_id = ${gone!.id}::uuid`.execute(db);
    await sql`DELETE FROM variants WHERE id = ${gone!.id}::uuid`.execute(db);
    const after = await productDoc(product.id);
    expect(after.doc.variants.map((v: { id: string }) => v.id)).toEqual([kept!.id]);
    expect(JSON.stringify(after.inventory_doc)).not.toContain(gone!.id);
    await documentsMatch();
  });

  it("a deleted order item leaves its order's document", async () => {
    const a = await aProduct(db);
    const b = await aProduct(db);
    const order = await anOrder(db, [
      { product_id: a.id, quantity: 1 },
      { product_id: b.id, quantity: 2 },
    ]);
    expect(order.items).toHaveLength(2);
    await sql`DELETE FROM order_items WHERE order_id = ${order.id}::uuid AND product_id = ${b.id}::uuid`.execute(db);
    expect((await orderDoc(order.id)).items.map((i: { product_id: string }) => i.product_id)).toEqual([a.id]);
    await documentsMatch();
  });
});
