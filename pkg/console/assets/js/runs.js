// The runs page: the live list (GET /v1/runs) with filters, status chips
// with counts and auto-refresh; open a run by id; start a run.

import {enc, get, missingRoute, post, recentRuns, rememberRun} from './api.js';
import {ago, chip, clear, errorBox, h} from './dom.js';

const STATUSES = ['queued', 'running', 'parked', 'completed', 'failed'];
const FILTERS = ['agent', 'status', 'session', 'worker', 'parent', 'since', 'until', 'awaiting', 'limit'];
const PAGE = '50';

// localInput is an RFC 3339 time as a datetime-local input's value; isoOf the reverse.
const localInput = (iso) => {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '' : new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
};
const isoOf = (local) => (local ? new Date(local).toISOString() : '');
const REFRESH_MS = 3000;

export function render(main, {query}) {
  const ctl = new AbortController();
  const filters = Object.fromEntries(FILTERS.map((f) => [f, query.get(f) || '']));
  const agentSelect = h('select', {name: 'agent', id: 'filter-agent'}, h('option', {value: ''}, 'any agent'));
  const form = h('form', {class: 'filters', id: 'run-filters'},
    agentSelect,
    h('select', {name: 'status', id: 'filter-status'}, h('option', {value: ''}, 'any status'), STATUSES.map((s) => h('option', {value: s}, s))),
    h('input', {name: 'session', placeholder: 'session id', value: filters.session}),
    h('input', {name: 'worker', placeholder: 'worker id', value: filters.worker}),
    h('input', {name: 'parent', placeholder: 'parent run id', value: filters.parent}),
    h('label', {class: 'check'}, 'from', h('input', {type: 'datetime-local', name: 'since', value: localInput(filters.since)})),
    h('label', {class: 'check'}, 'to', h('input', {type: 'datetime-local', name: 'until', value: localInput(filters.until)})),
    h('label', {class: 'check'}, h('input', {type: 'checkbox', name: 'awaiting', checked: filters.awaiting === 'true'}), 'awaiting a person'),
    h('button', {type: 'submit'}, 'Filter'),
    h('label', {class: 'check'}, h('input', {type: 'checkbox', id: 'auto-refresh', checked: true}), 'auto-refresh'));
  form.status.value = filters.status;
  const chips = h('div', {class: 'chips', id: 'status-chips'});
  const list = h('div', {id: 'runs-list'});
  const more = h('button', {type: 'button', id: 'runs-more', hidden: true, class: 'ghost'}, 'Load more');
  const updated = h('span', {class: 'muted', id: 'runs-updated'});

  main.append(
    h('div', {class: 'page-head'}, h('h1', {}, 'Runs'), updated),
    h('div', {class: 'columns'},
      h('section', {class: 'grow'}, form, chips, list, more),
      h('aside', {class: 'side'}, startForm(agentsLoaded(agentSelect, filters.agent, ctl.signal)), openForm())));

  let cursor = '';
  let pages = 1;
  let gen = 0; // the latest load: a slower, older reply must not overwrite a newer one
  const load = async (append) => {
    const mine = ++gen;
    const q = new URLSearchParams();
    for (const f of FILTERS) if (filters[f]) q.set(f, filters[f]);
    if (!q.has('limit')) q.set('limit', PAGE);
    if (append) q.set('cursor', cursor);
    try {
      const rep = await get('/v1/runs?' + q, {signal: ctl.signal});
      if (mine !== gen) return;
      drawChips(chips, rep.counts || {}, filters, apply);
      if (!append) clear(list).append(table());
      const body = list.querySelector('tbody');
      for (const r of rep.runs || []) body.append(row(r));
      if (!append && !(rep.runs || []).length) list.append(h('p', {class: 'muted empty'}, 'No runs match.'));
      cursor = rep.next_cursor || '';
      more.hidden = !cursor;
      updated.textContent = 'updated ' + new Date().toLocaleTimeString();
    } catch (e) {
      if (e.name === 'AbortError' || mine !== gen) return;
      clear(list);
      if (missingRoute(e)) {
        list.append(h('div', {class: 'notice', id: 'runs-unlisted'},
          'This gateway cannot list runs yet (GET /v1/runs: ', e.message, '). Open a run by its id, start one, or pick one this browser opened:'),
        recentTable());
        stop();
        return;
      }
      list.append(errorBox(e, 'Listing runs failed'));
    }
  };
  const apply = () => {
    const q = new URLSearchParams();
    for (const f of FILTERS) if (filters[f]) q.set(f, filters[f]);
    history.replaceState(null, '', '#/runs' + (q.toString() ? '?' + q : ''));
    pages = 1;
    load(false);
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    filters.agent = form.agent.value;
    filters.status = form.status.value;
    filters.session = form.session.value.trim();
    filters.worker = form.worker.value.trim();
    filters.parent = form.parent.value.trim();
    filters.since = isoOf(form.since.value);
    filters.until = isoOf(form.until.value);
    filters.awaiting = form.awaiting.checked ? 'true' : '';
    apply();
  });
  for (const name of ['agent', 'status', 'awaiting']) form[name].addEventListener('change', () => form.requestSubmit());
  more.addEventListener('click', () => { pages++; load(true); });

  let timer = setInterval(() => {
    if (document.getElementById('auto-refresh')?.checked && pages === 1) load(false);
  }, REFRESH_MS);
  const stop = () => { clearInterval(timer); timer = null; };
  load(false);
  return () => { stop(); ctl.abort(); };
}

