/**
 * The owner's single sign-on card on the Administrators page (decision 0062): the store's OpenID
 * provider (issuer, client id and secret), the email domains it may sign in, the claim read for the
 * role and what each of its values gives, the role when none maps (or refuse), and "require SSO"
 * with the break-glass owners who keep their password. Saving and turning it off ask for a fresh
 * proof (the API's reauthentication_required, answered by the dashboard's dialog). Its labels and
 * buttons share no words with the page's others (Email, Role, Password, Save), which tests find by name.
 */
import { h } from './dom.js';
import { del, get, request } from './api.js';
import { button, card, clearFormErrors, field, showProblemOnForm, toast } from './ui.js';

const ROLE_OPTIONS = [
  ['', 'Refuse the sign-in'],
  ['viewer', 'Viewer'],
  ['admin', 'Admin'],
  ['owner', 'Owner'],
];

/** `value = role` lines ⇄ the role map. */
function mapToText(map) {
  return Object.entries(map ?? {})
    .map(([value, role]) => `${value} = ${role}`)
    .join('\n');
}
function textToMap(text) {
  const map = {};
  for (const line of text.split('\n')) {
    const at = line.lastIndexOf('=');
    if (at > 0)
      map[line.slice(0, at).trim()] = line
        .slice(at + 1)
        .trim()
        .toLowerCase();
  }
  return map;
}

export function ssoCard() {
  const input = (name, props = {}) => h('input', { name, id: `sso-${name}`, spellcheck: false, ...props });
  const issuer = input('issuer', { type: 'url', placeholder: 'https://login.example.com/tenant' });
  const clientId = input('client_id');
  const secret = input('client_secret', { type: 'password', autocomplete: 'new-password' });
  const domains = input('allowed_domains', { placeholder: 'example.com, example.org' });
  const claim = input('role_claim', { value: 'groups' });
  const roleMap = h('textarea', { name: 'role_map', id: 'sso-role_map', rows: 3, placeholder: 'erp-owners = owner\nerp-admins = admin\nstaff = viewer' });
  const defaultRole = h(
    'select',
    { name: 'default_role', id: 'sso-default_role' },
    ...ROLE_OPTIONS.map(([value, label]) => h('option', { value, text: label })),
  );
  const require = h('input', { type: 'checkbox', name: 'require_sso', id: 'sso-require' });
  /** One checkbox per owner of the store (filled once the administrators are read). */
  let breakGlass = [];
  const breakGlassList = h('div');
  // Its own error line (not the page's one `.form-error`, which a dialog over the page uses).
  const problem = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const showProblem = (message) => {
    problem.textContent = message;
    problem.hidden = false;
  };
  const status = h('p', { class: 'field-hint', text: 'Not configured: everyone signs in with a password.' });

  const form = h(
    'form',
    { class: 'narrow-form sso-form', novalidate: true, 'aria-label': 'Single sign-on' },
    status,
    field({ label: 'Issuer URL', control: issuer, required: true }),
    field({ label: 'Client ID', control: clientId, required: true }),
    field({ label: 'Client secret', control: secret, hint: 'Stored sealed and never shown again. Leave empty to keep the saved one.' }),
    field({ label: 'Allowed domains of work addresses', control: domains, required: true, hint: 'Comma-separated; a subdomain is another domain.' }),
    field({ label: 'Claim to read', control: claim, required: true, hint: 'The ID token claim read for the role, e.g. groups or role.' }),
    field({
      label: 'Claim values and what each gives',
      control: roleMap,
      hint: 'One per line: value = owner, admin or viewer. Of several values, the highest role.',
    }),
    field({ label: 'When no value maps', control: defaultRole }),
    h(
      'div',
      { class: 'check check-standalone' },
      require,
      h('label', { for: 'sso-require', text: 'Require single sign-on for everyone but the break-glass owners' }),
    ),
    h(
      'fieldset',
      { class: 'field', dataset: { field: 'break_glass' } },
      h('legend', { class: 'field-label', text: 'Break-glass owners (may still sign in without SSO while it is required)' }),
      breakGlassList,
      h('p', { class: 'field-error', hidden: true }),
    ),
    problem,
  );

  function fill(data) {
    status.textContent = data
      ? `Configured${data.require_sso ? ' and required' : ''}. Last changed by ${data.updated_by ?? 'someone'}.`
      : 'Not configured: everyone signs in with a password.';
    if (!data) return;
    issuer.value = data.issuer;
    clientId.value = data.client_id;
    secret.value = '';
    secret.placeholder = 'Saved (sealed)';
    domains.value = data.allowed_domains.join(', ');
    claim.value = data.role_claim;
    roleMap.value = mapToText(data.role_map);
    defaultRole.value = data.default_role ?? '';
    require.checked = data.require_sso;
    for (const box of breakGlass) box.checked = data.break_glass.includes(box.value);
    off.hidden = false;
  }

  const save = button({
    label: 'Apply single sign-on',
    variant: 'primary',
    onClick: async () => {
      clearFormErrors(form);
      problem.hidden = true;
      const body = {
        issuer: issuer.value.trim(),
        client_id: clientId.value.trim(),
        allowed_domains: domains.value
          .split(',')
          .map((d) => d.trim())
          .filter(Boolean),
        role_claim: claim.value.trim(),
        role_map: textToMap(roleMap.value),
        default_role: defaultRole.value || null,
        require_sso: require.checked,
        break_glass: breakGlass.filter((b) => b.checked).map((b) => b.value),
      };
      if (secret.value) body.client_secret = secret.value;
      try {
        const { data } = await request('PUT', '/settings/sso', body);
        fill(data);
        toast(data.require_sso ? 'Single sign-on saved and required.' : 'Single sign-on saved.');
      } catch (error) {
        if (!showProblemOnForm(form, error)) showProblem(error.message);
      }
    },
  });
  const off = button({
    label: 'Turn SSO off',
    onClick: async () => {
      try {
        await del('/settings/sso');
        fill(null);
        off.hidden = true;
        toast('Single sign-on is off: everyone signs in with a password again.');
      } catch (error) {
        showProblem(error.message);
      }
    },
  });
  off.hidden = true;
  form.append(h('div', { class: 'form-actions' }, save, off));
  Promise.all([get('/admins'), get('/settings/sso')])
    .then(([admins, { data }]) => {
      const owners = admins.data.filter((a) => a.role === 'owner');
      breakGlass = owners.map((o) => h('input', { type: 'checkbox', value: o.id, id: `sso-bg-${o.id}` }));
      breakGlassList.replaceChildren(
        ...owners.map((o, i) => h('div', { class: 'check' }, breakGlass[i], h('label', { for: breakGlass[i].id, text: o.email }))),
      );
      fill(data);
    })
    .catch(() => {});
  return card({
    title: 'Single sign-on',
    description: "Let administrators sign in with your company's OpenID Connect provider; accounts are made at their first sign-in.",
    body: form,
    id: 'sso-card',
  });
}
