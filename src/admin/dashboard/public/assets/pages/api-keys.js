/**
 * Integrations → API keys: the tokens integrations use on /api/v1. Create (the secret is shown
 * once, with a copy button), list (revoked and expired keys hidden unless asked for), roll (a new
 * secret; the old one keeps working for the overlap picked), rename and set rate limits, revoke
 * with confirmation. Each key shows who made it (decision 0026: a key acts with its maker's role
 * now); owners transfer a maker's keys to another administrator, or revoke them all, in one step
 * ("Keys by maker").
 */
import { h, replace, uid } from '../lib/dom.js';
import { get, patch, post } from '../lib/api.js';
import { formatDateTime } from '../lib/format.js';
import { loadResources } from '../lib/resources.js';
import {
  badge,
  button,
  callout,
  clearFormErrors,
  code,
  confirmDialog,
  copyButton,
  emptyState,
  errorState,
  field,
  formError,
  loadingBlock,
  openDialog,
  selectDialog,
  pageHeader,
  runBusy,
  showFormError,
  showProblemOnForm,
  timeEl,
  toast,
  tokenStatusBadge,
  card,
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
  return h(
    'span',
    { class: 'chips' },
    scopes.map((s) => h('span', { class: ['chip', s === 'admin' && 'chip-warning'], text: s })),
  );
}

const ROLL_OVERLAPS = [
  { value: '0', label: 'Now — the old key stops at once' },
  { value: '3600', label: 'In 1 hour' },
  { value: '86400', label: 'In 24 hours' },
  { value: '259200', label: 'In 3 days' },
  { value: '604800', label: 'In 7 days' },
];

function limitsText(t) {
  const parts = [];
  if (t.rate_limit_standard) parts.push(`${t.rate_limit_standard}/window`);
  if (t.rate_limit_export) parts.push(`exports ${t.rate_limit_export}/window`);
  return parts.length ? parts.join(', ') : 'Default';
}

/** Who made a key: an administrator (her role now, or removed) or the machine's operator (CLI). */
function makerLabel(maker) {
  return maker.kind === 'operator' ? 'CLI (machine operator)' : maker.email;
}

function makerCell(maker) {
  if (maker.kind === 'operator') return h('span', { class: 'muted', text: makerLabel(maker) });
  return [
    h('span', { text: maker.email }),
    maker.removed
      ? badge('Removed', 'danger', { title: 'Removed: the key lost its write and admin powers; read scopes still work' })
      : h('span', { class: 'cell-sub', text: maker.role }),
  ];
}

/** "Made by …" on one line under a key's name: the maker and her role now, or Removed. */
function makerLine(maker) {
  if (maker.kind === 'operator') return `Made by ${makerLabel(maker)}`;
  // The address may break after its @ only (a <wbr>), never letter by letter in a narrow column.
  const at = maker.email.indexOf('@');
  return [
    'Made by ',
    at > 0 ? [maker.email.slice(0, at + 1), h('wbr'), maker.email.slice(at + 1)] : maker.email,
    ' ',
    maker.removed ? badge('Removed', 'danger', { title: 'Removed: the key lost its write and admin powers; read scopes still work' }) : `(${maker.role})`,
  ];
}

/** Keys per page of the table. */
const PAGE_SIZE = 50;

