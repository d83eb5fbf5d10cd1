/**
 * Every store resource, and everything derived from their declarations: the read scopes, the event
 * types with the scope that sees them and the schema of their `data`, their examples and the
 * OpenAPI tags. Adding a resource is adding its declaration to RESOURCES (resource-list.ts;
 * src/README.md, "Adding a resource").
 */
import type { TSchema } from '@sinclair/typebox';
import { RESOURCES } from './resource-list.ts';
import type { EventTypesOf, ResourceDeclaration } from '../records/resource.ts';

export { RESOURCES };

type Resource = (typeof RESOURCES)[number];

/** The read scopes, one per distinct resource scope, in resource order. */
export type ReadScope = Resource['scope'];
export const READ_SCOPES: readonly ReadScope[] = [...new Set(RESOURCES.map((r) => r.scope))];

/** Every event type a store change appends (the feed's and the webhooks' types, `ping` aside). */
export type FeedEventType = EventTypesOf<Resource>;

interface EventTypeInfo {
  readonly type: FeedEventType;
  readonly resource: ResourceDeclaration;
}

const EVENT_TYPE_INFO: readonly EventTypeInfo[] = RESOURCES.flatMap((resource) => {
  const events: ResourceDeclaration['events'] = resource.events;
  return (events?.kinds ?? []).map((kind) => ({ type: `${events!.prefix}.${kind}` as FeedEventType, resource }));
});

/** Event types served by the feed and subscribable by webhooks, in resource order. */
export const FEED_EVENT_TYPES: readonly FeedEventType[] = EVENT_TYPE_INFO.map((e) => e.type);

/** The read scope a token needs to see each event type: the scope of the resource it carries. */
export const EVENT_TYPE_SCOPES = Object.fromEntries(EVENT_TYPE_INFO.map((e) => [e.type, e.resource.scope])) as Readonly<Record<FeedEventType, ReadScope>>;

/** The record each event type carries as `data`. */
export const EVENT_DATA = Object.fromEntries(EVENT_TYPE_INFO.map((e) => [e.type, e.resource.record])) as Readonly<Record<FeedEventType, TSchema>>;

/** The example record each event type carries as `data` (OpenAPI examples of the feed and the webhooks). */
export const EVENT_EXAMPLES = Object.fromEntries(EVENT_TYPE_INFO.map((e) => [e.type, e.resource.example])) as Readonly<Record<FeedEventType, unknown>>;

/** The event types whose events carry `previous`, what the change changed (decision 0057): every `*.updated`. */
export function carriesPrevious(type: string): boolean {
  return type.endsWith('.updated');
}

/** The fields a record's change never lists in `previous`: they change with every change. */
export const BOOKKEEPING_FIELDS = ['version', 'last_modified'] as const;

/** The example `previous` of each event type that carries one (its resource's `events.examplePrevious`). */
export const EVENT_PREVIOUS_EXAMPLES = Object.fromEntries(
  EVENT_TYPE_INFO.filter((e) => carriesPrevious(e.type)).map((e) => [e.type, e.resource.events?.examplePrevious ?? {}]),
) as Readonly<Partial<Record<FeedEventType, Readonly<Record<string, unknown>>>>>;

/** The OpenAPI tags of the resources: one per label, in resource order, described by the first resource giving a description. */
export const RESOURCE_TAGS: readonly { name: string; description: string }[] = [...new Set(RESOURCES.map((r) => r.label))].map((label) => {
  const description = RESOURCES.map((r): string | undefined => (r.label === label ? r.labelDescription : undefined)).find(Boolean);
  if (!description) throw new Error(`no resource labelled ${label} gives its labelDescription (the OpenAPI tag's)`);
  return { name: label, description };
});

/** The record schemas and the schemas nested in them (OpenAPI components), without repeats. */
export const RECORD_SCHEMAS: readonly TSchema[] = [...new Set(RESOURCES.flatMap((r) => [...(r.nested ?? []), r.record]))];

/** The read scopes with what each gives access to, e.g. 'read stock levels and stock movements'. */
export function readScopeCatalog(): { scope: ReadScope; label: string; hint: string }[] {
  return READ_SCOPES.map((scope) => {
    const resources = RESOURCES.filter((r) => r.scope === scope);
    return { scope, label: resources[0]!.label, hint: `read ${resources.map((r) => r.summary).join(' and ')}` };
  });
}

const KIND_WORDING: Record<string, string> = { created: 'was created', updated: 'was changed' };

/** One sentence on what an event type means, from its resource declaration, e.g. 'A product was created; …'. */
export function eventTypeDescription(type: FeedEventType): string {
  const info = EVENT_TYPE_INFO.find((e) => e.type === type)!;
  const dot = type.lastIndexOf('.');
  const noun = type.slice(0, dot).replace(/_/g, ' ');
  const kind = type.slice(dot + 1);
  const article = /^[aeiou]/.test(noun) ? 'An' : 'A';
  return `${article} ${noun} record ${KIND_WORDING[kind] ?? kind} (${info.resource.label}); \`data\` is the record as the read API returns it.`;
}

/** The event types grouped by their resources' label, in resource order (the dashboard's webhook form). */
export function eventTypeGroups(): { label: string; types: FeedEventType[] }[] {
  const groups = new Map<string, FeedEventType[]>();
  for (const { type, resource } of EVENT_TYPE_INFO) groups.set(resource.label, [...(groups.get(resource.label) ?? []), type]);
  return [...groups].map(([label, types]) => ({ label, types }));
}

/** Every resource as the OpenAPI document's `x-resources` lists it (client and sync tool generate from it). */
export function resourceCatalog() {
  return RESOURCES.map((r) => {
    const events: ResourceDeclaration['events'] = r.events;
    return {
      name: r.name,
      path: r.path,
      noun: r.noun,
      key: r.key,
      record: String(r.record.title),
      single: r.single,
      scope: r.scope,
      events: events ? events.kinds.map((kind) => `${events.prefix}.${kind}`) : [],
      mirror_query: r.mirrorQuery ?? {},
    };
  });
}
