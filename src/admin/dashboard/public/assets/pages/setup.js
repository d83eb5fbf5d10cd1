/**
 * First-administrator setup, reached by the one-time link the server prints at start while no
 * administrator exists (#/setup?code=…). Checks the code first, so a wrong, used or expired link
 * shows what to do instead of a form; then asks for email and password (the rules of
 * `store-api admin create`) and signs in.
 */
import { h, replace } from '../lib/dom.js';
import { post } from '../lib/api.js';
import { callout, field, formError, showFormError, showProblemOnForm, clearFormErrors, runBusy } from '../lib/ui.js';

const MIN_PASSWORD_LENGTH = 10;

function frame(root, ...children) {
  replace(
    root,
    h(
      'div',
      { class: 'sign-in-page' },
      h(
        'main',
        { id: 'main', class: 'sign-in-card', tabindex: '-1' },
        h(
          'div',
          { class: 'sign-in-brand' },
          h('img', { src: '/admin/assets/favicon.svg', alt: '', width: '40', height: '40' }),
          h('div', {}, h('p', { class: 'brand-name', text: 'Store Integration' }), h('p', { class: 'brand-sub', text: 'Admin dashboard' })),
        ),
        ...children,
      ),
      h('p', { class: 'sign-in-footer', text: 'Store Integration API' }),
    ),
  );
}

/** Why the link cannot be used, and the way on. */
function showRefusal(root, message, { onSignIn }) {
  document.title = 'Setup link not valid · Store Integration Admin';
  const signIn = h('a', { href: '#/sign-in', text: 'Go to sign-in' });
  signIn.addEventListener('click', (event) => {
    event.preventDefault();
    onSignIn();
  });
  frame(
    root,
    h('h1', { class: 'sign-in-title', text: 'This setup link cannot be used' }),
    h('div', { role: 'alert' }, callout({ tone: 'warning', text: message })),
    h('p', {}, signIn),
  );
}

export async function renderSetup(root, { code, onSignedIn, onSignIn }) {
  document.title = 'Create the first administrator · Store Integration Admin';
  root.classList.remove('app-loading');
  root.removeAttribute('aria-busy');
  try {
    await post('/admin/setup/check', { code });
  } catch (error) {
    showRefusal(root, error.message, { onSignIn });
    return;
  }
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', spellcheck: false });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'new-password', minlength: String(MIN_PASSWORD_LENGTH) });
  const repeat = h('input', { type: 'password', name: 'password_repeat', autocomplete: 'new-password' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary btn-block' }, h('span', { class: 'btn-label', text: 'Create administrator' }));
  const form = h(
    'form',
    { class: 'sign-in-form', novalidate: true },
    field({ label: 'Email', control: email, required: true }),
    field({ label: 'Password', control: password, required: true, hint: `At least ${MIN_PASSWORD_LENGTH} characters.` }),
    field({ label: 'Repeat password', control: repeat, required: true }),
    formError(),
    submit,
  );

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    clearFormErrors(form);
    if (!email.value.trim() || !password.value) {
      showFormError(form, 'Enter an email and a password.');
      (email.value.trim() ? password : email).focus();
      return;
    }
    if (password.value !== repeat.value) {
      showFormError(form, 'The two passwords differ.');
      repeat.focus();
      return;
    }
    runBusy(submit, async () => {
      try {
        const answer = await post('/admin/setup', { code, email: email.value.trim(), password: password.value });
        onSignedIn(answer.data);
      } catch (error) {
        if (error.status === 400) {
          if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          return;
        }
        if (error.status === 429) {
          showFormError(form, error.message);
          return;
        }
        // The link stopped working meanwhile (used in another tab, expired): say so, as on arrival.
        showRefusal(root, error.message, { onSignIn });
      }
    });
  });

  frame(
    root,
    h('h1', { class: 'sign-in-title', text: 'Create the first administrator' }),
    h('p', { class: 'sign-in-lead', text: 'This link works once. The administrator you create here signs in at once and can manage API keys and webhooks.' }),
    form,
  );
  email.focus();
}
