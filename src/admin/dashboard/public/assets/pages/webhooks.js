/**
 * Integrations → Webhooks: the endpoints events are delivered to, with their state (active, paused
 * by the circuit breaker until a time, disabled), and the form that creates and edits them.
 */
import { h, replace, uid } from '../lib/dom.js';
import { listAll, patch, post } from '../lib/api.js';
import {
  button,
  callout,
  card,
  clearFormErrors,
  code,
  copyButton,
  destinationChip,
  emptyState,
  endpointStateBadge,
  errorState,
  field,
  formError,
  loadingBlock,
  openDialog,
  pageHeader,
  runBusy,
  showFormError,
  showProblemOnForm,
  timeEl,
  toast,
} from '../lib/ui.js';
import { loadResources } from '../lib/resources.js';

export function eventTypesSummary(types) {
  if (!types || types.length === 0) return h('span', { class: 'chip chip-accent', text: 'All events' });
  const shown = types.slice(0, 2);
  return h(
    'span',
    { class: 'chips' },
    shown.map((t) => h('span', { class: 'chip', text: t })),
    types.length > shown.length ? h('span', { class: 'chip chip-muted', title: types.join(', '), text: `+${types.length - shown.length} more` }) : null,
  );
}

/**
 * The create / edit dialog. On create the signing secret is shown afterwards (it can also be
 * revealed later on the endpoint's page).
 */
