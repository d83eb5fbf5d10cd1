/**
 * Passkeys in the browser (decision 0063): the few navigator.credentials calls, with the options
 * and answers turned between the service's JSON (base64url) and WebAuthn's ArrayBuffers; the
 * "Sign in with a passkey" button of the sign-in page and the "Use a passkey" step; the Passkeys
 * card of the account page (list with name and last use; Add, Rename, Remove — adding and
 * removing ask for the fresh proof, which api.js asks for and retries).
 */
import { h, replace } from './dom.js';
import { del, get, patch, post } from './api.js';
import {
  button,
  clearFormErrors,
  confirmDialog,
  emptyState,
  errorState,
  field,
  formError,
  loadingBlock,
  openDialog,
  runBusy,
  setFieldError,
  timeEl,
  toast,
} from './ui.js';

const toBuffer = (b64url) => {
  const text = atob(
    b64url
      .replace(/-/g, '+')
      .replace(/_/g, '/')
      .padEnd(Math.ceil(b64url.length / 4) * 4, '='),
  );
  return Uint8Array.from(text, (c) => c.charCodeAt(0)).buffer;
};
const toB64url = (buffer) =>
  btoa(String.fromCharCode(...new Uint8Array(buffer)))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

/** Whether this browser can use passkeys at all. */
export function passkeysSupported() {
  return typeof window.PublicKeyCredential === 'function' && typeof navigator.credentials?.get === 'function';
}

/** A browser refusal (cancelled, timed out, no passkey) in words; null when the person cancelled. */
function browserRefusal(error) {
  if (error?.name === 'NotAllowedError' || error?.name === 'AbortError') return null;
  if (error?.name === 'InvalidStateError') return 'This passkey is already added to your account.';
  if (error?.name === 'SecurityError') return 'This browser refused: passkeys work only at the address the service is configured with (PUBLIC_URL).';
  return error?.message || 'The browser could not use a passkey.';
}

/** navigator.credentials.create() with the service's options; the answer as JSON. */
async function createCredential(options) {
  const publicKey = {
    ...options,
    challenge: toBuffer(options.challenge),
    user: { ...options.user, id: toBuffer(options.user.id) },
    excludeCredentials: (options.excludeCredentials ?? []).map((c) => ({ ...c, id: toBuffer(c.id) })),
  };
  const credential = await navigator.credentials.create({ publicKey });
  const response = credential.response;
  return {
    id: credential.id,
    rawId: toB64url(credential.rawId),
    type: credential.type,
    response: {
      clientDataJSON: toB64url(response.clientDataJSON),
      attestationObject: toB64url(response.attestationObject),
      transports: typeof response.getTransports === 'function' ? response.getTransports() : [],
    },
    authenticatorAttachment: credential.authenticatorAttachment ?? undefined,
    clientExtensionResults: credential.getClientExtensionResults?.() ?? {},
  };
}

/** navigator.credentials.get() with the service's options; the answer as JSON. */
async function getCredential(options) {
  const publicKey = {
    ...options,
    challenge: toBuffer(options.challenge),
    allowCredentials: (options.allowCredentials ?? []).map((c) => ({ ...c, id: toBuffer(c.id) })),
  };
  const credential = await navigator.credentials.get({ publicKey });
  const response = credential.response;
  return {
    id: credential.id,
    rawId: toB64url(credential.rawId),
    type: credential.type,
    response: {
      clientDataJSON: toB64url(response.clientDataJSON),
      authenticatorData: toB64url(response.authenticatorData),
      signature: toB64url(response.signature),
      ...(response.userHandle ? { userHandle: toB64url(response.userHandle) } : {}),
    },
    authenticatorAttachment: credential.authenticatorAttachment ?? undefined,
    clientExtensionResults: credential.getClientExtensionResults?.() ?? {},
  };
}

/**
 * A passkey's answer for `purpose` (sign_in or second_factor): the options asked of the service,
 * the browser's prompt, the answer; null when the person cancelled. Throws the service's problem or
 * an Error naming what the browser refused.
 */
export async function passkeyAssertion(purpose) {
  const { data: options } = await post('/admin/session/passkey/options', { purpose });
  try {
    return await getCredential(options);
  } catch (error) {
    const words = browserRefusal(error);
    if (words === null) return null;
    throw new Error(words);
  }
}

/**
 * The "Sign in with a passkey" block of the sign-in page: a divider and a button; `onSignedIn(session)`
 * once signed in, `onError(message)` for a refusal. Null when the browser has no passkeys.
 */
export function passkeySignInBlock({ onSignedIn, onError }) {
  if (!passkeysSupported()) return null;
  const signIn = h(
    'button',
    { type: 'button', class: 'btn btn-secondary btn-block', id: 'passkey-sign-in' },
    h('span', { class: 'btn-label', text: 'Sign in with a passkey' }),
  );
  signIn.addEventListener('click', () =>
    runBusy(signIn, async () => {
      try {
        const credential = await passkeyAssertion('sign_in');
        if (!credential) return;
        const answer = await post('/admin/session/passkey', { credential });
        onSignedIn(answer.data);
      } catch (error) {
        onError(error.message);
      }
    }),
  );
  return h('div', { class: 'sign-in-passkey' }, h('p', { class: 'sign-in-alt muted', text: 'or' }), signIn);
}

