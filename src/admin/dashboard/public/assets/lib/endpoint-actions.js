/**
 * The endpoint page's test event and delete actions (decision 0020), kept apart from the page so it
 * stays about the endpoint's state:
 *
 *   testEventButton   picks a type from the event catalog (GET /event-types), shows its example
 *                     and sends it to this endpoint only (POST …/test-events), marked as a test
 *   deleteButton      asks for the endpoint's URL as confirmation, then DELETE …/:id; its queued
 *                     deliveries and its history go with it
 *
 * Both are `write` buttons: hidden for viewers (app.css), refused by the admin API anyway. Errors
 * show at the field they concern (an unknown type at the type, an endpoint deleted meanwhile at the
 * confirmation).
 */
import { h } from './dom.js';
import { del, get, post } from './api.js';
import { formatJson } from './format.js';
import { button, clearFormErrors, field, formError, openDialog, runBusy, setFieldError, showFormError, showProblemOnForm, toast } from './ui.js';

let catalog = null;

/** The event catalog, fetched once per page load (it changes only with a new version of the service). */
export async function eventCatalog() {
  if (!catalog) catalog = get('/event-types').then((answer) => answer.data);
  try {
    return await catalog;
  } catch (error) {
    catalog = null;
    throw error;
  }
}

function openTestEventDialog(endpoint, types, onSent) {
  openDialog({
    title: 'Send a test event',
    description: `An example event of the type you pick is signed and delivered to ${endpoint.url} only. It is marked as a test: "test": true in the body and the header webhook-test: true.`,
    size: 'lg',
    render: (close) => {
      const subscribed = endpoint.event_types?.length ? new Set(endpoint.event_types) : null;
      const choices = types.filter((t) => t.type !== 'ping');
      const select = h(
        'select',
        { name: 'type', autofocus: true },
        choices.map((t) => h('option', { value: t.type, text: subscribed && !subscribed.has(t.type) ? `${t.type} (not subscribed)` : t.type })),
      );
      const description = h('p', { class: 'field-hint test-event-description' });
      const example = h('pre', { class: 'code-block test-event-example', tabindex: '0', 'aria-label': 'Example body' });
      const show = () => {
        const entry = choices.find((t) => t.type === select.value);
        description.textContent = entry?.description ?? '';
        example.textContent = entry ? formatJson({ ...entry.example, test: true }) : '';
      };
      select.addEventListener('change', show);
      const submit = h(
        'button',
        { type: 'submit', class: 'btn btn-primary', dataset: { action: 'send-test-event' } },
        h('span', { class: 'btn-label', text: 'Send test event' }),
      );
      const form = h(
        'form',
        { novalidate: true },
        field({ label: 'Event type', control: select, required: true }),
        description,
        h('details', { class: 'test-event-preview' }, h('summary', { text: 'Show the example body' }), example),
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );
      show();
      form.addEventListener('submit', (event) => {
        event.preventDefault();
        clearFormErrors(form);
        runBusy(submit, async () => {
          try {
            const { data } = await post(`/webhooks/endpoints/${endpoint.id}/test-events`, { type: select.value });
            close();
            toast(`Test ${data.type} event queued. It appears in the deliveries below, marked Test.`);
            onSent(data);
          } catch (error) {
            if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          }
        });
      });
      return form;
    },
  });
}

/** "Send test event…": opens the type picker (the catalog is loaded on click). */
export function testEventButton(endpoint, { onSent }) {
  return button({
    write: true,
    label: 'Send test event…',
    icon: 'send',
    variant: 'secondary',
    dataset: { action: 'test-event' },
    onClick: async () => openTestEventDialog(endpoint, await eventCatalog(), onSent),
  });
}

function openDeleteDialog(endpoint, onDeleted) {
  openDialog({
    title: 'Delete this endpoint?',
    size: 'sm',
    render: (close) => {
      const confirmInput = h('input', { type: 'text', name: 'confirm_url', autocomplete: 'off', spellcheck: 'false', autofocus: true });
      const submit = h(
        'button',
        { type: 'submit', class: 'btn btn-danger', dataset: { action: 'confirm-delete' } },
        h('span', { class: 'btn-label', text: 'Delete endpoint' }),
      );
      const confirmField = field({ label: 'Type the endpoint’s URL to confirm', control: confirmInput, required: true });
      const form = h(
        'form',
        { novalidate: true },
        h('p', { class: 'dialog-text' }, 'This deletes ', h('strong', { class: 'break-all', text: endpoint.url }), '.'),
        h('p', {
          class: 'dialog-text',
          text: 'Deliveries still queued for it are never sent, and its delivery history is deleted with it. The audit log keeps a record. This cannot be undone.',
        }),
        confirmField,
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );
      confirmInput.addEventListener('input', () => setFieldError(confirmField, ''));
      form.addEventListener('submit', (event) => {
        event.preventDefault();
        clearFormErrors(form);
        if (confirmInput.value.trim() !== endpoint.url) {
          setFieldError(confirmField, `Type ${endpoint.url} exactly, or cancel.`);
          confirmInput.focus();
          return;
        }
        runBusy(submit, async () => {
          try {
            await del(`/webhooks/endpoints/${endpoint.id}`);
            close(true);
            toast(`Endpoint ${endpoint.url} deleted.`);
            onDeleted();
          } catch (error) {
            const message = error.status === 404 ? 'This endpoint no longer exists: someone deleted it meanwhile. Nothing was changed.' : error.message;
            setFieldError(confirmField, message);
            if (error.status !== 404) showFormError(form, error.message);
          }
        });
      });
      return form;
    },
  });
}

/** "Delete…": a confirmation naming the endpoint; afterwards `onDeleted` (the page goes to the list). */
export function deleteButton(endpoint, { onDeleted }) {
  return button({
    write: true,
    label: 'Delete…',
    icon: 'trash',
    variant: 'danger-ghost',
    dataset: { action: 'delete' },
    onClick: () => openDeleteDialog(endpoint, onDeleted),
  });
}
