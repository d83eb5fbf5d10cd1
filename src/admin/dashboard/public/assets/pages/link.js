/**
 * A one-time link an owner handed out (#/link?code=…): an invitation (choose a password, become an
 * administrator) or a password reset (choose a new password; every other session ends). The code is
 * checked first, so a wrong, used or expired link says what to do instead of showing a form.
 */
import { h, replace } from '../lib/dom.js';
import { post } from '../lib/api.js';
import { callout, clearFormErrors, field, formError, runBusy, setFieldError, showFormError, showProblemOnForm } from '../lib/ui.js';
import { codeInput } from '../lib/second-factor.js';

const MIN_PASSWORD_LENGTH = 10;
const ROLE_WORDS = { owner: 'an owner', admin: 'an admin', viewer: 'a viewer (read only)' };

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

function showRefusal(root, message, { onSignIn }) {
  document.title = 'Link not valid · Store Integration Admin';
  const signIn = h('a', { href: '#/sign-in', text: 'Go to sign-in' });
  signIn.addEventListener('click', (event) => {
    event.preventDefault();
    onSignIn();
  });
  frame(
    root,
    h('h1', { class: 'sign-in-title', text: 'This link cannot be used' }),
    h('div', { role: 'alert' }, callout({ tone: 'warning', text: message })),
    h('p', {}, signIn),
  );
}

export async function renderLink(root, { code: linkCode, onSignedIn, onSignIn }) {
  root.classList.remove('app-loading');
  root.removeAttribute('aria-busy');
  let link;
  try {
    link = (await post('/admin/links/check', { code: linkCode })).data;
  } catch (error) {
    showRefusal(root, error.message, { onSignIn });
    return;
  }
  const invitation = link.purpose === 'invitation';
  const title = invitation ? "Join the store's administrators" : 'Choose a new password';
  document.title = `${title} · Store Integration Admin`;
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'new-password', minlength: String(MIN_PASSWORD_LENGTH) });
  const repeat = h('input', { type: 'password', name: 'password_repeat', autocomplete: 'new-password' });
  // A reset replaces the password, not the second factor: its code is asked for with the new password.
  const code = link.second_factor ? codeInput({ recovery: true }) : null;
  const codeField = code
    ? field({ label: 'Authentication code', control: code, required: true, hint: 'The 6-digit code your authenticator app shows, or one of your recovery codes.' })
    : null;
  const submit = h(
    'button',
    { type: 'submit', class: 'btn btn-primary btn-block' },
    h('span', { class: 'btn-label', text: invitation ? 'Create my account' : 'Set password and sign in' }),
  );
  const form = h(
    'form',
    { class: 'sign-in-form', novalidate: true },
    h('input', { type: 'email', name: 'username', autocomplete: 'username', value: link.email, hidden: true }),
    field({ label: 'Password', control: password, required: true, hint: `At least ${MIN_PASSWORD_LENGTH} characters.` }),
    field({ label: 'Repeat password', control: repeat, required: true }),
    ...(codeField ? [codeField] : []),
    formError(),
    submit,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    clearFormErrors(form);
    if (password.value.length < MIN_PASSWORD_LENGTH) {
      showProblemOnForm(form, { errors: [{ param: 'password', message: `Use at least ${MIN_PASSWORD_LENGTH} characters.` }] });
      password.focus();
      return;
    }
    if (password.value !== repeat.value) {
      showProblemOnForm(form, { errors: [{ param: 'password_repeat', message: 'The two passwords differ.' }] });
      repeat.focus();
      return;
    }
    if (code && !code.value.trim()) {
      setFieldError(codeField, 'Enter the code of your authenticator app, or a recovery code.');
      code.focus();
      return;
    }
    runBusy(submit, async () => {
      try {
        const body = { code: linkCode, password: password.value, ...(code ? { second_factor_code: code.value.trim() } : {}) };
        onSignedIn((await post('/admin/links/use', body)).data);
      } catch (error) {
        if (codeField && (error.code === 'invalid_second_factor' || error.code === 'second_factor_required')) {
          code.value = '';
          setFieldError(codeField, error.message);
          code.focus();
          return;
        }
        if (error.status === 400 || error.status === 429) {
          if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          return;
        }
        showRefusal(root, error.message, { onSignIn });
      }
    });
  });
  frame(
    root,
    h('h1', { class: 'sign-in-title', text: title }),
    h('p', {
      class: 'sign-in-lead',
      text: invitation
        ? `You are invited as ${ROLE_WORDS[link.role] ?? link.role}, signing in as ${link.email}. This link works once.`
        : `For ${link.email}. Every other session of this account is signed out. This link works once.`,
    }),
    form,
  );
  password.focus();
}
