/**
 * The card of the pages reached before signing in (sign-in, first-administrator setup, one-time
 * links): the brand, the page's own content, the footer; and, for a page opened by a one-time code,
 * the code's check on arrival with the refusal it shows instead of a form.
 */
import { h, replace } from './dom.js';
import { post } from './api.js';
import { callout, clearFormErrors, field, formError } from './ui.js';

/** The least length of a new password (the rules of `store-api admin create`). */
export const MIN_PASSWORD_LENGTH = 10;

/** Replaces `root` with the sign-in card holding `children`. */
export function signInCard(root, ...children) {
  root.classList.remove('app-loading');
  root.removeAttribute('aria-busy');
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

/**
 * A one-time code's page: `refusal` says why a code cannot be used (`what`: 'Setup link', 'Link') and
 * the way on to sign-in; `check` posts the code to `checkUrl` and answers the check's `data`, or
 * shows the refusal and answers undefined.
 */
export function oneTimeCode(root, { what, onSignIn }) {
  const refusal = (message) => {
    document.title = `${what} not valid · Store Integration Admin`;
    const signIn = h('a', { href: '#/sign-in', text: 'Go to sign-in' });
    signIn.addEventListener('click', (event) => {
      event.preventDefault();
      onSignIn();
    });
    signInCard(
      root,
      h('h1', { class: 'sign-in-title', text: `This ${what.toLowerCase()} cannot be used` }),
      h('div', { role: 'alert' }, callout({ tone: 'warning', text: message })),
      h('p', {}, signIn),
    );
  };
  const check = async (checkUrl, code) => {
    try {
      return (await post(checkUrl, { code })).data;
    } catch (error) {
      refusal(error.message);
      return undefined;
    }
  };
  return { refusal, check };
}

/**
 * A form of the card: `fields`, the form's error line and a full-width submit button labelled
 * `label`. `onSubmit` runs on submit, after the previous errors were cleared.
 */
export function cardForm({ fields, label, onSubmit }) {
  const submit = h('button', { type: 'submit', class: 'btn btn-primary btn-block' }, h('span', { class: 'btn-label', text: label }));
  const form = h('form', { class: 'sign-in-form', novalidate: true }, ...fields, formError(), submit);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    clearFormErrors(form);
    onSubmit();
  });
  return { form, submit };
}

/** A new password and its repeat (autocomplete new-password), as fields of a card form. */
export function newPasswordFields() {
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'new-password', minlength: String(MIN_PASSWORD_LENGTH) });
  const repeat = h('input', { type: 'password', name: 'password_repeat', autocomplete: 'new-password' });
  return {
    password,
    repeat,
    fields: [
      field({ label: 'Password', control: password, required: true, hint: `At least ${MIN_PASSWORD_LENGTH} characters.` }),
      field({ label: 'Repeat password', control: repeat, required: true }),
    ],
  };
}