export async function openEndpointDialog({ endpoint, onSaved, navigate }) {
  const editing = Boolean(endpoint);
  let eventGroups;
  try {
    // The event types an endpoint can subscribe to, grouped by resource (served by the admin API).
    eventGroups = (await loadResources()).event_groups;
  } catch (error) {
    toast(`Could not load the event types: ${error.message}`, { tone: 'error' });
    return;
  }
  openDialog({
    title: editing ? 'Edit endpoint' : 'Add webhook endpoint',
    description: editing
      ? undefined
      : 'Events are POSTed to this URL as JSON, or published to a broker (amqp://, mqtt://, nats://), signed with the Standard Webhooks scheme.',
    size: 'lg',
    render: (close, controls) => {
      const url = h('input', {
        type: 'url',
        name: 'url',
        value: endpoint?.url ?? '',
        placeholder: 'https://erp.example.com/webhooks/store  or  amqps://user:password@mq.example.com/erp?exchange=store',
        autocomplete: 'off',
        spellcheck: false,
        autofocus: true,
      });
      const description = h('input', {
        type: 'text',
        name: 'description',
        maxlength: '500',
        value: endpoint?.description ?? '',
        placeholder: 'e.g. ERP order sync',
      });
      const selectedTypes = new Set(endpoint?.event_types ?? []);
      const allMode = selectedTypes.size === 0;
      const modeName = uid('mode');
      const allRadio = h('input', { type: 'radio', name: modeName, id: `${modeName}-all`, value: 'all', checked: allMode });
      const someRadio = h('input', { type: 'radio', name: modeName, id: `${modeName}-some`, value: 'some', checked: !allMode });
      const groups = h(
        'div',
        { class: 'event-groups' },
        eventGroups.map((g) => {
          const groupId = uid('group');
          return h(
            'fieldset',
            { class: 'event-group' },
            h('legend', { id: groupId, text: g.label }),
            g.types.map((t) => {
              const id = uid('event');
              return h(
                'div',
                { class: 'check' },
                h('input', { type: 'checkbox', id, name: 'event_types', value: t, checked: selectedTypes.has(t) }),
                h('label', { for: id }, code(t, 'code-subtle')),
              );
            }),
          );
        }),
      );
      const syncMode = () => {
        const all = allRadio.checked;
        groups.hidden = all;
        for (const box of groups.querySelectorAll('input')) box.disabled = all;
      };
      allRadio.addEventListener('change', syncMode);
      someRadio.addEventListener('change', syncMode);
      syncMode();
      const eventsErrorId = uid('events-error');
      const events = h(
        'fieldset',
        { class: 'fieldset field', dataset: { field: 'event_types' }, 'aria-describedby': eventsErrorId },
        h('legend', { class: 'field-label', text: 'Events to send' }),
        h(
          'div',
          { class: 'radio-list' },
          h(
            'div',
            { class: 'check' },
            allRadio,
            h(
              'label',
              { for: allRadio.id },
              h('span', { class: 'check-label', text: 'All events' }),
              h('span', { class: 'check-hint', text: 'including event types added in the future' }),
            ),
          ),
          h('div', { class: 'check' }, someRadio, h('label', { for: someRadio.id }, h('span', { class: 'check-label', text: 'Only selected events' }))),
        ),
        groups,
        h('p', { id: eventsErrorId, class: 'field-error', hidden: true }),
      );
      const order = deliveryOrderFields(endpoint);
      const credentials = credentialFields(endpoint?.credentials ?? null);
      const enabled = h('input', { type: 'checkbox', name: 'enabled', id: uid('enabled'), checked: true });
      const submit = h(
        'button',
        { type: 'submit', class: 'btn btn-primary' },
        h('span', { class: 'btn-label', text: editing ? 'Save changes' : 'Add endpoint' }),
      );
      const form = h(
        'form',
        { novalidate: true },
        field({
          label: 'Endpoint URL',
          control: url,
          required: true,
          hint: 'HTTPS is strongly recommended; any 2xx answer counts as delivered. A broker: amqp(s)://user:password@host/<vhost>?exchange=<name>, mqtt(s)://user:password@host/<topic prefix>, nats(+tls)://user:password@host/<subject prefix>; its password is not shown again.',
        }),
        field({ label: 'Description', control: description, hint: 'Optional: what this endpoint is for.' }),
        events,
        order.section,
        credentials.section,
        editing
          ? null
          : h(
              'div',
              { class: 'check check-standalone' },
              enabled,
              h(
                'label',
                { for: enabled.id },
                h('span', { class: 'check-label', text: 'Enabled' }),
                h('span', { class: 'check-hint', text: 'start delivering events right away' }),
              ),
            ),
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );

      form.addEventListener('submit', (event) => {
        event.preventDefault();
        clearFormErrors(form);
        const chosen = allRadio.checked ? [] : [...groups.querySelectorAll('input:checked')].map((b) => b.value);
        let problem = null;
        try {
          const parsed = new URL(url.value.trim());
          if (!['https:', 'http:', 'amqp:', 'amqps:', 'mqtt:', 'mqtts:', 'nats:', 'nats+tls:'].includes(parsed.protocol)) {
            problem = { param: 'url', message: 'Use an https:// URL, or a broker: amqp(s)://, mqtt(s)://, nats(+tls)://.' };
          }
        } catch {
          problem = { param: 'url', message: 'Enter a full URL, like https://example.com/webhooks.' };
        }
        if (!problem && someRadio.checked && chosen.length === 0)
          problem = { param: 'event_types', message: 'Select at least one event, or choose all events.' };
        if (!problem) problem = order.problem();
        if (problem) {
          showProblemOnForm(form, { errors: [problem] });
          (problem.param === 'url' ? url : problem.param === 'batch_size' ? order.batchSize : groups.querySelector('input'))?.focus();
          return;
        }
        const body = { url: url.value.trim(), event_types: chosen, description: description.value.trim() || null, ...order.values() };
        const credentialChanges = credentials.changes();
        if (credentialChanges) body.credentials = credentialChanges;
        // The URL as shown (a broker password as ****) is not sent back: the stored one stays.
        if (editing && body.url === endpoint.url) delete body.url;
        runBusy(submit, async () => {
          try {
            if (editing) {
              const { data } = await patch(`/webhooks/endpoints/${endpoint.id}`, body);
              close();
              toast('Endpoint saved.');
              onSaved?.(data);
            } else {
              const { data } = await post('/webhooks/endpoints', { ...body, enabled: enabled.checked });
              onSaved?.(data);
              showCreatedSecret(close, controls, data, navigate);
            }
          } catch (error) {
            if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          }
        });
      });
      return form;
    },
  });
}

/** Most and fewest events in one FIFO batch (the admin API's batch_size). */
const BATCH_SIZE_MIN = 1;
const BATCH_SIZE_MAX = 500;
const DEFAULT_BATCH_SIZE = 50;

/**
 * The delivery order (decision 0059): unordered, or FIFO with its batch size (shown for FIFO only).
 * `values()` is what the create or edit body carries; `problem()` a batch size out of range.
 */
