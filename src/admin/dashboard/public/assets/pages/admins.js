/**
 * Settings → Administrators: who can sign in, with which role. Owners invite (a one-time link,
 * shown once, to hand over), change roles, remove administrators (their sessions end at once) and
 * issue password-reset links, see an administrator's sessions and end them all. Others see the list only.
 */
import { h, replace } from '../lib/dom.js';
import { sessionsTable } from '../lib/session-list.js';
import { ssoCard } from '../lib/sso-card.js';
import { del, get, patch, post } from '../lib/api.js';
import {
  badge,
  button,
  callout,
  card,
  clearFormErrors,
  confirmDialog,
  copyButton,
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
} from '../lib/ui.js';

export const ROLES = [
  { value: 'owner', label: 'Owner', hint: 'everything, including administrators' },
  { value: 'admin', label: 'Admin', hint: 'API keys, webhooks and deliveries; not administrators' },
  { value: 'viewer', label: 'Viewer', hint: 'reads everything, changes nothing' },
];
const ROLE_TONES = { owner: 'info', admin: 'success', viewer: 'neutral' };
const roleBadge = (role) => badge(ROLES.find((r) => r.value === role)?.label ?? role, ROLE_TONES[role] ?? 'neutral');

/** The one-time link, to copy and hand over; shown this once. */
function showLink(controls, close, { title, text, url }) {
  controls.setTitle(title);
  controls.setDescription(null);
  const input = h('input', {
    type: 'text',
    class: 'input-secret',
    readonly: true,
    value: url,
    'aria-label': 'The one-time link',
    spellcheck: false,
    name: 'link',
  });
  input.addEventListener('focus', () => input.select());
  controls.setContent(
    callout({ tone: 'warning', title: 'Copy the link now', text }),
    h(
      'div',
      { class: 'secret-row link-box' },
      input,
      copyButton(() => url, { input, size: 'md', variant: 'primary' }),
    ),
    h('div', { class: 'dialog-actions' }, button({ label: 'Done', variant: 'primary', onClick: () => close() })),
  );
  input.focus();
}

function openInviteDialog(reload) {
  openDialog({
    title: 'Invite an administrator',
    description: 'They get a one-time link to choose their password. Send it to them yourself.',
    render: (close, controls) => {
      const email = h('input', { type: 'email', name: 'email', autocomplete: 'off', spellcheck: false, autofocus: true });
      const role = h(
        'select',
        { name: 'role', value: 'viewer' },
        ROLES.map((r) => h('option', { value: r.value, text: `${r.label} — ${r.hint}` })),
      );
      const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Create invitation' }));
      const form = h(
        'form',
        { novalidate: true },
        field({ label: 'Email', control: email, required: true }),
        field({ label: 'Role', control: role }),
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );
      form.addEventListener('submit', (event) => {
        event.preventDefault();
        clearFormErrors(form);
        if (!email.value.trim()) {
          showProblemOnForm(form, { errors: [{ param: 'email', message: 'Enter their email address.' }] });
          email.focus();
          return;
        }
        runBusy(submit, async () => {
          try {
            const { data } = await post('/admins/invitations', { email: email.value.trim(), role: role.value });
            showLink(controls, close, {
              title: 'Invitation created',
              text: `The link works once, until ${new Date(data.expires_at).toLocaleString('en-GB')}. Anyone holding it can join as ${data.email}.`,
              url: data.url,
            });
            reload();
          } catch (error) {
            if (!showProblemOnForm(form, error)) showFormError(form, error.message);
            form.querySelector('[aria-invalid="true"]')?.focus();
          }
        });
      });
      return form;
    },
  });
}

function openRoleDialog(admin, reload) {
  selectDialog({
    title: `Change the role of ${admin.email}`,
    description: 'They are signed out and sign in again with the new rights.',
    label: 'Role',
    name: 'role',
    value: admin.role,
    options: ROLES.map((r) => ({ value: r.value, text: `${r.label} — ${r.hint}` })),
    submitLabel: 'Save role',
    save: async (role) => {
      await patch(`/admins/${admin.id}`, { role });
      return `${admin.email} is now ${ROLES.find((r) => r.value === role).label.toLowerCase()}.`;
    },
    reload,
  });
}

async function removeAdmin(admin, reload) {
  const ok = await confirmDialog({
    title: 'Remove this administrator?',
    message: `${admin.email} is signed out everywhere at once and can no longer sign in. Invite them again to undo.`,
    confirmLabel: 'Remove administrator',
    danger: true,
    action: () => del(`/admins/${admin.id}`),
  });
  if (ok) {
    toast(`Removed ${admin.email}.`);
    await reload();
    document.querySelector('h1')?.focus();
  }
}

