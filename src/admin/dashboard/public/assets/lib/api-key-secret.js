/**
 * A new API key as shown the one time its secret is known: after a create or a roll, the secret
 * replaces the dialog's form, with a copy button, what the key may do and a curl line to try it.
 * The secret is never asked for again (the service keeps only its hash); closing the dialog loses it.
 * Also how a key's access reads (scopeChips), which the keys table shows the same way.
 */
import { h } from './dom.js';
import { formatDateTime } from './format.js';
import { button, callout, copyButton } from './ui.js';

/** A key's scopes as chips; admin stands out. */
export function scopeChips(scopes) {
  return h(
    'span',
    { class: 'chips' },
    scopes.map((s) => h('span', { class: ['chip', s === 'admin' && 'chip-warning'], text: s })),
  );
}

/** Replaces the form with the new secret: shown this once, with a copy button. */
export function showCreated(close, controls, data, { title = 'API key created', note } = {}) {
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