function deliveryOrderFields(endpoint) {
  const fifo = endpoint?.delivery_order === 'fifo';
  const order = h(
    'select',
    { name: 'delivery_order' },
    h('option', { value: 'unordered', text: 'As soon as possible (any order)', selected: !fifo }),
    h('option', { value: 'fifo', text: 'In the order written (FIFO, in batches)', selected: fifo }),
  );
  const batchSize = h('input', {
    type: 'number',
    name: 'batch_size',
    min: String(BATCH_SIZE_MIN),
    max: String(BATCH_SIZE_MAX),
    step: '1',
    inputmode: 'numeric',
    value: String(endpoint?.batch_size ?? DEFAULT_BATCH_SIZE),
  });
  const batchField = field({
    label: 'Batch size',
    control: batchSize,
    hint: `Most events in one batch: one HTTP request carrying a JSON array, or a run of broker messages (${BATCH_SIZE_MIN}–${BATCH_SIZE_MAX}).`,
  });
  const sync = () => {
    batchField.hidden = order.value !== 'fifo';
  };
  order.addEventListener('change', sync);
  sync();
  const section = h(
    'div',
    {},
    field({
      label: 'Delivery order',
      control: order,
      hint: 'In order: the next batch goes only after the previous one succeeded or went dead, so one failing event holds the rest.',
    }),
    batchField,
  );
  const size = () => Number(batchSize.value);
  return {
    section,
    batchSize,
    values: () => (order.value === 'fifo' ? { delivery_order: 'fifo', batch_size: size() } : { delivery_order: 'unordered' }),
    problem: () =>
      order.value === 'fifo' && !(Number.isInteger(size()) && size() >= BATCH_SIZE_MIN && size() <= BATCH_SIZE_MAX)
        ? { param: 'batch_size', message: `Enter a whole number from ${BATCH_SIZE_MIN} to ${BATCH_SIZE_MAX}.` }
        : null,
  };
}

function showCreatedSecret(close, controls, data, navigate) {
  controls.setTitle('Endpoint added');
  controls.setDescription(null);
  const secret = h('input', { type: 'text', class: 'input-secret', readonly: true, value: data.secret, 'aria-label': 'Signing secret', spellcheck: false });
  secret.addEventListener('focus', () => secret.select());
  const open = button({
    label: 'Open endpoint',
    variant: 'primary',
    onClick: () => {
      close();
      navigate(`#/webhooks/${data.id}`);
    },
  });
  controls.setContent(
    h(
      'p',
      { class: 'dialog-text' },
      'Events for ',
      code(data.url),
      ' are signed with this secret. Give it to the receiver so it can verify the ',
      code('webhook-signature'),
      ' header (for example with the standardwebhooks library).',
    ),
    h(
      'div',
      { class: 'secret-row' },
      secret,
      copyButton(() => data.secret, { input: secret, size: 'md' }),
    ),
    callout({ tone: 'info', text: "You can reveal the secret again, or rotate it, on the endpoint's page." }),
    h('div', { class: 'dialog-actions' }, button({ label: 'Close', onClick: () => close() }), open),
  );
  secret.focus();
}

export async function renderWebhooks(view) {
  const body = h('div');
  const add = () => openEndpointDialog({ onSaved: () => reload(), navigate: view.navigate });
  const reload = async () => {
    try {
      const endpoints = await listAll('/webhooks/endpoints');
      if (endpoints.length === 0) {
        replace(
          body,
          emptyState({
            iconName: 'webhook',
            title: 'No webhook endpoints yet',
            text: 'Add an endpoint to have orders, products, customers and stock changes pushed to your systems as they happen.',
            action: button({ write: true, label: 'Add endpoint', icon: 'plus', variant: 'primary', onClick: add }),
          }),
        );
        return;
      }
      replace(
        body,
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'table', id: 'endpoints-table' },
            h('caption', { class: 'visually-hidden', text: 'Webhook endpoints' }),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['Endpoint', 'Destination', 'Events', 'State', 'Failure streak', 'Created'].map((c) => h('th', { scope: 'col', text: c })),
              ),
            ),
            h(
              'tbody',
              {},
              endpoints.map((e) =>
                h(
                  'tr',
                  { dataset: { endpointId: e.id } },
                  h(
                    'th',
                    { scope: 'row', class: 'cell-endpoint' },
                    h('a', { href: `#/webhooks/${e.id}`, class: 'endpoint-link', text: e.url }),
                    e.description ? h('span', { class: 'cell-sub', text: e.description }) : null,
                  ),
                  h('td', { class: 'cell-destination' }, destinationChip(e)),
                  h('td', { class: 'cell-events' }, eventTypesSummary(e.event_types)),
                  h(
                    'td',
                    {},
                    endpointStateBadge(e),
                    e.state === 'disabled' && e.disabled_reason ? h('span', { class: 'cell-sub', text: e.disabled_reason }) : null,
                  ),
                  h('td', { class: 'num' }, String(e.consecutive_failures ?? 0)),
                  h('td', {}, timeEl(e.created_at)),
                ),
              ),
            ),
          ),
        ),
      );
    } catch (error) {
      if (error.status !== 401) replace(body, errorState(error, reload));
    }
  };
  replace(
    view.root,
    pageHeader({
      title: 'Webhooks',
      description:
        'Endpoints that receive store events. Failed deliveries are retried on a schedule; an endpoint that keeps failing is paused for a while by the circuit breaker.',
      breadcrumbs: [{ label: 'Integrations' }, { label: 'Webhooks' }],
      actions: [button({ write: true, label: 'Add endpoint', icon: 'plus', variant: 'primary', onClick: add })],
    }),
    card({ body }),
  );
  replace(body, loadingBlock('Loading endpoints…'));
  await reload();
}

