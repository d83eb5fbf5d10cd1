/**
 * Building blocks shared by the pages: buttons that show progress, badges, dialogs (native
 * <dialog>: focus is trapped and Escape closes), toasts in an aria-live region, copy buttons,
 * empty and error states.
 */
import { h, icon, replace, uid } from './dom.js';
import { formatDateTime, formatRelative, formatTime } from './format.js';

/* ---------- announcements ---------- */

/**
 * Shows a toast and lets screen readers hear it (the container is aria-live). While a modal dialog
 * is open everything outside it is inert, so the toast goes to the dialog's own live region.
 */
export function toast(message, { tone = 'success', timeoutMs = 6000 } = {}) {
  const openDialogs = document.querySelectorAll('dialog[open]');
  const region = openDialogs.length ? openDialogs[openDialogs.length - 1].querySelector('.dialog-toasts') : document.getElementById('toasts');
  const close = () => item.remove();
  const item = h(
    'div',
    { class: ['toast', `toast-${tone}`], role: tone === 'error' ? 'alert' : undefined },
    icon(tone === 'error' ? 'alert' : tone === 'info' ? 'info' : 'check'),
    h('span', { class: 'toast-text', text: message }),
    h('button', { type: 'button', class: 'toast-close', 'aria-label': 'Dismiss notification', onClick: close }, '×'),
  );
  region.append(item);
  if (tone !== 'error') setTimeout(close, timeoutMs);
  return item;
}

/**
 * An error as a toast; none for a lost session (401): the sign-in page says so, and the other
 * requests of the page that was left, answered 401 after it, must not follow it there.
 */
export function toastError(error) {
  if (error?.status === 401) return null;
  return toast(error?.message || String(error), { tone: 'error' });
}

/* ---------- buttons ---------- */

/**
 * button({ label, icon, variant: 'primary'|'secondary'|'danger'|'ghost', size: 'sm', onClick })
 * An async onClick disables the button and marks it busy until it settles; a thrown error becomes
 * an error toast.
 */
export function button({
  label,
  icon: iconName,
  variant = 'secondary',
  size,
  type = 'button',
  onClick,
  disabled,
  title,
  ariaLabel,
  className,
  dataset,
  write = false,
}) {
  const btn = h(
    'button',
    {
      type,
      // `write`: a change a viewer may not make (hidden for that role; the admin API refuses it anyway).
      class: ['btn', `btn-${variant}`, size && `btn-${size}`, write && 'requires-write', className],
      disabled,
      title,
      'aria-label': ariaLabel,
      dataset,
    },
    iconName ? icon(iconName) : null,
    label ? h('span', { class: 'btn-label', text: label }) : null,
  );
  if (onClick) {
    btn.addEventListener('click', (event) => runBusy(btn, () => onClick(event)));
  }
  return btn;
}

/** Runs `fn` with `btn` disabled and busy; errors become toasts. */
export async function runBusy(btn, fn) {
  if (btn.getAttribute('aria-busy') === 'true') return undefined;
  btn.setAttribute('aria-busy', 'true');
  const wasDisabled = btn.disabled;
  btn.disabled = true;
  try {
    return await fn();
  } catch (error) {
    if (error?.status !== 401) toastError(error);
    return undefined;
  } finally {
    btn.removeAttribute('aria-busy');
    if (btn.isConnected) btn.disabled = wasDisabled;
  }
}

/* ---------- badges and small pieces ---------- */

export function badge(text, tone = 'neutral', { title } = {}) {
  return h('span', { class: ['badge', `badge-${tone}`], title }, h('span', { class: 'badge-dot', 'aria-hidden': 'true' }), text);
}

const DELIVERY_TONES = { pending: 'info', succeeded: 'success', failed: 'warning', dead: 'danger' };
const DELIVERY_LABELS = { pending: 'Pending', succeeded: 'Succeeded', failed: 'Failed', dead: 'Dead' };

export function deliveryStatusBadge(status) {
  return badge(DELIVERY_LABELS[status] ?? status, DELIVERY_TONES[status] ?? 'neutral');
}

/** "Test" for a test delivery (an example sent by an administrator, decision 0020); null otherwise. */
export function testBadge(delivery) {
  return delivery?.test ? badge('Test', 'info', { title: 'A test event sent by an administrator, not a change of the store' }) : null;
}

