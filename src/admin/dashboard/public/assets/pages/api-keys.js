/**
 * Integrations → API keys: the tokens integrations use on /api/v1. Create (the secret is shown
 * once, with a copy button), list, revoke with confirmation.
 */
import { h, replace, uid } from '../lib/dom.js';
import { get, post } from '../lib/api.js';
import { formatDateTime } from '../lib/format.js';
import { loadResources } from '../lib/resources.js';
import {
  button, callout, clearFormErrors, code, confirmDialog, copyButton, emptyState, errorState, field, formError,
  loadingBlock, openDialog, pageHeader, runBusy, showFormError, showProblemOnForm, timeEl, toast, tokenStatusBadge, card,
} from '../lib/ui.js';

const EXPIRY = [
  { value: 'never', label: 'Never' },
  { value: '30', label: 'In 30 days' },
  { value: '90', label: 'In 90 days' },
  { value: '365', label: 'In 1 year' },
  { value: 'custom', label: 'On a date…' },
];

function expiryIso(choice, customDate) {
  if (choice === 'never') return null;
  if (choice === 'custom') return customDate ? new Date(`${customDate}T23:59:59`).toISOString() : undefined;
  return new Date(Date.now() + Number(choice) * 86_400_000).toISOString();
}

function scopeChips(scopes) {
  return h('span', { class: 'chips' }, scopes.map((s) => h('span', { class: ['chip', s === 'admin' && 'chip-warning'], text: s })));
}

function tokenRows(tokens, reload) {
  return tokens.map((t) => h('tr', { dataset: { tokenId: t.id } },
    h('th', { scope: 'row', class: 'cell-strong' }, t.name),
    h('td', { class: 'cell-key' }, code(`${t.prefix}…`)),
    h('td', {}, scopeChips(t.scopes)),
    h('td', {}, timeEl(t.created_at)),
    h('td', {}, t.last_used_at ? timeEl(t.last_used_at) : h('span', { class: 'muted', text: 'Never' })),
    h('td', {}, t.expires_at ? h('time', { datetime: t.expires_at, title: formatDateTime(t.expires_at, { seconds: true }) }, formatDateTime(t.expires_at)) : h('span', { class: 'muted', text: 'Never' })),
    h('td', {}, tokenStatusBadge(t.status)),
    h('td', { class: 'cell-actions' }, t.status === 'active'
      ? button({ label: 'Revoke', variant: 'danger-ghost', size: 'sm', ariaLabel: `Revoke API key ${t.name}`, onClick: () => revoke(t, reload) })
      : null)));
}

async function revoke(token, reload) {
  const confirmed = await confirmDialog({
    title: 'Revoke API key?',
    message: `Integrations using "${token.name}" (${token.prefix}…) will be refused from their next request. This cannot be undone.`,
    confirmLabel: 'Revoke key',
    danger: true,
    action: () => post(`/tokens/${token.id}/revoke`),
  });
  if (confirmed) {
    toast(`Revoked the API key "${token.name}".`);
    await reload();
  }
}

/** Opens the create dialog once the scopes the service has are known (toast on failure). */
async function openCreateDialog(reload) {
  let scopeOptions;
  try {
    scopeOptions = (await loadResources()).scopes;
  } catch (error) {
    toast(`Could not load the scopes: ${error.message}`, { tone: 'error' });
    return;
  }
  openDialog({
    title: 'Create API key',
    description: 'For an ERP or another system reading the store through /api/v1.',
    render: (close, controls) => {
      const name = h('input', { type: 'text', name: 'name', maxlength: '100', autocomplete: 'off', autofocus: true, placeholder: 'e.g. ERP production' });
      const scopeGroupId = uid('scopes');
      const scopeBoxes = scopeOptions.map((s) => {
        const id = uid('scope');
        const box = h('input', { type: 'checkbox', id, name: 'scopes', value: s.value, checked: s.value !== 'admin' });
        return h('div', { class: 'check' }, box, h('label', { for: id }, h('span', { class: 'check-label', text: s.label }), ' ', code(s.value, 'code-subtle'), h('span', { class: 'check-hint', text: s.hint })));
      });
      const scopes = h('fieldset', { class: 'fieldset field', dataset: { field: 'scopes' }, 'aria-describedby': `${scopeGroupId}-error` },
        h('legend', { class: 'field-label', text: 'Access' }),
        h('div', { class: 'check-list' }, scopeBoxes),
        h('p', { id: `${scopeGroupId}-error`, class: 'field-error', hidden: true }));
      const expiry = h('select', { name: 'expiry' }, EXPIRY.map((e) => h('option', { value: e.value, text: e.label })));
      const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
      const customDate = h('input', { type: 'date', name: 'expires_on', min: tomorrow });
      const customField = field({ label: 'Expiry date', control: customDate, hint: 'The key stops working at the end of that day (your time).' });
      customField.hidden = true;
      expiry.addEventListener('change', () => {
        customField.hidden = expiry.value !== 'custom';
        if (!customField.hidden) customDate.focus();
      });
      const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Create key' }));
      const form = h('form', { novalidate: true },
        field({ label: 'Name', control: name, required: true, hint: 'Who or what uses the key, so you can tell keys apart later.' }),
        scopes,
        h('div', { class: 'field-row' }, field({ label: 'Expires', control: expiry }), customField),
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit));

      form.addEventListener('submit', (event) => {
        event.preventDefault();
        clearFormErrors(form);
        const chosen = [...form.querySelectorAll('input[name="scopes"]:checked')].map((b) => b.value);
        const expiresAt = expiryIso(expiry.value, customDate.value);
        if (!name.value.trim()) {
          showProblemOnForm(form, { errors: [{ param: 'name', message: 'Give the key a name.' }] });
          name.focus();
          return;
        }
        if (chosen.length === 0) {
          showProblemOnForm(form, { errors: [{ param: 'scopes', message: 'Choose at least one kind of access.' }] });
          form.querySelector('input[name="scopes"]').focus();
          return;
        }
        if (expiresAt === undefined) {
          showProblemOnForm(form, { errors: [{ param: 'expires_on', message: 'Pick the expiry date.' }] });
          customDate.focus();
          return;
        }
        runBusy(submit, async () => {
          try {
            const { data } = await post('/tokens', { name: name.value.trim(), scopes: chosen, ...(expiresAt ? { expires_at: expiresAt } : {}) });
            showCreated(close, controls, data);
            reload();
          } catch (error) {
            if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          }
        });
      });
      return form;
    },
  });
}

