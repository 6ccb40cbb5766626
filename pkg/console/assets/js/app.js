// The console's shell: settings, the banner, and the router. Each page is
// a module whose render(main, params) draws it and returns a cleanup
// function that stops its timers and streams.

import {onUnauthorized, saveSettings, settings} from './api.js';
import * as runs from './runs.js';
import * as run from './run.js';
import * as sessions from './sessions.js';
import * as agents from './agents.js';
import * as workers from './workers.js';

const routes = [
  [/^\/runs\/([^/]+)$/, run, 'runs'],
  [/^\/runs\/?$/, runs, 'runs'],
  [/^\/sessions\/([^/]+)$/, sessions, 'sessions'],
  [/^\/sessions\/?$/, sessions, 'sessions'],
  [/^\/agents\/?$/, agents, 'agents'],
  [/^\/workers\/?$/, workers, 'workers'],
];

let cleanup = null;

// parseHash splits "#/runs?status=running" into the path and its query.
export function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/runs';
  const [path, query] = raw.split('?');
  return {path, query: new URLSearchParams(query || '')};
}

function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const {path, query} = parseHash();
  const main = document.getElementById('main');
  main.replaceChildren();
  for (const [re, page, nav] of routes) {
    const m = path.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === nav);
    document.body.dataset.page = nav + (m[1] ? '-one' : '');
    cleanup = page.render(main, {id: m[1] ? decodeURIComponent(m[1]) : '', query}) || null;
    return;
  }
  main.append(Object.assign(document.createElement('p'), {className: 'error', textContent: `No page ${path}: see the links above.`}));
}

function banner(text) {
  const b = document.getElementById('banner');
  b.textContent = text;
  b.hidden = !text;
}

function setupSettings() {
  const panel = document.getElementById('settings');
  const form = document.getElementById('settings-form');
  const show = () => {
    const s = settings();
    form.gateway.value = s.gateway || '';
    form.token.value = s.token || '';
    panel.hidden = false;
  };
  document.getElementById('settings-toggle').addEventListener('click', () => (panel.hidden ? show() : (panel.hidden = true)));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    saveSettings({gateway: form.gateway.value, token: form.token.value});
    panel.hidden = true;
    banner('');
    route();
  });
  onUnauthorized((err) => {
    banner(settings().token
      ? `The gateway refused the token (${err.message}): enter a valid one in Settings.`
      : 'This gateway needs a bearer token: enter it in Settings.');
    if (panel.hidden) show();
  });
}

setupSettings();
window.addEventListener('hashchange', route);
route();