/** Active, paused by the circuit breaker until …, or disabled (with the reason). */
export function endpointStateBadge(endpoint) {
  if (endpoint.state === 'paused') {
    const until = endpoint.paused_until;
    return badge(until ? `Paused until ${formatTime(until)}` : 'Paused', 'warning', {
      title: until ? `Paused by the circuit breaker until ${formatDateTime(until, { seconds: true })}` : 'Paused by the circuit breaker',
    });
  }
  if (endpoint.state === 'disabled' || endpoint.enabled === false) {
    return badge('Disabled', 'neutral', { title: endpoint.disabled_reason || 'Disabled' });
  }
  return badge('Active', 'success');
}

const DESTINATIONS = {
  https: { label: 'HTTPS', title: 'Signed HTTPS POST to the receiver' },
  amqp: { label: 'AMQP', title: 'Published to a RabbitMQ / AMQP 0-9-1 exchange, routing key = event type' },
  mqtt: { label: 'MQTT', title: 'Published to an MQTT 5 broker, topic <prefix>/<event type>, QoS 1' },
  nats: { label: 'NATS', title: 'Published to NATS JetStream, subject <prefix>.<event type>' },
};
const BROKER_SCHEMES = { amqp: 'amqp', amqps: 'amqp', mqtt: 'mqtt', mqtts: 'mqtt', nats: 'nats', 'nats+tls': 'nats' };

/** The destination kind of an endpoint (https, amqp, mqtt, nats): the API's, or its URL's scheme. */
export function destinationOf(endpoint) {
  if (endpoint?.destination && DESTINATIONS[endpoint.destination]) return endpoint.destination;
  const scheme = String(endpoint?.url ?? '')
    .split(':')[0]
    .toLowerCase();
  return BROKER_SCHEMES[scheme] ?? 'https';
}

/** "HTTPS", "AMQP", "MQTT" or "NATS": where an endpoint's deliveries go (decision 0031). */
export function destinationChip(endpoint) {
  const kind = DESTINATIONS[destinationOf(endpoint)];
  return h('span', { class: 'chip destination-kind', dataset: { destination: destinationOf(endpoint) }, title: kind.title, text: kind.label });
}

const TOKEN_TONES = { active: 'success', revoked: 'danger', expired: 'neutral' };
export function tokenStatusBadge(status) {
  return badge(status.charAt(0).toUpperCase() + status.slice(1), TOKEN_TONES[status] ?? 'neutral');
}

/** <time> with a relative label and the exact time as a tooltip. */
export function timeEl(iso, { absolute = false } = {}) {
  if (!iso) return h('span', { class: 'muted', text: '—' });
  return h('time', { datetime: iso, title: formatDateTime(iso, { seconds: true }) }, absolute ? formatDateTime(iso) : formatRelative(iso));
}

export function code(text, className) {
  return h('code', { class: ['code', className], text });
}

export function spinner(label = 'Loading') {
  return h('span', { class: 'spinner', role: 'progressbar', 'aria-label': label });
}

/** A placeholder while a section loads. */
export function loadingBlock(label = 'Loading…') {
  return h('div', { class: 'loading-block', 'aria-busy': 'true' }, spinner(label), h('span', { text: label }));
}

export function emptyState({ iconName = 'inbox', title, text, action }) {
  return h(
    'div',
    { class: 'empty-state' },
    h('div', { class: 'empty-icon' }, icon(iconName)),
    h('p', { class: 'empty-title', text: title }),
    text ? h('p', { class: 'empty-text', text }) : null,
    action ?? null,
  );
}

export function callout({ tone = 'info', title, text, children }) {
  return h(
    'div',
    { class: ['callout', `callout-${tone}`] },
    icon(tone === 'info' ? 'info' : 'alert'),
    h('div', {}, title ? h('p', { class: 'callout-title', text: title }) : null, text ? h('p', { text }) : null, children ?? null),
  );
}

/** An error in place of a section, with a retry button. */
export function errorState(error, retry) {
  return callout({
    tone: 'danger',
    title: 'This could not be loaded',
    children: [h('p', { text: error?.message ?? String(error) }), retry ? button({ label: 'Try again', icon: 'refresh', size: 'sm', onClick: retry }) : null],
  });
}

/* ---------- page frame ---------- */

/**
 * The page header. The h1 takes focus after navigation (tabindex -1) so keyboard and screen reader
 * users start at the new page's title.
 */
