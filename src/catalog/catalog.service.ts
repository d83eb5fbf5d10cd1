/**
 * Catalog writes: products, variants, images. Each write is one write-clock transaction that moves
 * the product's last_modified, recomputes its stock and appends product.created/updated and, for a
 * stock-tracked product, inventory.updated: an inventory record's last_modified is its product's, so
 * every product change is a change of that record too, and a mirror fed by webhooks alone must see
 * it (the chaos test of the sync tool found records a price or image change left stale). Initial stock is recorded as an
 * `adjustment` movement so every stock level is explained by the movement log.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { runWrite, type WriteContext } from '../db/write-clock.ts';
import { ownStore, ownStoreIs } from '../db/store-scope.ts';
import { conflict, notFound } from '../shared/problem.ts';
import { translateDbError } from '../shared/db-errors.ts';
import { productsChanged } from './product-events.ts';
import { inventoryChanged } from '../inventory/stock-events.ts';
import { applyStockChanges, refreshProducts, type StockChange } from '../inventory/stock.service.ts';
import { isStockTracked, type ProductType } from './product.json-sql.ts';
import { recordById } from '../records/record-reads.ts';
import { type Product, productResource } from './product.resource.ts';
import { nextPosition } from './catalog.repository.ts';

export interface VariantInput {
  name: string;
  sku?: string | null;
  price: number;
  stock?: number;
  attributes?: Record<string, string>;
}

export interface ImageInput {
  image_url: string;
  is_primary?: boolean;
}

export interface ProductInput {
  name: string;
  slug?: string;
  product_type: ProductType;
  barcode?: string | null;
  sku?: string | null;
  price: number;
  cost_price?: number | null;
  stock?: number;
  category_id?: string | null;
  thumbnail_url?: string | null;
  is_active?: boolean;
  variants?: VariantInput[];
  images?: ImageInput[];
}

export type ProductPatch = Partial<Omit<ProductInput, 'product_type' | 'variants' | 'images' | 'stock'>>;
export type VariantPatch = Partial<Omit<VariantInput, 'stock'>> & { is_active?: boolean };
export type ImagePatch = Partial<ImageInput> & { is_active?: boolean };

/** URL-safe slug of a name. */
export function slugify(name: string): string {
  const base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 80);
  return base || 'product';
}

/** The product's JSON (as the read API returns it) inside a write or from the database. */
export async function productById(db: Kysely<Database>, id: string): Promise<Product> {
  return recordById(db, productResource, id);
}

async function write<T>(db: Kysely<Database>, fn: (ctx: WriteContext) => Promise<T>): Promise<T> {
  try {
    return await runWrite(db, fn);
  } catch (error) {
    translateDbError(error);
  }
}

async function insertVariants(ctx: WriteContext, productId: string, variants: VariantInput[], firstPosition: number): Promise<StockChange[]> {
  if (variants.length === 0) return [];
  const rows = variants.map((v, i) => ({
    id: randomUUID(),
    store_id: ownStore(),
    product_id: productId,
    name: v.name,
    sku: v.sku ?? null,
    price: v.price,
    stock: 0,
    attributes: JSON.stringify(v.attributes ?? {}),
    position: firstPosition + i,
    is_active: true,
    created_at: ctx.stamp,
  }));
  await ctx.trx.insertInto('variants').values(rows).execute();
  return rows.flatMap((r, i) =>
    (variants[i]!.stock ?? 0) !== 0 ? [{ productId, variantId: r.id, delta: variants[i]!.stock!, reason: 'adjustment' as const, note: 'initial stock' }] : [],
  );
}

async function insertImages(ctx: WriteContext, productId: string, images: ImageInput[], firstPosition: number): Promise<void> {
  if (images.length === 0) return;
  if (images.some((i) => i.is_primary)) {
    await ctx.trx.updateTable('images').set({ is_primary: false }).where(ownStoreIs('store_id')).where('product_id', '=', productId).execute();
  }
  const primaryIndex = images.findIndex((i) => i.is_primary);
  await ctx.trx
    .insertInto('images')
    .values(
      images.map((img, i) => ({
        id: randomUUID(),
        store_id: ownStore(),
        product_id: productId,
        image_url: img.image_url,
        is_primary: i === primaryIndex,
        position: firstPosition + i,
        is_active: true,
        created_at: ctx.stamp,
      })),
    )
    .execute();
}

async function lockProduct(ctx: WriteContext, id: string) {
  const product = await ctx.trx.selectFrom('products').selectAll().where(ownStoreIs('store_id')).where('id', '=', id).forNoKeyUpdate().executeTakeFirst();
  if (!product) throw notFound('product', id);
  return product;
}

