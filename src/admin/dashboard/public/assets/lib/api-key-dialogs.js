/**
 * The API keys page's dialogs, kept apart from the page so it stays about the list:
 *
 *   openCreateDialog  name, access (the scopes GET /resources offers; admin unticked) and expiry,
 *                     then POST /tokens; the new secret replaces the form (api-key-secret.js)
 *   openEditDialog    rename and set the key's rate limits (PATCH /tokens/:id); the secret stays
 *   openRollDialog    a new secret (POST /tokens/:id/roll); the old one keeps working for the
 *                     overlap picked, and the new one is shown like a created key's
 *   revokeKey         confirmation, then POST /tokens/:id/revoke; focus moves to the next key
 *
 * All are `write` actions: their buttons are hidden for viewers (app.css), and the admin API
 * refuses them anyway. Errors show at the field they concern.
 */
import { h, uid } from './dom.js';
import { patch, post } from './api.js';
import { formatDateTime } from './format.js';
import { loadResources } from './resources.js';
import { button, clearFormErrors, code, confirmDialog, field, formError, openDialog, runBusy, showFormError, showProblemOnForm, toast } from './ui.js';
import { showCreated } from './api-key-secret.js';

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

const ROLL_OVERLAPS = [
  { value: '0', label: 'Now — the old key stops at once' },
  { value: '3600', label: 'In 1 hour' },
  { value: '86400', label: 'In 24 hours' },
  { value: '259200', label: 'In 3 days' },
  { value: '604800', label: 'In 7 days' },
];

export function openEditDialog(token, reload) {
  openDialog({
    title: 'Edit API key',
    description: `${token.prefix}… — the secret does not change.`,
    render: (close) => {
      const name = h('input', { type: 'text', name: 'name', maxlength: '100', autocomplete: 'off', value: token.name, autofocus: true });
      const standard = h('input', {
        type: 'number',
        name: 'rate_limit_standard',
        min: '1',
        max: '1000000',
        inputmode: 'numeric',
        value: token.rate_limit_standard ?? '',
      });
      const exportLimit = h('input', {
        type: 'number',
        name: 'rate_limit_export',
        min: '1',
        max: '1000000',
        inputmode: 'numeric',
        value: token.rate_limit_export ?? '',
      });
      const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Save' }));
      const form = h(
        'form',
        { novalidate: true },
        field({ label: 'Name', control: name, required: true }),
        h(
          'div',
          { class: 'field-row' },
          field({ label: 'Requests per window', control: standard, hint: 'Empty: the server default (RATE_LIMIT_STANDARD).' }),
          field({ label: 'Exports per window', control: exportLimit, hint: 'Empty: the server default (RATE_LIMIT_EXPORT).' }),
        ),
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );
      const limit = (input) => (input.value.trim() === '' ? null : Number(input.value));
      form.addEventListener('submit', (event) => {
        event.preventDefault();
        clearFormErrors(form);
        const problems = [];
        if (!name.value.trim()) problems.push({ param: 'name', message: 'Give the key a name.' });
        for (const input of [standard, exportLimit]) {
          const v = limit(input);
          if (v !== null && (!Number.isInteger(v) || v < 1 || v > 1_000_000))
            problems.push({ param: input.name, message: 'A whole number from 1 to 1,000,000, or empty.' });
        }
        if (problems.length) {
          showProblemOnForm(form, { errors: problems });
          form.querySelector('[aria-invalid="true"]')?.focus();
          return;
        }
        runBusy(submit, async () => {
          try {
            await patch(`/tokens/${token.id}`, { name: name.value.trim(), rate_limit_standard: limit(standard), rate_limit_export: limit(exportLimit) });
            close();
            toast(`Saved the API key "${name.value.trim()}".`);
            await reload();
          } catch (error) {
            if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          }
        });
      });
      return form;
    },
  });
}

export function openRollDialog(token, reload) {
  openDialog({
    title: 'Roll API key?',
    description: `A new secret for "${token.name}". Switch your integration to it before the old one stops working.`,
    render: (close, controls) => {
      const overlap = h(
        'select',
        { name: 'overlap_seconds', value: '86400', autofocus: true },
        ROLL_OVERLAPS.map((o) => h('option', { value: o.value, text: o.label })),
      );
      const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Roll key' }));
      const form = h(
        'form',
        { novalidate: true },
        field({ label: 'The old key stops working', control: overlap }),
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );
      form.addEventListener('submit', (event) => {
        event.preventDefault();
        runBusy(submit, async () => {
          try {
            const { data } = await post(`/tokens/${token.id}/roll`, { overlap_seconds: Number(overlap.value) });
            showCreated(close, controls, data, {
              title: 'API key rolled',
              note: data.previous_secret_expires_at
                ? `The old key works until ${formatDateTime(data.previous_secret_expires_at)}.`
                : 'The old key no longer works.',
            });
            reload();
          } catch (error) {
            showFormError(form, error.message);
          }
        });
      });
      return form;
    },
  });
}

