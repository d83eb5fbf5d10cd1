/**
 * Single sign-on on the sign-in page ("Continue with SSO") (decision 0062): the work email, then the browser goes to
 * /admin/sso/start, which finds the store whose single sign-on takes that email's domain and sends
 * the browser to its identity provider; it comes back signed in (or to a page saying why not).
 * A block of its own, so the sign-in page only places it.
 */
import { h } from './dom.js';
import { field, setFieldError } from './ui.js';

export function ssoSignInBlock() {
  const email = h('input', { type: 'email', name: 'sso_email', id: 'sso-email', autocomplete: 'username', spellcheck: false });
  const submit = h('button', { type: 'submit', class: 'btn btn-secondary btn-block' }, h('span', { class: 'btn-label', text: 'Continue with SSO' }));
  // Named so as not to clash with the password form's "Email" and "Sign in" (its fields and button);
  // its error is the field's, so the page keeps one form error (the password form's).
  const emailField = field({ label: 'Work address for single sign-on', control: email, hint: "The email your company's identity provider knows." });
  const form = h('form', { class: 'sign-in-form sso-sign-in', novalidate: true, 'aria-label': 'Single sign-on' }, emailField, submit);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    setFieldError(emailField, '');
    const value = email.value.trim();
    if (!value.includes('@')) {
      setFieldError(emailField, 'Enter your work email.');
      email.focus();
      return;
    }
    location.assign(`/admin/sso/start?email=${encodeURIComponent(value)}`);
  });
  return h('div', { class: 'sso-block' }, h('p', { class: 'sign-in-alt', text: 'or' }), form);
}
