// DOM helpers. Every string from the fleet goes into the page as text
// (textContent, attributes), never as HTML.

// h builds an element: h('a', {href: '#/runs', class: 'x', onclick: f}, 'text', child).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  add(el, children);
  return el;
}

// add appends children (nodes, strings, numbers, nested arrays; null skipped).
export function add(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// clear empties el and returns it.
export function clear(el) {
  el.replaceChildren();
  return el;
}

// chip is a status chip: queued, running, parked, completed, failed.
export function chip(status, text) {
  return h('span', {class: 'chip chip-' + (status || 'unknown'), 'data-status': status || ''}, text || status || '?');
}

// pretty formats a JSON string or value for a <pre>.
export function pretty(v) {
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  if (v === undefined) return '';
  return JSON.stringify(v, null, 2);
}

// ago is "12s ago" for an RFC 3339 time.
export function ago(t) {
  const ms = Date.now() - new Date(t).getTime();
  if (!t || Number.isNaN(ms)) return '';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + 's ago';
  if (s < 3600) return Math.round(s / 60) + 'm ago';
  if (s < 86400) return Math.round(s / 3600) + 'h ago';
  return Math.round(s / 86400) + 'd ago';
}

// when is a local date-time for an RFC 3339 time.
export function when(t) {
  if (!t || t.startsWith('0001-')) return '';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : d.toLocaleString();
}

// errorBox shows an API error with its hint.
export function errorBox(err, prefix) {
  return h('div', {class: 'error', role: 'alert'},
    h('strong', {}, (prefix ? prefix + ': ' : '') + (err.type ? err.type + ': ' : '')), err.message || String(err),
    err.hint ? h('div', {class: 'hint'}, err.hint) : null);
}

// sleep waits ms, or until signal aborts.
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, {once: true});
  });
}