/** Creates a product with its variants and images; returns its JSON. */
export async function createProduct(db: Kysely<Database>, input: ProductInput): Promise<Product> {
  return write(db, async (ctx) => {
    const id = randomUUID();
    const tracked = isStockTracked(input.product_type);
    await ctx.trx
      .insertInto('products')
      .values({
        id,
        store_id: ownStore(),
        name: input.name,
        slug: input.slug ?? `${slugify(input.name)}-${id.slice(0, 8)}`,
        product_type: input.product_type,
        barcode: input.barcode ?? null,
        sku: input.sku ?? null,
        price: input.price,
        cost_price: input.cost_price ?? null,
        own_stock: 0,
        stock: 0,
        category_id: input.category_id ?? null,
        thumbnail_url: input.thumbnail_url ?? null,
        is_active: input.is_active ?? true,
        created_at: ctx.stamp,
        last_modified: ctx.stamp,
      })
      .execute();
    const variants = input.variants ?? [];
    const initial = await insertVariants(ctx, id, variants, 0);
    if (variants.length === 0 && (input.stock ?? 0) !== 0) {
      initial.push({ productId: id, variantId: null, delta: input.stock!, reason: 'adjustment', note: 'initial stock' });
    }
    await insertImages(ctx, id, input.images ?? [], 0);
    await refreshProducts(ctx, [id]);
    // Book the initial stock first (adjustment movements, inventory.updated), so product.created
    // carries the final stock and no product.updated of the same instant follows it.
    if (tracked && initial.length > 0) await applyStockChanges(ctx, initial, { announceProducts: false });
    else if (tracked) await inventoryChanged(ctx, [id]);
    await productsChanged(ctx, [id], true);
    return productById(ctx.trx, id);
  });
}

/** Updates product fields (is_active=false deactivates); returns its JSON. */
export async function updateProduct(db: Kysely<Database>, id: string, patch: ProductPatch): Promise<Product> {
  return write(db, async (ctx) => {
    await lockProduct(ctx, id);
    const set = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
    if (Object.keys(set).length > 0) await ctx.trx.updateTable('products').set(set).where(ownStoreIs('store_id')).where('id', '=', id).execute();
    await refreshProducts(ctx, [id]);
    await productsChanged(ctx, [id]);
    await inventoryChanged(ctx, [id]);
    return productById(ctx.trx, id);
  });
}

/** Adds a variant (its initial stock is an `adjustment` movement); returns the product's JSON. */
export async function addVariant(db: Kysely<Database>, productId: string, input: VariantInput): Promise<Product> {
  return write(db, async (ctx) => {
    const product = await lockProduct(ctx, productId);
    const hadVariants = await ctx.trx
      .selectFrom('variants')
      .select('id')
      .where(ownStoreIs('store_id'))
      .where('product_id', '=', productId)
      .where('is_active', '=', true)
      .limit(1)
      .execute();
    if (hadVariants.length === 0 && product.own_stock !== 0 && isStockTracked(product.product_type)) {
      throw conflict(`The product holds ${product.own_stock} units of its own; adjust them to 0 before adding variants, so no stock disappears.`);
    }
    const initial = await insertVariants(ctx, productId, [input], await nextPosition(ctx.trx, 'variants', productId));
    await refreshProducts(ctx, [productId]);
    if (initial.length > 0 && isStockTracked(product.product_type)) {
      await applyStockChanges(ctx, initial);
    } else {
      await productsChanged(ctx, [productId]);
      await inventoryChanged(ctx, [productId]);
    }
    return productById(ctx.trx, productId);
  });
}

/** Updates a variant (is_active=false deactivates it); returns the product's JSON. */
export async function updateVariant(db: Kysely<Database>, productId: string, variantId: string, patch: VariantPatch): Promise<Product> {
  return write(db, async (ctx) => {
    await lockProduct(ctx, productId);
    const variant = await ctx.trx
      .selectFrom('variants')
      .select(['id', 'stock', 'is_active'])
      .where(ownStoreIs('store_id'))
      .where('id', '=', variantId)
      .where('product_id', '=', productId)
      .executeTakeFirst();
    if (!variant) throw notFound('variant of this product', variantId);
    const { attributes, ...rest } = patch;
    const set: Record<string, unknown> = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
    if (attributes !== undefined) set.attributes = JSON.stringify(attributes);
    if (Object.keys(set).length > 0) await ctx.trx.updateTable('variants').set(set).where(ownStoreIs('store_id')).where('id', '=', variantId).execute();
    await refreshProducts(ctx, [productId]);
    await productsChanged(ctx, [productId]);
    await inventoryChanged(ctx, [productId]);
    return productById(ctx.trx, productId);
  });
}

/** Adds an image; returns the product's JSON. */
export async function addImage(db: Kysely<Database>, productId: string, input: ImageInput): Promise<Product> {
  return write(db, async (ctx) => {
    await lockProduct(ctx, productId);
    await insertImages(ctx, productId, [input], await nextPosition(ctx.trx, 'images', productId));
    await refreshProducts(ctx, [productId]);
    await productsChanged(ctx, [productId]);
    await inventoryChanged(ctx, [productId]);
    return productById(ctx.trx, productId);
  });
}

/** Updates an image (is_active=false removes it from the product); returns the product's JSON. */
export async function updateImage(db: Kysely<Database>, productId: string, imageId: string, patch: ImagePatch): Promise<Product> {
  return write(db, async (ctx) => {
    await lockProduct(ctx, productId);
    const image = await ctx.trx
      .selectFrom('images')
      .select('id')
      .where(ownStoreIs('store_id'))
      .where('id', '=', imageId)
      .where('product_id', '=', productId)
      .executeTakeFirst();
    if (!image) throw notFound('image of this product', imageId);
    if (patch.is_primary)
      await ctx.trx.updateTable('images').set({ is_primary: false }).where(ownStoreIs('store_id')).where('product_id', '=', productId).execute();
    const set = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
    if (Object.keys(set).length > 0) await ctx.trx.updateTable('images').set(set).where(ownStoreIs('store_id')).where('id', '=', imageId).execute();
    await refreshProducts(ctx, [productId]);
    await productsChanged(ctx, [productId]);
    await inventoryChanged(ctx, [productId]);
    return productById(ctx.trx, productId);
  });
}