function tokenRows(tokens, reload) {
  return tokens.map((t) =>
    h(
      'tr',
      { dataset: { tokenId: t.id } },
      h(
        'th',
        { scope: 'row', class: 'cell-strong' },
        t.name,
        // Who made it, under its name: a column of its own would not fit 1280 px with the rest.
        h('span', { class: 'cell-sub cell-maker' }, makerLine(t.made_by)),
        t.previous_secret_expires_at ? h('span', { class: 'cell-sub', text: `Old secret works until ${formatDateTime(t.previous_secret_expires_at)}` }) : null,
      ),
      h('td', { class: 'cell-key' }, code(`${t.prefix}…`)),
      h('td', {}, scopeChips(t.scopes)),
      h('td', {}, timeEl(t.created_at)),
      h('td', {}, t.last_used_at ? timeEl(t.last_used_at) : h('span', { class: 'muted', text: 'Never' })),
      h(
        'td',
        {},
        t.expires_at
          ? h('time', { datetime: t.expires_at, title: formatDateTime(t.expires_at, { seconds: true }) }, formatDateTime(t.expires_at))
          : h('span', { class: 'muted', text: 'Never' }),
      ),
      h('td', { text: limitsText(t) }),
      h('td', {}, tokenStatusBadge(t.status)),
      h(
        'td',
        { class: 'cell-actions' },
        t.status === 'active'
          ? [
              button({
                write: true,
                label: 'Edit',
                variant: 'ghost',
                size: 'sm',
                ariaLabel: `Edit API key ${t.name}`,
                onClick: () => openEditDialog(t, reload),
              }),
              button({
                write: true,
                label: 'Roll',
                variant: 'ghost',
                size: 'sm',
                ariaLabel: `Roll API key ${t.name}`,
                onClick: () => openRollDialog(t, reload),
              }),
              button({
                write: true,
                label: 'Revoke',
                variant: 'danger-ghost',
                size: 'sm',
                ariaLabel: `Revoke API key ${t.name}`,
                dataset: { action: 'revoke' },
                onClick: () => revoke(t, reload),
              }),
            ]
          : null,
      ),
    ),
  );
}