export function pageHeader({ title, description, actions = [], breadcrumbs = [], badges = [] }) {
  return h(
    'header',
    { class: 'page-header' },
    breadcrumbs.length
      ? h(
          'nav',
          { class: 'breadcrumbs', 'aria-label': 'Breadcrumb' },
          h(
            'ol',
            {},
            breadcrumbs.map((b, i) =>
              h(
                'li',
                {},
                b.href
                  ? h('a', { href: b.href, text: b.label })
                  : h('span', { 'aria-current': i === breadcrumbs.length - 1 ? 'page' : undefined, text: b.label }),
              ),
            ),
          ),
        )
      : null,
    h(
      'div',
      { class: 'page-header-row' },
      h(
        'div',
        { class: 'page-title-block' },
        h('div', { class: 'page-title-line' }, h('h1', { tabindex: '-1', class: 'page-title', text: title }), badges),
        description ? h('p', { class: 'page-description', text: description }) : null,
      ),
      actions.length ? h('div', { class: 'page-actions' }, actions) : null,
    ),
  );
}

export function card({ title, description, actions = [], body, className, headingLevel = 'h2', id }) {
  const headingId = id ?? uid('card');
  return h(
    'section',
    { class: ['card', className], 'aria-labelledby': title ? headingId : undefined },
    title
      ? h(
          'div',
          { class: 'card-header' },
          h(
            'div',
            {},
            h(headingLevel, { class: 'card-title', id: headingId, text: title }),
            description ? h('p', { class: 'card-description', text: description }) : null,
          ),
          actions.length ? h('div', { class: 'card-actions' }, actions) : null,
        )
      : null,
    h('div', { class: 'card-body' }, body),
  );
}

/* ---------- dialogs ---------- */

/**
 * Opens a modal dialog. `render(close, { setContent, setTitle, setDescription })` returns the
 * content; returns { dialog, close, setContent }.
 * The element that opened it gets focus back on close.
 */
export function openDialog({ title, description, render, size = 'md', onClose }) {
  const opener = document.activeElement;
  const titleId = uid('dialog-title');
  const descId = description ? uid('dialog-desc') : undefined;
  const content = h('div', { class: 'dialog-content' });
  const dialog = h(
    'dialog',
    { class: ['dialog', `dialog-${size}`], 'aria-labelledby': titleId, 'aria-describedby': descId },
    h(
      'div',
      { class: 'dialog-header' },
      h('h2', { id: titleId, class: 'dialog-title', text: title }),
      h('button', { type: 'button', class: 'dialog-close', 'aria-label': 'Close', onClick: () => close() }, '×'),
    ),
    description ? h('p', { id: descId, class: 'dialog-description', text: description }) : null,
    content,
    h('div', { class: 'toasts dialog-toasts', role: 'status', 'aria-live': 'polite' }),
  );
  let closed = false;
  const close = (result) => {
    if (closed) return;
    closed = true;
    dialog.close();
    dialog.remove();
    if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
    onClose?.(result);
  };
  dialog.addEventListener('cancel', (event) => {
    event.preventDefault();
    close();
  });
  const setContent = (...nodes) => replace(content, ...nodes);
  const controls = {
    setContent,
    setTitle: (text) => {
      dialog.querySelector('.dialog-title').textContent = text;
    },
    setDescription: (text) => {
      const el = dialog.querySelector('.dialog-description');
      if (el) {
        el.textContent = text ?? '';
        el.hidden = !text;
      }
    },
  };
  setContent(render(close, controls));
  document.body.append(dialog);
  dialog.showModal();
  const autofocus = dialog.querySelector('[autofocus]');
  if (autofocus instanceof HTMLElement) autofocus.focus();
  return { dialog, close, setContent };
}

/**
 * A dialog choosing one of `options` ({ value, text }) in a select (`name`, `value` preselected if
 * given) labelled `label`. On submit `save(value)` runs with the button busy and answers the toast to
 * show; the dialog then closes and `reload` runs. A refusal shows on the form.
 */
export function selectDialog({ title, description, label, name, value, options, submitLabel, save, reload }) {
  openDialog({
    title,
    description,
    render: (close) => {
      const select = h(
        'select',
        { name, ...(value === undefined ? {} : { value }), autofocus: true },
        options.map((o) => h('option', { value: o.value, text: o.text })),
      );
      const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, h('span', { class: 'btn-label', text: submitLabel }));
      const form = h(
        'form',
        { novalidate: true },
        field({ label, control: select }),
        formError(),
        h('div', { class: 'dialog-actions' }, button({ label: 'Cancel', onClick: () => close() }), submit),
      );
      form.addEventListener('submit', (event) => {
        event.preventDefault();
        clearFormErrors(form);
        runBusy(submit, async () => {
          try {
            const message = await save(select.value);
            close();
            toast(message);
            reload();
          } catch (error) {
            if (!showProblemOnForm(form, error)) showFormError(form, error.message);
          }
        });
      });
      return form;
    },
  });
}