/** Replaces the form with the new secret: shown this once, with a copy button. */
function showCreated(close, controls, data) {
  controls.setTitle('API key created');
  controls.setDescription(null);
  const secret = h('input', { type: 'text', class: 'input-secret', readonly: true, value: data.token, 'aria-label': 'The new API key', spellcheck: false, name: 'token' });
  secret.addEventListener('focus', () => secret.select());
  const origin = location.origin;
  controls.setContent(
    callout({ tone: 'warning', title: 'Copy the key now', text: 'It is shown only this once. If it is lost, revoke it and create a new one.' }),
    h('div', { class: 'secret-row' }, secret, copyButton(() => data.token, { input: secret, size: 'md', variant: 'primary' })),
    h('dl', { class: 'meta-list meta-compact' },
      h('dt', { text: 'Name' }), h('dd', { text: data.name }),
      h('dt', { text: 'Access' }), h('dd', {}, scopeChips(data.scopes)),
      h('dt', { text: 'Expires' }), h('dd', { text: data.expires_at ? formatDateTime(data.expires_at) : 'Never' })),
    h('p', { class: 'field-label', text: 'Try it' }),
    h('pre', { class: 'code-block' }, h('code', { text: `curl -H "Authorization: Bearer ${data.token}" \\\n  ${origin}/api/v1/products?limit=2` })),
    h('div', { class: 'dialog-actions' }, button({ label: 'Done', variant: 'primary', onClick: () => close() })));
  secret.focus();
}

export async function renderApiKeys(view) {
  const body = h('div');
  const reload = async () => {
    try {
      const { data } = await get('/tokens');
      if (data.length === 0) {
        replace(body, emptyState({ iconName: 'key', title: 'No API keys yet', text: 'Create a key for each system that reads the store, so each can be revoked on its own.', action: button({ label: 'Create API key', icon: 'plus', variant: 'primary', onClick: () => openCreateDialog(reload) }) }));
        return;
      }
      const active = data.filter((t) => t.status === 'active').length;
      replace(body,
        h('div', { class: 'table-wrap' },
          h('table', { class: 'table', id: 'api-keys-table' },
            h('caption', { class: 'visually-hidden', text: `API keys: ${active} active of ${data.length}` }),
            h('thead', {}, h('tr', {}, ['Name', 'Key', 'Access', 'Created', 'Last used', 'Expires', 'Status'].map((c) => h('th', { scope: 'col', text: c })), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Actions' })))),
            h('tbody', {}, tokenRows(data, reload)))));
    } catch (error) {
      if (error.status !== 401) replace(body, errorState(error, reload));
    }
  };
  replace(view.root,
    pageHeader({
      title: 'API keys',
      description: 'Keys let integrations read products, orders, customers and inventory through the API. Each is shown once, when created.',
      breadcrumbs: [{ label: 'Integrations' }, { label: 'API keys' }],
      actions: [button({ label: 'Create API key', icon: 'plus', variant: 'primary', onClick: () => openCreateDialog(reload) })],
    }),
    card({ body }));
  replace(body, loadingBlock('Loading API keys…'));
  await reload();

}
