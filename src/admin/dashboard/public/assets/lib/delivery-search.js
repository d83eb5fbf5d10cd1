/**
 * The search above a deliveries table: an event or delivery id, an event type and a date range
 * (days in the browser's time zone, both ends included). A value the browser can tell is wrong (an
 * id that is no UUID, an end before the start) is said at its field before anything is asked; one
 * the API refuses (400 naming the parameter) is said at the same field.
 */
import { h, replace, uid } from './dom.js';
import { get } from './api.js';
import { button, clearFormErrors, field, setFieldError, showProblemOnForm } from './ui.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DAY = /^\d{4}-\d{2}-\d{2}$/;

let eventTypes = null;
/** The event types of the catalog (asked once per page load). */
function loadEventTypes() {
  eventTypes ??= get('/event-types')
    .then(({ data }) => data.map((t) => t.type))
    .catch((error) => {
      eventTypes = null;
      throw error;
    });
  return eventTypes;
}

/** Local midnight of a yyyy-mm-dd day, `plusDays` later, as an ISO instant. */
function dayStart(day, plusDays = 0) {
  const [y, m, d] = day.split('-').map(Number);
  return new Date(y, m - 1, d + plusDays).toISOString();
}

/** The admin API's query parameters of a search: `to` is the day after the last day shown. */
export function searchQuery({ id = '', event_type = '', from = '', to = '' }) {
  return {
    id: id || undefined,
    event_type: event_type || undefined,
    from: DAY.test(from) ? dayStart(from) : from || undefined,
    to: DAY.test(to) ? dayStart(to, 1) : to || undefined,
  };
}

/** deliverySearchForm({ values, onSearch }) → { element, active(), showProblem(error) }. */
export function deliverySearchForm({ values, onSearch }) {
  const idInput = h('input', {
    type: 'search',
    name: 'id',
    value: values.id ?? '',
    autocomplete: 'off',
    spellcheck: false,
    placeholder: 'Paste an id',
    class: 'input-mono',
  });
  const typeSelect = h('select', { name: 'event_type' }, h('option', { value: '', text: 'All event types' }));
  const chosenType = values.event_type ?? '';
  if (chosenType) typeSelect.append(h('option', { value: chosenType, text: chosenType, selected: true }));
  loadEventTypes()
    .then((types) => {
      const current = typeSelect.value;
      replace(
        typeSelect,
        h('option', { value: '', text: 'All event types' }),
        types.map((t) => h('option', { value: t, text: t, selected: t === current })),
      );
    })
    .catch(() => {});
  const from = h('input', { type: 'date', name: 'from', value: values.from ?? '' });
  const to = h('input', { type: 'date', name: 'to', value: values.to ?? '' });
  const clear = button({
    label: 'Clear',
    size: 'sm',
    variant: 'ghost',
    onClick: () => {
      idInput.value = '';
      typeSelect.value = '';
      from.value = '';
      to.value = '';
      submit();
    },
  });
  const searchButton = button({ label: 'Search', type: 'submit', size: 'sm' });
  const formId = uid('delivery-search');
  const form = h(
    'form',
    { class: 'delivery-search', role: 'search', 'aria-label': 'Search deliveries', novalidate: true, id: formId },
    field({ label: 'Event or delivery id', control: idInput, className: 'search-id' }),
    field({ label: 'Event type', control: typeSelect, className: 'search-type' }),
    field({ label: 'From', control: from, className: 'search-date' }),
    field({ label: 'To (included)', control: to, className: 'search-date' }),
    h('div', { class: 'search-actions' }, searchButton, clear),
  );

  const current = () => ({ id: idInput.value.trim(), event_type: typeSelect.value, from: from.value, to: to.value });
  const fieldOf = (name) => form.querySelector(`[data-field="${name}"]`);
  function submit() {
    clearFormErrors(form);
    const v = current();
    let ok = true;
    if (v.id && !UUID.test(v.id)) {
      setFieldError(fieldOf('id'), 'Enter a whole event id or delivery id (a UUID such as 0b5c…-…).');
      ok = false;
    }
    if (v.from && v.to && v.to < v.from) {
      setFieldError(fieldOf('to'), 'Choose an end on or after the start.');
      ok = false;
    }
    if (!ok) {
      form.querySelector('[aria-invalid="true"]')?.focus();
      return;
    }
    onSearch(v);
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit();
  });
  typeSelect.addEventListener('change', submit);

  return {
    element: form,
    active: () => Object.values(current()).some(Boolean),
    showProblem: (error) => {
      const matched = showProblemOnForm(form, error);
      if (matched) form.querySelector('[aria-invalid="true"]')?.focus();
      return matched;
    },
  };
}