function openEditDialog(token, reload) {
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

function openRollDialog(token, reload) {
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
async function openCreateDialog(reload) {
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

/** Replaces the form with the new secret: shown this once, with a copy button. */
function showCreated(close, controls, data, { title = 'API key created', note } = {}) {
  controls.setTitle(title);
  controls.setDescription(note ?? null);
  const secret = h('input', {
    type: 'text',
    class: 'input-secret',
    readonly: true,
    value: data.token,
    'aria-label': 'The new API key',
    spellcheck: false,
    name: 'token',
  });
  secret.addEventListener('focus', () => secret.select());
  const origin = location.origin;
  controls.setContent(
    callout({ tone: 'warning', title: 'Copy the key now', text: 'It is shown only this once. If it is lost, revoke it and create a new one.' }),
    h(
      'div',
      { class: 'secret-row' },
      secret,
      copyButton(() => data.token, { input: secret, size: 'md', variant: 'primary' }),
    ),
    h(
      'dl',
      { class: 'meta-list meta-compact' },
      h('dt', { text: 'Name' }),
      h('dd', { text: data.name }),
      h('dt', { text: 'Access' }),
      h('dd', {}, scopeChips(data.scopes)),
      h('dt', { text: 'Expires' }),
      h('dd', { text: data.expires_at ? formatDateTime(data.expires_at) : 'Never' }),
    ),
    h('p', { class: 'field-label', text: 'Try it' }),
    h('pre', { class: 'code-block' }, h('code', { text: `curl -H "Authorization: Bearer ${data.token}" \\\n  ${origin}/api/v1/products?limit=2` })),
    h('div', { class: 'dialog-actions' }, button({ label: 'Done', variant: 'primary', onClick: () => close() })),
  );
  secret.focus();
}

/** The makers of active keys, each once, with how many keys they have. */
function makersOf(tokens) {
  const makers = new Map();
  for (const t of tokens) {
    if (t.status !== 'active') continue;
    const key = t.made_by.id ?? 'operator';
    const entry = makers.get(key) ?? { selector: key, maker: t.made_by, count: 0 };
    entry.count++;
    makers.set(key, entry);
  }
  return [...makers.values()];
}

function openTransferDialog(entry, admins, reload) {
  selectDialog({
    title: `Transfer the keys of ${makerLabel(entry.maker)}`,
    description: `${entry.count} active ${entry.count === 1 ? 'key' : 'keys'} will act with the new maker's role from their next request.`,
    label: 'New maker',
    name: 'to_admin_id',
    options: admins.filter((a) => a.id !== entry.maker.id).map((a) => ({ value: a.id, text: `${a.email} (${a.role})` })),
    submitLabel: 'Transfer keys',
    save: async (toAdminId) => {
      const { data } = await post(`/tokens/made-by/${entry.selector}/transfer`, { to_admin_id: toAdminId });
      return `Transferred ${data.length} ${data.length === 1 ? 'key' : 'keys'} to ${data[0]?.made_by.email}.`;
    },
    reload,
  });
}

async function revokeAllOf(entry, reload) {
  const confirmed = await confirmDialog({
    title: `Revoke every key of ${makerLabel(entry.maker)}?`,
    message: `${entry.count} active ${entry.count === 1 ? 'key is' : 'keys are'} refused from the next request. This cannot be undone.`,
    confirmLabel: 'Revoke all',
    danger: true,
    action: () => post(`/tokens/made-by/${entry.selector}/revoke`),
  });
  if (confirmed) {
    toast(`Revoked the keys of ${makerLabel(entry.maker)}.`);
    reload();
  }
}

/** Owners only: each maker of active keys, with Transfer… and Revoke all. */
function makersTable(tokens, admins, reload) {
  const makers = makersOf(tokens);
  if (makers.length === 0) return h('p', { class: 'muted', text: 'No active keys.' });
  return h(
    'div',
    { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Keys by maker (scrolls sideways on narrow screens)' },
    h(
      'table',
      { class: 'table', id: 'api-key-makers-table' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Maker', 'Active keys'].map((c) => h('th', { scope: 'col', text: c })),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Actions' })),
        ),
      ),
      h(
        'tbody',
        {},
        makers.map((entry) =>
          h(
            'tr',
            { dataset: { maker: entry.selector } },
            h('th', { scope: 'row', class: 'cell-maker' }, makerCell(entry.maker)),
            h('td', { text: String(entry.count) }),
            h('td', { class: 'cell-actions' }, [
              button({
                label: 'Transfer…',
                variant: 'ghost',
                size: 'sm',
                ariaLabel: `Transfer the keys of ${makerLabel(entry.maker)}`,
                onClick: () => openTransferDialog(entry, admins, reload),
              }),
              button({
                label: 'Revoke all',
                variant: 'danger-ghost',
                size: 'sm',
                ariaLabel: `Revoke all keys of ${makerLabel(entry.maker)}`,
                onClick: () => revokeAllOf(entry, reload),
              }),
            ]),
          ),
        ),
      ),
    ),
  );
}