/**
 * The form's gateway credentials (decision 0058): extra headers, one `Name: value` a line (`Name:`
 * alone removes a stored one), and OAuth 2.0 client credentials. Stored values are never shown:
 * header names and "set" only; a client secret left empty keeps the stored one. A client
 * certificate is set through the admin API. `changes()` is the body's `credentials`, or undefined
 * when nothing was entered.
 */
function credentialFields(current) {
  const storedHeaders = Object.keys(current?.headers ?? {});
  const headers = h('textarea', { name: 'credentials.headers', rows: '3', spellcheck: false, autocomplete: 'off', placeholder: 'X-Api-Key: value' });
  const tokenUrl = h('input', {
    type: 'url',
    name: 'credentials.oauth.token_url',
    value: current?.oauth?.token_url ?? '',
    placeholder: 'https://login.example.com/oauth2/token',
    autocomplete: 'off',
    spellcheck: false,
  });
  const clientId = h('input', {
    type: 'text',
    name: 'credentials.oauth.client_id',
    value: current?.oauth?.client_id ?? '',
    autocomplete: 'off',
    spellcheck: false,
  });
  const clientSecret = h('input', {
    type: 'password',
    name: 'credentials.oauth.client_secret',
    autocomplete: 'new-password',
    placeholder: current?.oauth ? 'set (leave empty to keep it)' : '',
  });
  const scope = h('input', { type: 'text', name: 'credentials.oauth.scope', value: current?.oauth?.scope ?? '', autocomplete: 'off', spellcheck: false });
  const section = h(
    'fieldset',
    { class: 'fieldset' },
    h('legend', { class: 'field-label', text: 'Gateway credentials (optional)' }),
    field({
      label: 'Extra headers',
      control: headers,
      hint: storedHeaders.length
        ? `Stored (values hidden): ${storedHeaders.join(', ')}. One "Name: value" a line adds or replaces one; "Name:" alone removes it.`
        : 'One "Name: value" a line, sent with every request; values are stored sealed and never shown again.',
    }),
    field({ label: 'OAuth token URL', control: tokenUrl, hint: 'Client credentials grant: each request carries a bearer token from here. Empty: none.' }),
    field({ label: 'OAuth client ID', control: clientId }),
    field({ label: 'OAuth client secret', control: clientSecret, hint: 'Stored sealed, never shown again.' }),
    field({ label: 'OAuth scope', control: scope, hint: 'Optional, space-separated.' }),
  );
  const changes = () => {
    const out = {};
    const lines = headers.value
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    if (lines.length > 0) {
      out.headers = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        const name = (colon === -1 ? line : line.slice(0, colon)).trim();
        const value = colon === -1 ? '' : line.slice(colon + 1).trim();
        out.headers[name] = value === '' ? null : value;
      }
    }
    const token = tokenUrl.value.trim();
    if (token) {
      const oauth = { token_url: token, client_id: clientId.value.trim(), scope: scope.value.trim() || null };
      if (clientSecret.value) oauth.client_secret = clientSecret.value;
      const same =
        current?.oauth &&
        !oauth.client_secret &&
        oauth.token_url === current.oauth.token_url &&
        oauth.client_id === current.oauth.client_id &&
        oauth.scope === current.oauth.scope;
      if (!same) out.oauth = oauth;
    } else if (current?.oauth) out.oauth = null;
    return Object.keys(out).length > 0 ? out : undefined;
  };
  return { section, changes };
}