/** Asks for confirmation; resolves true when confirmed. `action` runs before the dialog closes. */
export function confirmDialog({ title, message, details, confirmLabel = 'Confirm', danger = false, action }) {
  return new Promise((resolve) => {
    openDialog({
      title,
      size: 'sm',
      onClose: (result) => resolve(result === true),
      render: (close) =>
        h(
          'div',
          {},
          h('p', { class: 'dialog-text', text: message }),
          details ?? null,
          h(
            'div',
            { class: 'dialog-actions' },
            button({ label: 'Cancel', variant: 'secondary', onClick: () => close(false) }),
            button({
              label: confirmLabel,
              variant: danger ? 'danger' : 'primary',
              onClick: async () => {
                if (action) await action();
                close(true);
              },
            }),
          ),
        ),
    });
    // The safe choice takes the focus, so Enter does not confirm a destructive action by accident.
    const dialogs = document.querySelectorAll('dialog');
    dialogs[dialogs.length - 1]?.querySelector('.btn-secondary')?.focus();
  });
}

/* ---------- copying ---------- */

async function copyText(text, fallbackInput) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (fallbackInput) {
      fallbackInput.focus();
      fallbackInput.select();
      try {
        if (document.execCommand('copy')) return true;
      } catch {
        /* fall through */
      }
    }
    return false;
  }
}

/** A copy button; `getText` may be async. */
export function copyButton(getText, { label = 'Copy', input, size = 'sm', variant = 'secondary' } = {}) {
  const btn = button({
    label,
    icon: 'copy',
    size,
    variant,
    onClick: async () => {
      const text = await getText();
      const copied = await copyText(text, input);
      const labelEl = btn.querySelector('.btn-label');
      if (copied) {
        toast('Copied to the clipboard.', { tone: 'info', timeoutMs: 2500 });
        if (labelEl) {
          labelEl.textContent = 'Copied';
          setTimeout(() => {
            labelEl.textContent = label;
          }, 2000);
        }
      } else {
        toast('Copying is blocked by the browser: select the text and press Ctrl+C.', { tone: 'info' });
      }
    },
  });
  return btn;
}

/* ---------- forms ---------- */

/** A labelled field: label, control, hint and an error slot wired with aria-describedby. */
export function field({ label, control, hint, required = false, className }) {
  const id = control.id || uid('field');
  control.id = id;
  const hintId = hint ? `${id}-hint` : undefined;
  const errorId = `${id}-error`;
  control.setAttribute('aria-describedby', [hintId, errorId].filter(Boolean).join(' '));
  if (required) control.required = true;
  return h(
    'div',
    { class: ['field', className], dataset: { field: control.name || '' } },
    h('label', { for: id, class: 'field-label' }, label, required ? h('span', { class: 'required-mark', 'aria-hidden': 'true', text: ' *' }) : null),
    control,
    hint ? h('p', { id: hintId, class: 'field-hint', text: hint }) : null,
    h('p', { id: errorId, class: 'field-error', hidden: true }),
  );
}

/** Shows the message of a field (or clears it with ''), marking the control invalid. */
export function setFieldError(fieldEl, message) {
  const error = fieldEl.querySelector('.field-error');
  const control = fieldEl.querySelector('input, select, textarea');
  if (!error) return;
  error.textContent = message;
  error.hidden = !message;
  if (control) control.setAttribute('aria-invalid', message ? 'true' : 'false');
}

/** Shows a problem's parameter errors on the form's fields; returns true when one matched. */
export function showProblemOnForm(form, problem) {
  let matched = false;
  for (const { param, message } of problem?.errors ?? []) {
    // The field of the whole path, else of its nearest parent (credentials.headers.X-Key → credentials.headers).
    const parts = String(param)
      .replace(/^body\./, '')
      .split('.');
    let fieldEl = null;
    for (let n = parts.length; n > 0 && !fieldEl; n--) fieldEl = form.querySelector(`[data-field="${CSS.escape(parts.slice(0, n).join('.'))}"]`);
    if (fieldEl) {
      setFieldError(fieldEl, message);
      matched = true;
    }
  }
  return matched;
}

export function clearFormErrors(form) {
  for (const fieldEl of form.querySelectorAll('.field')) setFieldError(fieldEl, '');
  form.querySelector('.form-error')?.replaceChildren();
}

/** The error line at the bottom of a form (role=alert: read out when it appears). */
export function formError() {
  return h('div', { class: 'form-error', role: 'alert' });
}

export function showFormError(form, message) {
  const el = form.querySelector('.form-error');
  if (el) replace(el, icon('alert'), h('span', { text: message }));
}
