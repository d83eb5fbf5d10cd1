/**
 * Settings → Your account: who you are signed in as, your role, and changing your password (the
 * current one is asked; your other sessions end).
 */
import { h, replace } from '../lib/dom.js';
import { post } from '../lib/api.js';
import { callout, card, clearFormErrors, field, formError, pageHeader, runBusy, showFormError, showProblemOnForm, toast } from '../lib/ui.js';

const MIN_PASSWORD_LENGTH = 10;
const ROLE_TEXT = {
  owner: 'Owner: you can do everything, including managing administrators.',
  admin: 'Admin: you manage API keys, webhooks and deliveries; owners manage administrators.',
  viewer: 'Viewer: you can read everything but change nothing. Ask an owner for more rights.',
};

export async function renderAccount(view) {
  const current = h('input', { type: 'password', name: 'current_password', autocomplete: 'current-password' });
  const next = h('input', { type: 'password', name: 'new_password', autocomplete: 'new-password', minlength: String(MIN_PASSWORD_LENGTH) });
  const repeat = h('input', { type: 'password', name: 'new_password_repeat', autocomplete: 'new-password' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: 'Change password' }));
  const form = h(
    'form',
    { novalidate: true, class: 'narrow-form' },
    // A hidden username field lets password managers file the new password under the right account.
    h('input', { type: 'email', name: 'username', autocomplete: 'username', value: view.session.email, hidden: true, 'aria-hidden': 'true', tabindex: '-1' }),
    field({ label: 'Current password', control: current, required: true }),
    field({ label: 'New password', control: next, required: true, hint: `At least ${MIN_PASSWORD_LENGTH} characters. Your other sessions are signed out.` }),
    field({ label: 'Repeat the new password', control: repeat, required: true }),
    formError(),
    h('div', { class: 'form-actions' }, submit),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    clearFormErrors(form);
    const problems = [];
    if (!current.value) problems.push({ param: 'current_password', message: 'Enter your current password.' });
    if (next.value.length < MIN_PASSWORD_LENGTH) problems.push({ param: 'new_password', message: `Use at least ${MIN_PASSWORD_LENGTH} characters.` });
    else if (next.value !== repeat.value) problems.push({ param: 'new_password_repeat', message: 'The two new passwords differ.' });
    if (problems.length) {
      showProblemOnForm(form, { errors: problems });
      form.querySelector('[aria-invalid="true"]')?.focus();
      return;
    }
    runBusy(submit, async () => {
      try {
        await post('/account/password', { current_password: current.value, new_password: next.value });
        form.reset();
        toast('Your password is changed. Your other sessions are signed out.');
      } catch (error) {
        if (!showProblemOnForm(form, error)) showFormError(form, error.message);
        form.querySelector('[aria-invalid="true"]')?.focus();
      }
    });
  });
  replace(
    view.root,
    pageHeader({ title: 'Your account', description: `Signed in as ${view.session.email}.`, breadcrumbs: [{ label: 'Settings' }, { label: 'Your account' }] }),
    h('div', { class: 'role-note' }, callout({ tone: 'info', text: ROLE_TEXT[view.session.role] ?? view.session.role })),
    card({ title: 'Password', body: form }),
  );
}
