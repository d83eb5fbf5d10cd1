/**
 * The event catalog: every webhook event type with its description, payload schema and an example,
 * from GET /admin/api/v1/event-types (the same source as the OpenAPI document's webhooks and
 * docs/webhooks.md). Any role may read it.
 */
import { h, replace } from '../lib/dom.js';
import { formatJson } from '../lib/format.js';
import { card, code, copyButton, errorState, loadingBlock, pageHeader } from '../lib/ui.js';
import { eventCatalog } from '../lib/endpoint-actions.js';

function entryCard(entry) {
  const example = formatJson(entry.example);
  const schema = formatJson(entry.schema);
  const id = `event-type-${entry.type.replace(/[^a-z0-9]+/gi, '-')}`;
  return card({
    id,
    title: entry.type,
    className: 'event-type-card',
    actions: [copyButton(() => example, { label: 'Copy example' })],
    body: h(
      'div',
      { dataset: { eventType: entry.type } },
      h('p', { class: 'event-type-description', text: entry.description }),
      h(
        'details',
        { class: 'event-type-section' },
        h('summary', { text: 'Example body' }),
        h('pre', { class: 'code-block', tabindex: '0' }, h('code', { text: example })),
      ),
      h(
        'details',
        { class: 'event-type-section' },
        h('summary', { text: 'Payload schema (JSON Schema)' }),
        h('pre', { class: 'code-block', tabindex: '0' }, h('code', { text: schema })),
      ),
    ),
  });
}

export async function renderEventTypes(view) {
  replace(view.root, loadingBlock('Loading the event catalog…'));
  let types;
  try {
    types = await eventCatalog();
  } catch (error) {
    if (error.status !== 401)
      replace(
        view.root,
        pageHeader({ title: 'Event catalog' }),
        errorState(error, () => renderEventTypes(view)),
      );
    return;
  }
  const jump = h(
    'ul',
    { class: 'event-type-index', 'aria-label': 'Event types' },
    types.map((t) =>
      h(
        'li',
        {},
        h(
          'button',
          {
            type: 'button',
            class: 'link-button',
            onClick: () => {
              // The card's heading carries the id; it takes the focus so keyboard users continue there.
              const heading = document.getElementById(`event-type-${t.type.replace(/[^a-z0-9]+/gi, '-')}`);
              if (!heading) return;
              heading.setAttribute('tabindex', '-1');
              heading.scrollIntoView({ block: 'start' });
              heading.focus({ preventScroll: true });
            },
          },
          code(t.type),
        ),
      ),
    ),
  );
  replace(
    view.root,
    pageHeader({
      title: 'Event catalog',
      description: `${types.length} event types a webhook endpoint can receive, each with its payload schema and an example. Subscribe an endpoint to them on its settings, or send one as a test from the endpoint's page.`,
    }),
    jump,
    h('div', { class: 'event-type-list' }, types.map(entryCard)),
  );
}
