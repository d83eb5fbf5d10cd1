/**
 * The docs that list the resources, their scopes, their event types and the mirror's tables hold
 * those lists as blocks generated from the resource declarations (src/resources/resource-list.ts),
 * as the README's authorization matrix is generated from the route table: a resource added by the
 * recipe (src/README.md) shows up in each, and a block edited by hand or left stale fails here,
 * naming the file and the block. `UPDATE_DOC_BLOCKS=1 npx vitest run test/docs/generated-blocks.test.ts`
 * rewrites them.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FEED_EVENT_TYPES, READ_SCOPES, RESOURCES } from '../../src/resources/registry.ts';
import type { ResourceDeclaration } from '../../src/records/resource.ts';

const ROOT = new URL('../../', import.meta.url);
const code = (text: string) => `\`${text}\``;

/** What each resource's events are, one row per resource with events, then `ping`. */
function eventTypesTable(): string {
  const rows = RESOURCES.flatMap((r) => {
    if (!r.events) return [];
    const { prefix, kinds, when } = r.events;
    const types = kinds.map((kind) => code(`${prefix}.${kind}`)).join(' / ');
    const data = r.single
      ? `the ${r.noun}, as ${code(`GET /api/v1/${r.path}/:${r.key}`)} returns it`
      : `the ${r.noun}, as ${code(`GET /api/v1/${r.path}`)} lists it`;
    return [`| ${types} | ${when ?? `a ${r.noun} changes`} | ${data} | ${code(r.scope)} |`];
  });
  return [
    '| Type | Sent when | `data` | Scope a feed reader needs |',
    '|---|---|---|---|',
    ...rows,
    '| `ping` | an administrator sends a test event to one endpoint | `{ "endpoint_id", "message" }` | — (never in the feed) |',
  ].join('\n');
}

/** What an `*.updated` event's `previous` looks like, one example per resource (its declaration's `events.examplePrevious`). */
function previousExamples(): string {
  return RESOURCES.flatMap((r) => {
    const events: ResourceDeclaration['events'] = r.events;
    if (!events?.kinds.includes('updated')) return [];
    return [`- ${code(`${events.prefix}.updated`)}: ${code(`"previous": ${JSON.stringify(events.examplePrevious ?? {})}`)}`];
  }).join('\n');
}

/** The feed's scope rule as a sentence: each read scope → the event types it shows. */
function feedScopes(): string {
  return READ_SCOPES.map((scope) => {
    const types = RESOURCES.filter((r) => r.scope === scope && r.events).flatMap((r) => r.events!.kinds.map((k) => `${r.events!.prefix}.${k}`));
    return `${code(scope)} → ${types.map(code).join(', ')}`;
  }).join('; ');
}

const BLOCKS: { file: string; name: string; generate: () => string }[] = [
  { file: 'docs/webhooks.md', name: 'event-types', generate: eventTypesTable },
  { file: 'docs/webhooks.md', name: 'feed-scopes', generate: feedScopes },
  { file: 'docs/webhooks.md', name: 'previous-examples', generate: previousExamples },
  {
    file: 'docs/integration-guide.md',
    name: 'read-token',
    generate: () => ['```sh', `npx store-api tokens create --name erp --scopes ${READ_SCOPES.join(',')}`, '```'].join('\n'),
  },
  { file: 'packages/client/README.md', name: 'webhook-event-types', generate: () => [...FEED_EVENT_TYPES, 'ping'].map(code).join(', ') },
  { file: 'packages/sync/README.md', name: 'read-scopes', generate: () => code(READ_SCOPES.join(',')) },
  {
    file: 'packages/sync/README.md',
    name: 'mirror-tables',
    generate: () => RESOURCES.map((r) => (r.key === 'id' ? code(r.name) : `${code(r.name)} (keyed by ${code(r.key)})`)).join(', '),
  },
];

const start = (name: string) =>
  `<!-- ${name}:start (generated from the resource declarations by test/docs/generated-blocks.test.ts; UPDATE_DOC_BLOCKS=1 to rewrite) -->`;
const end = (name: string) => `<!-- ${name}:end -->`;

describe('generated blocks of the docs', () => {
  it.each(BLOCKS)('$file: $name', ({ file, name, generate }) => {
    const url = new URL(file, ROOT);
    const text = readFileSync(url, 'utf8');
    const from = text.indexOf(start(name));
    const to = text.indexOf(end(name));
    expect(from, `${file} has no ${start(name)} marker`).toBeGreaterThanOrEqual(0);
    expect(to, `${file} has no ${end(name)} marker after its start`).toBeGreaterThan(from);
    const inline = !text.slice(from, to).includes('\n');
    const body = generate();
    const wanted = inline ? `${start(name)}${body}${end(name)}` : `${start(name)}\n${body}\n${end(name)}`;
    const found = text.slice(from, to + end(name).length);
    if (process.env.UPDATE_DOC_BLOCKS === '1' && found !== wanted) {
      writeFileSync(url, text.slice(0, from) + wanted + text.slice(to + end(name).length));
      return;
    }
    expect(found, `${file}'s block ${name} differs from the declarations: UPDATE_DOC_BLOCKS=1 npx vitest run test/docs/generated-blocks.test.ts`).toBe(wanted);
  });
});