/** An owner looks at where an administrator is signed in, and may end every one of those sessions. */
function openSessionsDialog(admin) {
  openDialog({
    title: `Sessions of ${admin.email}`,
    description: 'Where they are signed in now. Ending them signs them out everywhere; they can sign in again (remove them to stop that).',
    size: 'lg',
    render: (close, controls) => {
      const draw = async () => {
        controls.setContent(loadingBlock('Loading sessions…'));
        try {
          const { data } = await get(`/admins/${admin.id}/sessions`);
          const others = data.filter((s) => !s.current);
          controls.setContent(
            others.length === 0
              ? h('p', { class: 'muted', text: 'They are signed in nowhere.' })
              : sessionsTable(others, { caption: `Sessions of ${admin.email}` }),
            h(
              'div',
              { class: 'dialog-actions' },
              button({ label: 'Close', onClick: () => close() }),
              others.length === 0
                ? null
                : button({
                    label: 'End all sessions',
                    variant: 'danger',
                    onClick: async () => {
                      const { data: ended } = await del(`/admins/${admin.id}/sessions`);
                      close();
                      toast(`Ended ${ended.ended === 1 ? '1 session' : `${ended.ended} sessions`} of ${admin.email}.`);
                    },
                  }),
            ),
          );
        } catch (error) {
          if (error.status !== 401) controls.setContent(errorState(error, draw));
        }
      };
      draw();
      return loadingBlock('Loading sessions…');
    },
  });
}

function issueReset(admin) {
  openDialog({
    title: `Reset the password of ${admin.email}?`,
    description: 'A one-time link to choose a new password. Using it signs them out everywhere.',
    size: 'sm',
    render: (close, controls) =>
      h(
        'div',
        {},
        h(
          'div',
          { class: 'dialog-actions' },
          button({ label: 'Cancel', onClick: () => close() }),
          button({
            label: 'Create reset link',
            variant: 'primary',
            onClick: async () => {
              const { data } = await post(`/admins/${admin.id}/password-reset`);
              showLink(controls, close, {
                title: 'Password-reset link',
                text: `The link works once, until ${new Date(data.expires_at).toLocaleString('en-GB')}. Give it to ${data.email} only.`,
                url: data.url,
              });
            },
          }),
        ),
      ),
  });
}

