// The gateway's HTTP API (docs/protocol.md#http-gateway), with the bearer
// token and gateway address from the settings.

const KEY = 'lovia.console';

// settings are {gateway, token}; gateway "" is the console's own origin.
export function settings() {
  try {
    return JSON.parse(localStorage.getItem(KEY)) || {};
  } catch {
    return {};
  }
}

export function saveSettings(s) {
  localStorage.setItem(KEY, JSON.stringify({gateway: (s.gateway || '').trim().replace(/\/+$/, ''), token: (s.token || '').trim()}));
}

// base is the gateway's origin, "" for this one.
export function base() {
  return settings().gateway || '';
}

// authHeaders are the headers every call sends.
export function authHeaders(extra) {
  const h = Object.assign({}, extra);
  const token = settings().token;
  if (token) h.Authorization = 'Bearer ' + token;
  return h;
}

// APIError is an error reply {error: {type, message, hint}}, or a gateway
// that could not be reached (status 0).
export class APIError extends Error {
  constructor(status, body) {
    super(body.message || 'HTTP ' + status);
    this.status = status;
    this.type = body.type || 'HTTP ' + status;
    this.hint = body.hint || '';
  }
}

// listeners of 401 replies (the app shows the settings).
const unauthorized = new Set();
export function onUnauthorized(f) { unauthorized.add(f); }

// unreachable is the error of a fetch that failed before any reply.
export function unreachable(e) {
  const where = base() || location.origin;
  return new APIError(0, {
    type: 'Unreachable',
    message: `cannot reach the gateway at ${where} (${e.message})`,
    hint: base() ? `check that it runs and allows this origin (lovia gateway --cors-origin ${location.origin})` : 'check that the gateway runs, then reload',
  });
}

// errorOf reads the error reply of a failed response.
export async function errorOf(res) {
  const text = await res.text().catch(() => '');
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  const err = new APIError(res.status, (body && body.error) || {message: text.trim() || res.statusText || 'HTTP ' + res.status});
  if (res.status === 401) unauthorized.forEach((f) => f(err));
  return err;
}

// call sends one request and returns the decoded JSON reply.
export async function call(method, path, body, opts) {
  const headers = authHeaders({Accept: 'application/json'});
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(base() + path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: opts?.signal, cache: 'no-store'});
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw unreachable(e);
  }
  if (!res.ok) throw await errorOf(res);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path, opts) => call('GET', path, undefined, opts);
export const post = (path, body, opts) => call('POST', path, body === undefined ? {} : body, opts);
export const del = (path, opts) => call('DELETE', path, undefined, opts);

// enc escapes a path segment.
export const enc = encodeURIComponent;

// missing reports whether err says the gateway has no such route (an older
// gateway): 404 NotFound "no route", or 405 on a path that exists for other methods.
export function missingRoute(err) {
  return err instanceof APIError && (err.status === 405 || (err.status === 404 && /^no route/.test(err.message)));
}

// Runs this browser opened, newest first, for gateways that cannot list runs.
const RECENT = 'lovia.console.recent';
export function recentRuns() {
  try { return JSON.parse(localStorage.getItem(RECENT)) || []; } catch { return []; }
}
export function rememberRun(id, agent) {
  const list = recentRuns().filter((r) => r.run_id !== id);
  list.unshift({run_id: id, agent: agent || '', at: new Date().toISOString()});
  localStorage.setItem(RECENT, JSON.stringify(list.slice(0, 50)));
}