/** A dialog asking for a passkey's name (add, rename); resolves the name, or null when cancelled. */
function nameDialog({ title, value = '', submitLabel }) {
  return new Promise((resolve) => {
    let chosen = null;
    openDialog({
      title,
      size: 'sm',
      onClose: () => resolve(chosen),
      render: (close) => {
        const input = h('input', { type: 'text', name: 'passkey_name', maxlength: '100', value, autofocus: true, autocomplete: 'off' });
        const nameField = field({ label: 'Name', control: input, required: true, hint: 'Where this passkey lives, such as "Work laptop" or "Phone".' });
        const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: submitLabel }));
        const form = h(
          'form',
          { novalidate: true },
          nameField,
          formError(),
          h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
        );
        form.addEventListener('submit', (event) => {
          event.preventDefault();
          clearFormErrors(form);
          if (!input.value.trim()) {
            setFieldError(nameField, 'Give it a name.');
            input.focus();
            return;
          }
          chosen = input.value.trim();
          close();
        });
        return form;
      },
    });
  });
}

/**
 * Adds a passkey: its name, the service's options (the fresh proof asked by api.js when due), the
 * browser's prompt, the answer; resolves true once added (a toast says so or says why not).
 */
export async function addPasskeyFlow() {
  const name = await nameDialog({ title: 'Add a passkey', submitLabel: 'Continue' });
  if (!name) return false;
  try {
    const { data: options } = await post('/account/passkeys/options');
    let credential;
    try {
      credential = await createCredential(options);
    } catch (error) {
      const words = browserRefusal(error);
      if (words) toast(words, { tone: 'danger' });
      return false;
    }
    await post('/account/passkeys', { name, credential });
    toast(`Passkey “${name}” added. You can sign in with it.`);
    return true;
  } catch (error) {
    if (!error.cancelled) toast(error.message, { tone: 'danger' });
    return false;
  }
}

/** The body of the account page's Passkeys card: the list, Add, Rename and Remove. */
export function passkeysPanel() {
  const root = h('div', { class: 'passkeys' });
  async function draw() {
    replace(root, loadingBlock('Loading passkeys…'));
    let data;
    try {
      ({ data } = await get('/account/passkeys'));
    } catch (error) {
      if (error.status !== 401) replace(root, errorState(error, draw));
      return;
    }
    const add = passkeysSupported() ? button({ label: 'Add a passkey', variant: 'primary', onClick: addPasskey }) : null;
    replace(
      root,
      data.length === 0
        ? emptyState({
            iconName: 'key',
            title: 'No passkeys yet',
            text: 'A passkey signs you in with your device’s screen lock, and counts as your second factor.',
          })
        : h(
            'ul',
            { class: 'passkey-list', 'aria-label': 'Your passkeys' },
            data.map((p) =>
              h(
                'li',
                { class: 'passkey-item', dataset: { passkeyId: p.id } },
                h(
                  'div',
                  { class: 'passkey-text' },
                  h('strong', { class: 'passkey-name', text: p.name }),
                  h(
                    'span',
                    { class: 'muted passkey-meta' },
                    'Added ',
                    timeEl(p.created_at),
                    ' · ',
                    p.last_used_at ? ['Last used ', timeEl(p.last_used_at)] : 'Never used',
                    p.backed_up ? ' · Synced' : '',
                  ),
                ),
                h(
                  'div',
                  { class: 'passkey-actions' },
                  button({ label: 'Rename', size: 'sm', variant: 'ghost', ariaLabel: `Rename the passkey ${p.name}`, onClick: () => rename(p) }),
                  button({ label: 'Remove', size: 'sm', variant: 'danger-ghost', ariaLabel: `Remove the passkey ${p.name}`, onClick: () => remove(p) }),
                ),
              ),
            ),
          ),
      add ? h('div', { class: 'form-actions' }, add) : h('p', { class: 'muted', text: 'This browser cannot use passkeys.' }),
    );
  }

  async function addPasskey() {
    if (await addPasskeyFlow()) await draw();
  }

  async function rename(passkey) {
    const name = await nameDialog({ title: 'Rename the passkey', value: passkey.name, submitLabel: 'Rename' });
    if (!name || name === passkey.name) return;
    try {
      await patch(`/account/passkeys/${passkey.id}`, { name });
      toast(`Renamed to “${name}”.`);
      await draw();
    } catch (error) {
      toast(error.message, { tone: 'danger' });
    }
  }

  async function remove(passkey) {
    const removed = await confirmDialog({
      title: 'Remove this passkey?',
      message: `“${passkey.name}” will no longer sign you in. Remove it from the device too.`,
      confirmLabel: 'Remove passkey',
      danger: true,
      action: () => del(`/account/passkeys/${passkey.id}`),
    });
    if (!removed) return;
    toast(`Passkey “${passkey.name}” removed.`);
    await draw();
  }

  draw();
  return root;
}
