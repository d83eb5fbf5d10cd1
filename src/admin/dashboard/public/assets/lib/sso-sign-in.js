/**
 * "Sign in with SSO" on the sign-in page (decision 0062): the work email, then the browser goes to
 * /admin/sso/start, which finds the store whose single sign-on takes that email's domain and sends
 * the browser to its identity provider; it comes back signed in (or to a page saying why not).
 * A block of its own, so the sign-in page only places it.
 */
import { h } from './dom.js';
import { field, formError, showFormError, clearFormErrors } from './ui.js';

export function ssoSignInBlock() {
  const email = h('input', { type: 'email', name: 'sso_email', id: 'sso-email', autocomplete: 'username', spellcheck: false });
  const submit = h('button', { type: 'submit', class: 'btn btn-secondary btn-block' }, h('span', { class: 'btn-label', text: 'Sign in with SSO' }));
  const form = h(
    'form',
    { class: 'sign-in-form sso-sign-in', novalidate: true, 'aria-label': 'Single sign-on' },
    field({ label: 'Work email (single sign-on)', control: email, hint: 'Where your store uses its identity provider.' }),
    formError(),
    submit,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    clearFormErrors(form);
    const value = email.value.trim();
    if (!value.includes('@')) {
      showFormError(form, 'Enter your work email.');
      email.focus();
      return;
    }
    location.assign(`/admin/sso/start?email=${encodeURIComponent(value)}`);
  });
  return h('div', { class: 'sso-block' }, h('p', { class: 'sign-in-alt', text: 'or' }), form);
}
