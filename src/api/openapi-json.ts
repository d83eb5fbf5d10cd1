/**
 * JSON helpers of the OpenAPI document's assembly (plugins/openapi.ts, openapi-webhooks.ts): plain
 * copies, component references, PascalCase names, and the named schemas found inline and replaced
 * by references.
 */
// biome-ignore lint/suspicious/noExplicitAny: the generated OpenAPI document is walked and patched as untyped JSON.
export type Json = Record<string, any>;

export const plain = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

export const ref = (kind: 'schemas' | 'headers' | 'parameters' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });

export const pascal = (word: string) => word.replace(/(?:^|[^A-Za-z0-9]+)([A-Za-z0-9])/g, (_m, c: string) => c.toUpperCase());

/**
 * Every schema with a `title` found inline in the paths that is not a component yet becomes one
 * (the admin API's answers: ApiKey, WebhookEndpoint, …), so generators name their types.
 */
export function collectTitledSchemas(node: unknown, found: Map<string, Json>): void {
  if (Array.isArray(node)) {
    for (const item of node) collectTitledSchemas(item, found);
    return;
  }
  if (!node || typeof node !== 'object') return;
  const object = node as Json;
  if (typeof object.title === 'string' && (object.type === 'object' || Array.isArray(object.anyOf)) && !found.has(object.title))
    found.set(object.title, object);
  for (const value of Object.values(object)) collectTitledSchemas(value, found);
}

/** Replaces every inline copy of a named schema below `node` with a $ref; `keep` is left as is. */
export function refNamedSchemas(node: unknown, names: Set<string>, keep?: unknown): unknown {
  if (Array.isArray(node)) return node.map((item) => refNamedSchemas(item, names));
  if (!node || typeof node !== 'object') return node;
  const object = node as Json;
  if (node !== keep && typeof object.title === 'string' && names.has(object.title) && (object.type === 'object' || Array.isArray(object.anyOf))) {
    return ref('schemas', object.title);
  }
  return Object.fromEntries(Object.entries(object).map(([key, value]) => [key, refNamedSchemas(value, names)]));
}