/** Asks before revoking; then the list reloads and focus stays in it. */
export async function revokeKey(token, reload) {
  const confirmed = await confirmDialog({
    title: 'Revoke API key?',
    message: `Integrations using "${token.name}" (${token.prefix}…) will be refused from their next request. This cannot be undone.`,
    confirmLabel: 'Revoke key',
    danger: true,
    action: () => post(`/tokens/${token.id}/revoke`),
  });
  if (confirmed) {
    toast(`Revoked the API key "${token.name}".`);
    // The row leaves the list: focus goes to the next key's Revoke button, else the page title,
    // never to the top of the document.
    const rows = [...document.querySelectorAll('#api-keys-table tbody tr')];
    const index = rows.findIndex((r) => r.dataset.tokenId === token.id);
    await reload();
    const after = [...document.querySelectorAll('#api-keys-table tbody tr [data-action="revoke"]')];
    const target = after[Math.min(Math.max(index, 0), after.length - 1)] ?? document.querySelector('#main h1');
    target?.focus();
  }
}

/** Opens the create dialog once the scopes the service has are known (toast on failure). */
export async function openCreateDialog(reload) {
  let scopeOptions;
  try {
    scopeOptions = (await loadResources()).scopes;
  } catch (error) {
    toast(`Could not load the scopes: ${error.message}`, { tone: 'error' });
    return;
  }
  // After the new key was shown, focus goes to its row (its name), once the list shows it: the
  // button that opened the dialog was redrawn with the list and is gone.
  let created = null;
  openDialog({
    title: 'Create API key',
    description: 'For an ERP or another system reading the store through /api/v1.',
    onClose: () => {
      if (!created) return;
      const { id, reloaded } = created;
      Promise.resolve(reloaded).then(() => {
        const cell = document.querySelector(`#api-keys-table tr[data-token-id="${id}"] th`);
        if (!cell) return;
        cell.tabIndex = -1;
        cell.focus();
      });
    },
    render: (close, controls) => {
      const name = h('input', { type: 'text', name: 'name', maxlength: '100', autocomplete: 'off', autofocus: true, placeholder: 'e.g. ERP production' });
      const scopeGroupId = uid('scopes');
      const scopeBoxes = scopeOptions.map((s) => {
        const id = uid('scope');
        const box = h('input', { type: 'checkbox', id, name: 'scopes', value: s.value, checked: s.value !== 'admin' });
        return h(
          'div',
          { class: 'check' },
          box,
          h(
            'label',
            { for: id },
            h('span', { class: 'check-label', text: s.label }),
            ' ',
            code(s.value, 'code-subtle'),
            h('span', { class: 'check-hint', text: s.hint }),
          ),
        );
      });
      const scopes = h(
        'fieldset',
        { class: 'fieldset field', dataset: { field: 'scopes' }, 'aria-describedby': `${scopeGroupId}-error` },
        h('legend', { class: 'field-label', text: 'Access' }),
        h('div', { class: 'check-list' }, scopeBoxes),
        h('p', { id: `${scopeGroupId}-error`, class: 'field-error', hidden: true }),
      );
      const expiry = h(
        'select',
        { name: 'expiry' },
        EXPIRY.map((e) => h('option', { value: e.value, text: e.label })),
      );
      const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
      const customDate = h('input', { type: 'date', name: 'expires_on', min: tomorrow });
      const customField = field({ label: 'Expiry date', control: customDate, hint: 'The key stops working at the end of that day (your time).' });
      customField.hidden = true;
      expiry.addEventListener('change', () => {
        customField.hidden = expiry.value !== 'custom';
        if (!customField.hidden) customDate.focus();
      });
      const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Create key' }));
      const form = h(
        'form',
        { novalidate: true },
        field({ label: 'Name', control: name, required: true, hint: 'Who or what uses the key, so you can tell keys apart later.' }),
        scopes,
        h('div', { class: 'field-row' }, field({ label: 'Expires', control: expiry }), customField),
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );

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
        if (expiresAt && Date.parse(expiresAt) <= Date.now()) {
          showProblemOnForm(form, {
            errors: [{ param: 'expires_on', message: 'Pick a date in the future: a key that has already expired would never work.' }],
          });
          customDate.focus();
          return;
        }
        runBusy(submit, async () => {
          try {
            const { data } = await post('/tokens', { name: name.value.trim(), scopes: chosen, ...(expiresAt ? { expires_at: expiresAt } : {}) });
            showCreated(close, controls, data);
            created = { id: data.id, reloaded: reload() };
          } catch (error) {
            // The server names body.expires_at; the field for it is the date picker.
            const problem = {
              errors: (error.errors ?? []).map((e) => (/expires_at$/.test(e.param) ? { param: 'expires_on', message: `The expiry date ${e.message}.` } : e)),
            };
            if (problem.errors.some((e) => e.param === 'expires_on')) customField.hidden = false;
            if (!showProblemOnForm(form, problem)) showFormError(form, error.message);
            form.querySelector('[aria-invalid="true"]')?.focus();
          }
        });
      });
      return form;
    },
  });
}
