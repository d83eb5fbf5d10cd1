/**
 * The 24-hour delivery chart: one stacked bar per hour (deliveries that succeeded, failed attempts,
 * deliveries that went to the dead letter queue), drawn as inline
 * SVG. Hovering a bar shows its numbers; the same numbers are in a table for screen readers and
 * keyboard users (the chart itself is one labelled image).
 */
import { h } from './dom.js';
import { formatNumber, formatTime } from './format.js';

const HOUR = 3_600_000;
const SERIES = [
  { key: 'succeeded', label: 'Succeeded', className: 'bar-succeeded' },
  { key: 'failed', label: 'Failed attempts', className: 'bar-failed' },
  { key: 'dead', label: 'Dead-lettered', className: 'bar-dead' },
];

/** The last `hours` hourly slots ending with the current hour, filled from the API's buckets. */
export function hourlySlots(buckets, hours = 24, now = Date.now()) {
  const byHour = new Map();
  for (const b of buckets ?? []) {
    const t = Date.parse(b.hour);
    if (!Number.isNaN(t)) byHour.set(Math.floor(t / HOUR), b);
  }
  const current = Math.floor(now / HOUR);
  const slots = [];
  for (let i = hours - 1; i >= 0; i--) {
    const hour = current - i;
    const b = byHour.get(hour) ?? {};
    slots.push({ start: new Date(hour * HOUR).toISOString(), succeeded: b.succeeded ?? 0, failed: b.failed ?? 0, dead: b.dead ?? 0 });
  }
  return slots;
}

/** The axis top: an even whole number (so its half, the middle tick, is whole too) at or above `value`. */
export function niceMax(value) {
  if (value <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [2, 4, 6, 8, 10]) {
    if (step * magnitude >= value) return step * magnitude;
  }
  return 10 * magnitude;
}

export function deliveryChart(slots) {
  const width = 720;
  const height = 200;
  const left = 36;
  const bottom = 24;
  const top = 8;
  const plotHeight = height - top - bottom;
  const plotWidth = width - left - 4;
  const total = (s) => s.succeeded + s.failed + s.dead;
  const max = niceMax(Math.max(0, ...slots.map(total)));
  const slotWidth = plotWidth / slots.length;
  const barWidth = Math.max(4, slotWidth * 0.62);
  const y = (v) => top + plotHeight - (v / max) * plotHeight;
  const sum = Object.fromEntries(SERIES.map((s) => [s.key, slots.reduce((n, slot) => n + slot[s.key], 0)]));

  const svg = h('svg', {
    class: 'chart',
    viewBox: `0 0 ${width} ${height}`,
    role: 'img',
    'aria-label': `Webhook deliveries per hour over the last ${slots.length} hours: ${sum.succeeded} succeeded, ${sum.failed} failed attempts, ${sum.dead} dead-lettered.`,
  });
  for (const fraction of [0, 0.5, 1]) {
    const value = Math.round(max * fraction);
    svg.append(
      h('line', { class: 'chart-grid', x1: left, x2: width, y1: y(value), y2: y(value) }),
      h('text', { class: 'chart-axis', x: left - 6, y: y(value) + 4, 'text-anchor': 'end' }, formatNumber(value)),
    );
  }
  slots.forEach((slot, i) => {
    const x = left + i * slotWidth + (slotWidth - barWidth) / 2;
    const group = h('g', { class: 'chart-bar' });
    group.append(h('title', {}, `${formatTime(slot.start)}: ${slot.succeeded} succeeded, ${slot.failed} failed attempts, ${slot.dead} dead-lettered`));
    // A full-height transparent target, so an empty hour still shows its tooltip.
    group.append(h('rect', { class: 'bar-hit', x: left + i * slotWidth, y: top, width: slotWidth, height: plotHeight }));
    let base = 0;
    for (const series of SERIES) {
      const value = slot[series.key];
      if (value > 0) {
        const y1 = y(base + value);
        const h1 = Math.max(1.5, y(base) - y1);
        group.append(h('rect', { class: series.className, x, y: y1, width: barWidth, height: h1, rx: 2 }));
        base += value;
      }
    }
    svg.append(group);
    if (i % 6 === 0 || i === slots.length - 1) {
      svg.append(
        h(
          'text',
          { class: 'chart-axis', x: left + i * slotWidth + slotWidth / 2, y: height - 6, 'text-anchor': 'middle' },
          i === slots.length - 1 ? 'now' : formatTime(slot.start),
        ),
      );
    }
  });
  return svg;
}

/** The chart's numbers as a table (inside a <details>, for assistive technology and the curious). */
export function deliveryTable(slots) {
  return h(
    'table',
    { class: 'table table-compact' },
    h('caption', { class: 'visually-hidden', text: 'Webhook deliveries per hour' }),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col', text: 'Hour' }),
        SERIES.map((s) => h('th', { scope: 'col', class: 'num', text: s.label })),
      ),
    ),
    h(
      'tbody',
      {},
      slots.map((slot) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row', text: formatTime(slot.start) }),
          SERIES.map((s) => h('td', { class: 'num', text: formatNumber(slot[s.key]) })),
        ),
      ),
    ),
  );
}

/** Sums of each series over the slots. */
export function seriesTotals(slots) {
  return Object.fromEntries(SERIES.map((s) => [s.key, slots.reduce((n, slot) => n + slot[s.key], 0)]));
}

export const CHART_SERIES = SERIES;
