/**
 * Who made each API key (decision 0026: a key acts with its maker's role now): how a maker reads
 * on the keys table (makerLine), and the owners' "Keys by maker" table (makersTable), where each
 * maker's active keys are transferred to another administrator
 * (POST /tokens/made-by/:maker/transfer) or revoked all at once (POST /tokens/made-by/:maker/revoke).
 */
import { h } from './dom.js';
import { post } from './api.js';
import { badge, button, confirmDialog, selectDialog, toast } from './ui.js';

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
export function makerLine(maker) {
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
export function makersTable(tokens, admins, reload) {
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