function drawChips(el, counts, filters, apply) {
  clear(el);
  for (const s of STATUSES) {
    const c = h('button', {type: 'button', class: 'chip-filter' + (filters.status === s ? ' on' : ''), 'data-status': s},
      chip(s), h('span', {class: 'count', id: 'count-' + s}, String(counts[s] ?? 0)));
    c.addEventListener('click', () => {
      filters.status = filters.status === s ? '' : s;
      document.getElementById('filter-status').value = filters.status;
      apply();
    });
    el.append(c);
  }
}

function table() {
  return h('table', {class: 'runs'},
    h('thead', {}, h('tr', {}, ['run', 'agent', 'status', 'worker', 'turns', 'created', 'updated'].map((c) => h('th', {}, c)))),
    h('tbody'));
}

function row(r) {
  const status = r.awaiting?.parked ? 'parked' : r.status;
  return h('tr', {'data-run-id': r.run_id},
    h('td', {}, h('a', {href: '#/runs/' + enc(r.run_id), class: 'mono'}, r.run_id),
      r.parent_run_id ? h('div', {class: 'muted small'}, 'child of ', h('a', {href: '#/runs/' + enc(r.parent_run_id)}, r.parent_run_id)) : null),
    h('td', {}, r.agent, r.final_agent && r.final_agent !== r.agent ? h('span', {class: 'muted'}, ' → ' + r.final_agent) : null),
    h('td', {}, chip(status),
      r.awaiting ? h('span', {class: 'badge awaiting', title: r.awaiting.question || ''}, r.awaiting.kind === 'question' ? 'question' : 'approval: ' + (r.awaiting.tool || r.awaiting.call_id)) : null,
      r.error ? h('div', {class: 'small error-text'}, r.error.type) : null),
    h('td', {class: 'mono'}, r.worker || ''),
    // The record counts a run's turns when it completes (0 before): a
    // run under way or failed shows none rather than a 0 its page denies.
    r.turns > 0 ? h('td', {class: 'turns'}, String(r.turns))
      : h('td', {class: 'turns muted', title: 'the fleet counts a run\'s turns when it completes: open the run for the turn it is in'}, '—'),
    h('td', {title: r.created_at || ''}, ago(r.created_at)),
    h('td', {title: r.updated_at || ''}, ago(r.updated_at)));
}

// recentTable lists the runs this browser opened, with their status.
function recentTable() {
  const recent = recentRuns();
  if (!recent.length) return h('p', {class: 'muted'}, 'No runs opened in this browser yet.');
  const t = table();
  const body = t.querySelector('tbody');
  for (const r of recent.slice(0, 20)) {
    const tr = row({run_id: r.run_id, agent: r.agent, status: '', created_at: r.at});
    body.append(tr);
    get('/v1/runs/' + enc(r.run_id)).then((st) => tr.replaceWith(row(Object.assign({created_at: r.at}, st)))).catch(() => {});
  }
  return t;
}

// agentsLoaded fills the agent filter from GET /v1/agents; it resolves to
// the agents' names.
async function agentsLoaded(select, current, signal) {
  try {
    const rep = await get('/v1/agents', {signal});
    const names = (rep.agents || []).map((a) => a.name);
    for (const n of names) select.append(h('option', {value: n}, n));
    select.value = current;
    return names;
  } catch {
    return [];
  }
}

function startForm(names) {
  const agent = h('select', {name: 'agent', id: 'start-agent', required: true});
  names.then((list) => { for (const n of list) agent.append(h('option', {value: n}, n)); });
  const out = h('div', {class: 'result'});
  const form = h('form', {class: 'panel stack', id: 'start-run'},
    h('h2', {}, 'Start a run'),
    h('label', {}, 'Agent', agent),
    h('label', {}, 'Input', h('textarea', {name: 'input', id: 'start-input', rows: 3, required: true, placeholder: 'What should the agent do?'})),
    h('label', {}, 'Session (optional)', h('input', {name: 'session', id: 'start-session', placeholder: 'continue a conversation'})),
    h('button', {type: 'submit', id: 'start-submit'}, 'Start'),
    out);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = {agent: agent.value, input: form.input.value};
    if (form.session.value.trim()) body.session_id = form.session.value.trim();
    form.querySelector('button').disabled = true;
    try {
      const rep = await post('/v1/runs', body);
      rememberRun(rep.run_id, rep.agent);
      location.hash = '#/runs/' + enc(rep.run_id);
    } catch (err) {
      clear(out).append(errorBox(err, 'The run was not started'));
      form.querySelector('button').disabled = false;
    }
  });
  return form;
}

function openForm() {
  const form = h('form', {class: 'panel stack', id: 'open-run'},
    h('h2', {}, 'Open a run'),
    h('input', {name: 'run', id: 'open-run-id', placeholder: 'run id', required: true}),
    h('button', {type: 'submit'}, 'Open'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = '#/runs/' + enc(form.run.value.trim());
  });
  return form;
}