export async function renderApiKeys(view) {
  const body = h('div');
  const isOwner = view.session?.role === 'owner';
  const makersBody = h('div');
  const showAll = view.query.get('show') === 'all';
  const toggle = h('a', { class: 'btn btn-ghost btn-sm', href: showAll ? '#/api-keys' : '#/api-keys?show=all' });
  // A store with hundreds of keys: a search by name or key prefix and pages of PAGE_SIZE, kept
  // across reloads (a revoke or a roll redraws the page the admin is on).
  let keys = [];
  let page = 0;
  const search = h('input', { type: 'search', name: 'search', autocomplete: 'off', placeholder: 'Name or key prefix' });
  const tableArea = h('div');
  const drawKeys = () => {
    const words = search.value.trim().toLowerCase();
    const shown = words ? keys.filter((t) => t.name.toLowerCase().includes(words) || t.prefix.toLowerCase().includes(words)) : keys;
    const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
    page = Math.min(page, pages - 1);
    const slice = shown.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
    const active = keys.filter((t) => t.status === 'active').length;
    const turn = (to) => {
      const label = to > page ? 'Next' : 'Previous';
      page = to;
      drawKeys();
      // The pager was redrawn: keep the focus on the button used, or the other one at an end.
      const buttons = [...tableArea.querySelectorAll('.pager button')];
      (buttons.find((b) => !b.disabled && b.textContent.trim() === label) ?? buttons.find((b) => !b.disabled))?.focus();
    };
    replace(
      tableArea,
      shown.length === 0
        ? h('p', { class: 'empty-inline', text: `No key matches “${search.value.trim()}”.` })
        : h(
            'div',
            { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'API keys (scrolls sideways on narrow screens)' },
            h(
              'table',
              { class: 'table table-keys', id: 'api-keys-table' },
              h('caption', { class: 'visually-hidden', text: `API keys: ${active} active of ${keys.length}` }),
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ['Name', 'Key', 'Access', 'Created', 'Last used', 'Expires', 'Rate limits', 'Status'].map((c) => h('th', { scope: 'col', text: c })),
                  h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Actions' })),
                ),
              ),
              h('tbody', {}, tokenRows(slice, reload)),
            ),
          ),
      shown.length > PAGE_SIZE
        ? h(
            'nav',
            { class: 'pager', 'aria-label': 'API key pages' },
            h('span', {
              class: 'pager-status',
              dataset: { role: 'key-range' },
              text: `${page * PAGE_SIZE + 1}–${page * PAGE_SIZE + slice.length} of ${shown.length}`,
            }),
            button({ label: 'Previous', size: 'sm', variant: 'secondary', disabled: page === 0, onClick: () => turn(page - 1) }),
            button({ label: 'Next', size: 'sm', variant: 'secondary', disabled: page >= pages - 1, onClick: () => turn(page + 1) }),
          )
        : null,
    );
  };
  search.addEventListener('input', () => {
    page = 0;
    drawKeys();
  });
  const searchBar = h('div', { class: 'keys-toolbar' }, field({ label: 'Search keys', control: search }));
  const reload = async () => {
    try {
      const { data: all } = await get('/tokens');
      if (isOwner) replace(makersBody, makersTable(all, (await get('/admins')).data, reload));
      const hidden = all.filter((t) => t.status !== 'active').length;
      replace(toggle, h('span', { class: 'btn-label', text: showAll ? 'Hide revoked and expired' : `Show revoked and expired (${hidden})` }));
      toggle.hidden = hidden === 0 && !showAll;
      const data = showAll ? all : all.filter((t) => t.status === 'active');
      if (data.length === 0 && all.length > 0) {
        replace(
          body,
          emptyState({
            iconName: 'key',
            title: 'No active API keys',
            text: `${hidden} revoked or expired ${hidden === 1 ? 'key is' : 'keys are'} hidden.`,
            action: button({ write: true, label: 'Create API key', icon: 'plus', variant: 'primary', onClick: () => openCreateDialog(reload) }),
          }),
        );
        return;
      }
      if (data.length === 0) {
        replace(
          body,
          emptyState({
            iconName: 'key',
            title: 'No API keys yet',
            text: 'Create a key for each system that reads the store, so each can be revoked on its own.',
            action: button({ write: true, label: 'Create API key', icon: 'plus', variant: 'primary', onClick: () => openCreateDialog(reload) }),
          }),
        );
        return;
      }
      keys = data;
      if (!tableArea.isConnected) replace(body, searchBar, tableArea);
      drawKeys();
    } catch (error) {
      if (error.status !== 401) replace(body, errorState(error, reload));
    }
  };
  replace(
    view.root,
    pageHeader({
      title: 'API keys',
      description: 'Keys let integrations read products, orders, customers and inventory through the API. Each is shown once, when created.',
      breadcrumbs: [{ label: 'Integrations' }, { label: 'API keys' }],
      actions: [toggle, button({ write: true, label: 'Create API key', icon: 'plus', variant: 'primary', onClick: () => openCreateDialog(reload) })],
    }),
    card({ body }),
    isOwner
      ? card({
          title: 'Keys by maker',
          description:
            "A key never does more than its maker's role allows now; a removed administrator's keys keep only their read scopes. Transfer them to another administrator or revoke them all.",
          body: makersBody,
        })
      : null,
  );
  replace(body, loadingBlock('Loading API keys…'));
  await reload();
}