export async function renderAdmins(view) {
  const isOwner = view.session.role === 'owner';
  const body = h('div');
  const invitations = h('div');
  const reload = async () => {
    try {
      const [{ data }, open] = await Promise.all([get('/admins'), isOwner ? get('/admins/invitations') : Promise.resolve({ data: [] })]);
      replace(
        body,
        h(
          'div',
          { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Administrators (scrolls sideways on narrow screens)' },
          h(
            'table',
            { class: 'table', id: 'admins-table' },
            h('caption', { class: 'visually-hidden', text: `Administrators: ${data.length}` }),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['Email', 'Role', 'Two-factor', 'Added', 'Last sign-in'].map((c) => h('th', { scope: 'col', text: c })),
                isOwner ? h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Actions' })) : null,
              ),
            ),
            h(
              'tbody',
              {},
              data.map((a) =>
                h(
                  'tr',
                  { dataset: { adminEmail: a.email } },
                  h(
                    'th',
                    { scope: 'row', class: 'cell-strong' },
                    a.email,
                    a.email === view.session.email ? h('span', { class: 'muted', text: ' (you)' }) : null,
                  ),
                  h('td', {}, roleBadge(a.role)),
                  h('td', {}, a.second_factor ? badge('On', 'success') : badge('Off', 'neutral')),
                  h('td', {}, timeEl(a.created_at)),
                  h('td', {}, a.last_sign_in_at ? timeEl(a.last_sign_in_at) : h('span', { class: 'muted', text: 'Never' })),
                  isOwner
                    ? h(
                        'td',
                        { class: 'cell-actions' },
                        h(
                          'div',
                          // The actions wrap onto a second line: side by side they made the table wider
                          // than its box at 1280 px, Remove off screen.
                          { class: 'row-actions row-actions-wide' },
                          button({
                            label: 'Change role',
                            size: 'sm',
                            variant: 'ghost',
                            ariaLabel: `Change role of ${a.email}`,
                            onClick: () => openRoleDialog(a, reload),
                          }),
                          button({
                            label: 'Reset password',
                            size: 'sm',
                            variant: 'ghost',
                            ariaLabel: `Reset password of ${a.email}`,
                            onClick: () => issueReset(a),
                          }),
                          a.email === view.session.email
                            ? null
                            : button({
                                label: 'Sessions',
                                size: 'sm',
                                variant: 'ghost',
                                ariaLabel: `Sessions of ${a.email}`,
                                onClick: () => openSessionsDialog(a),
                              }),
                          a.second_factor && a.email !== view.session.email
                            ? button({
                                label: 'Turn off two-factor',
                                size: 'sm',
                                variant: 'ghost',
                                ariaLabel: `Turn off two-factor authentication of ${a.email}`,
                                onClick: () => removeSecondFactorOf(a, reload),
                              })
                            : null,
                          button({
                            label: 'Remove',
                            size: 'sm',
                            variant: 'danger-ghost',
                            ariaLabel: `Remove ${a.email}`,
                            onClick: () => removeAdmin(a, reload),
                          }),
                        ),
                      )
                    : null,
                ),
              ),
            ),
          ),
        ),
      );
      replace(
        invitations,
        open.data.length === 0
          ? h('p', { class: 'muted', text: 'No open invitations.' })
          : h(
              'div',
              { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Open invitations (scrolls sideways on narrow screens)' },
              h(
                'table',
                { class: 'table', id: 'invitations-table' },
                h('caption', { class: 'visually-hidden', text: 'Open invitations' }),
                h(
                  'thead',
                  {},
                  h(
                    'tr',
                    {},
                    ['Email', 'Role', 'Invited by', 'Expires'].map((c) => h('th', { scope: 'col', text: c })),
                    h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Actions' })),
                  ),
                ),
                h(
                  'tbody',
                  {},
                  open.data.map((i) =>
                    h(
                      'tr',
                      {},
                      h('th', { scope: 'row' }, i.email),
                      h('td', {}, roleBadge(i.role)),
                      h('td', { text: i.created_by }),
                      h('td', {}, Date.parse(i.expires_at) > Date.now() ? timeEl(i.expires_at, { absolute: true }) : badge('Expired', 'neutral')),
                      h(
                        'td',
                        { class: 'cell-actions' },
                        button({
                          label: 'Withdraw',
                          size: 'sm',
                          variant: 'danger-ghost',
                          ariaLabel: `Withdraw the invitation of ${i.email}`,
                          onClick: async () => {
                            await del(`/admins/invitations/${i.id}`);
                            toast(`Withdrew the invitation of ${i.email}.`);
                            await reload();
                            document.querySelector('h1')?.focus();
                          },
                        }),
                      ),
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
      title: 'Administrators',
      description: 'Who can sign in to this dashboard. Owners manage administrators; admins manage keys and webhooks; viewers read only.',
      breadcrumbs: [{ label: 'Settings' }, { label: 'Administrators' }],
      actions: isOwner ? [button({ label: 'Invite administrator', icon: 'plus', variant: 'primary', onClick: () => openInviteDialog(reload) })] : [],
    }),
    isOwner ? null : h('div', { class: 'role-note' }, callout({ tone: 'info', text: 'Only owners can invite, remove or change administrators.' })),
    card({ body }),
    isOwner ? securityCard(view) : null,
    isOwner ? ssoCard() : null,
    isOwner ? card({ title: 'Open invitations', description: 'Links not used yet. Withdraw one to make its link stop working.', body: invitations }) : null,
  );
  replace(body, loadingBlock('Loading administrators…'));
  await reload();
}

/** An owner turns off the second factor of an administrator who lost their device and recovery codes. */
async function removeSecondFactorOf(admin, reload) {
  const confirmed = await confirmDialog({
    title: `Turn off two-factor authentication of ${admin.email}?`,
    message: 'They sign in with their password alone until they set up a new authenticator (at once, when two-factor is required).',
    confirmLabel: 'Turn it off',
    danger: true,
    action: async () => {
      await del(`/admins/${admin.id}/second-factor`);
    },
  });
  if (!confirmed) return;
  toast(`Two-factor authentication of ${admin.email} is off.`);
  await reload();
}

/** The owner's setting: a second factor required of every administrator. */
function securityCard(view) {
  const checkbox = h('input', { type: 'checkbox', name: 'require_second_factor', id: 'require-second-factor' });
  const save = button({
    label: 'Save',
    variant: 'primary',
    onClick: async () => {
      const wanted = checkbox.checked;
      try {
        const { data } = await patch('/settings/security', { require_second_factor: wanted });
        checkbox.checked = data.require_second_factor;
        toast(data.require_second_factor ? 'Every administrator now needs two-factor authentication.' : 'Two-factor authentication is optional again.');
      } catch (error) {
        checkbox.checked = !wanted;
        throw error;
      }
    },
  });
  get('/settings/security')
    .then(({ data }) => {
      checkbox.checked = data.require_second_factor;
    })
    .catch(() => {});
  const mine = view.session.second_factor?.enabled;
  return card({
    title: 'Security',
    description: 'Administrators without a second factor are sent to set one up before anything else.',
    body: h(
      'div',
      { class: 'narrow-form' },
      h(
        'div',
        { class: 'check check-standalone' },
        checkbox,
        h('label', { for: 'require-second-factor', text: 'Require two-factor authentication of every administrator' }),
      ),
      mine ? null : h('p', { class: 'field-hint', text: 'Set up your own first (Your account).' }),
      h('div', { class: 'form-actions' }, save),
    ),
  });
}
