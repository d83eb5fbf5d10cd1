/**
 * The house's layering, as checks anyone can run (decision 0035, src/README.md "Imports point down"):
 * services and repositories return typed rows (never `Promise<unknown>`), and the record reads answer
 * with the declaration's record type (type assertions, held by `npx tsc --noEmit`). The infrastructure
 * folders import only infrastructure (decision 0041): held by Biome as a list of forbidden folders
 * (`noRestrictedImports` in biome.jsonc, `npm run lint`), and here as a list of allowed ones, which a
 * new feature folder (src/suppliers/ of the recipe) does not slip past.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createCustomer, customerById, updateCustomer } from '../../src/customers/customer.service.ts';
import type { Customer } from '../../src/customers/customer.resource.ts';
import { orderById, changeOrderStatus, placeOrder } from '../../src/orders/order.service.ts';
import type { Order } from '../../src/orders/order.resource.ts';
import { createProduct, productById } from '../../src/catalog/catalog.service.ts';
import type { Product } from '../../src/catalog/product.resource.ts';

const SRC = join(import.meta.dirname, '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** Names of the `export (async) function name(…): Promise<unknown>` in `text` (signatures may span lines). */
function untypedExports(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/export\s+(?:async\s+)?function\s+(\w+)[\s\S]*?\)\s*:\s*([^{};]+?)\s*\{/g)) {
    // A match running into the next declaration belongs to a function without a return type.
    if (/\nexport\s/.test(m[0])) continue;
    if (/^Promise<\s*unknown\s*>$/.test(m[2]!)) found.push(m[1]!);
  }
  return found;
}

describe('typed rows (decision 0035)', () => {
  it('no exported function of src/ answers Promise<unknown>', () => {
    const offenders = sourceFiles(SRC).flatMap((file) => untypedExports(readFileSync(file, 'utf8')).map((name) => `${relative(SRC, file)}: ${name}`));
    expect(offenders).toEqual([]);
  });

  it('the check finds a Promise<unknown> export, single-line or wrapped', () => {
    expect(untypedExports('export async function a(db: Db, id: string): Promise<unknown> {\n  return 1;\n}')).toEqual(['a']);
    expect(untypedExports('export async function b(\n  db: Db,\n  id: string,\n): Promise<unknown> {\n}')).toEqual(['b']);
    expect(untypedExports('export async function c(db: Db): Promise<Customer> {\n}')).toEqual([]);
  });

  it('services answer their record schema’s static type (held by tsc: test/ is type-checked)', () => {
    expectTypeOf(customerById).returns.resolves.toEqualTypeOf<Customer>();
    expectTypeOf(createCustomer).returns.resolves.toEqualTypeOf<Customer>();
    expectTypeOf(updateCustomer).returns.resolves.toEqualTypeOf<Customer>();
    expectTypeOf(orderById).returns.resolves.toEqualTypeOf<Order>();
    expectTypeOf(placeOrder).returns.resolves.toEqualTypeOf<Order>();
    expectTypeOf(changeOrderStatus).returns.resolves.toEqualTypeOf<Order>();
    expectTypeOf(productById).returns.resolves.toEqualTypeOf<Product>();
    expectTypeOf(createProduct).returns.resolves.toEqualTypeOf<Product>();
  });
});

/** Where the relative imports of `text` (a file at `file`) lead, as paths below src/ (static, re-exports and dynamic). */
function relativeImports(file: string, text: string): string[] {
  const specifiers = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)'(\.{1,2}\/[^']+)'/gm)].map((m) => m[1]!);
  return specifiers.map((specifier) => relative(SRC, resolve(dirname(file), specifier)));
}

/** What the infrastructure folders may import: each other, the shared vocabulary, the config, and the context's type. */
const INFRASTRUCTURE = ['db/', 'events/', 'records/', 'retention/', 'shared/', 'config/'];
const INFRASTRUCTURE_FILES = ['app-context.ts'];

describe('imports point down (decisions 0035, 0041)', () => {
  it('src/db, src/events, src/records and src/retention import nothing above infrastructure, migrations included', () => {
    const offenders = ['db', 'events', 'records', 'retention'].flatMap((folder) =>
      sourceFiles(join(SRC, folder)).flatMap((file) =>
        relativeImports(file, readFileSync(file, 'utf8'))
          .filter((target) => !INFRASTRUCTURE.some((allowed) => target.startsWith(allowed)) && !INFRASTRUCTURE_FILES.includes(target))
          .map((target) => `${relative(SRC, file)} → ${target}`),
      ),
    );
    expect(offenders).toEqual([]);
  });

  it('no feature folder imports resources/ (the list of the features and what derives from it sits above them)', () => {
    const offenders = ['catalog', 'customers', 'inventory', 'orders', 'records'].flatMap((folder) =>
      sourceFiles(join(SRC, folder)).flatMap((file) =>
        relativeImports(file, readFileSync(file, 'utf8'))
          .filter((target) => target.startsWith('resources/'))
          .map((target) => `${relative(SRC, file)} → ${target}`),
      ),
    );
    expect(offenders).toEqual([]);
  });

  it('the check sees static, dynamic and side-effect imports', () => {
    const file = join(SRC, 'db/example.ts');
    const text = [
      "import { a } from '../resources/store-schema.ts';",
      "export { b } from './schema.ts';",
      "const c = await import('../schema/migrate.ts');",
      "import '../suppliers/supplier.resource.ts';",
    ].join('\n');
    expect(relativeImports(file, text)).toEqual(['resources/store-schema.ts', 'db/schema.ts', 'schema/migrate.ts', 'suppliers/supplier.resource.ts']);
  });
});
