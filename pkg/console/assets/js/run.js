// The run page: the run's status and a live timeline of its events over
// SSE, with the controls an operator needs: approve or reject a gated
// call, answer ask_human, cancel, inject a message.

import {del, enc, get, missingRoute, post, rememberRun} from './api.js';
import {RunStream} from './sse.js';
import {chip, clear, errorBox, h, when} from './dom.js';
import {Timeline} from './timeline.js';

const STATUS_MS = 5000;

export function render(main, {id}) {
  rememberRun(id);
  const ctl = new AbortController();
  const statusEl = h('span', {id: 'run-status'}, chip('', '…'));
  const facts = h('dl', {class: 'facts', id: 'run-facts'});
  const streamState = h('span', {class: 'stream-state', id: 'stream-state', 'data-state': 'connecting'}, 'connecting');
  const controls = h('div', {class: 'controls', id: 'run-controls'});
  const side = h('aside', {class: 'side'});
  const todo = h('section', {class: 'panel todo', id: 'todo', hidden: true}, h('h2', {}, 'Todo'), h('ol'));
  const details = h('section', {class: 'panel', id: 'run-details', hidden: true});
  const timelineEl = h('div', {class: 'timeline', id: 'timeline', 'data-last-seq': '0'});
  side.append(todo, details);
  main.append(
    h('div', {class: 'page-head'}, h('h1', {}, 'Run ', h('span', {class: 'mono', id: 'run-id'}, id)), statusEl, streamState),
    facts, controls,
    h('div', {class: 'columns'}, h('section', {class: 'grow'}, timelineEl), side));

  let finished = false;
  let seenTurn = 0; // the highest turn of the events shown
  const tl = new Timeline(timelineEl, {
    todo,
    decide: (callID, decision, reason) => post('/v1/runs/' + enc(id) + '/approvals/' + enc(callID), {decision, reason}),
    onTerminal: () => { finished = true; controls.hidden = true; refresh(); },
  });

  const refresh = async () => {
    let st;
    try {
      st = await get('/v1/runs/' + enc(id), {signal: ctl.signal});
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e.status === 404) {
        clear(facts).append(errorBox(e, 'No such run'));
        stream.stop();
        return;
      }
      clear(facts).append(errorBox(e, 'Reading the status failed'));
      return;
    }
    // describe (newer gateways) adds what the run awaits from the first
    // second of the wait, the final agent, the parent and the attempts.
    let d = null;
    try {
      d = await get('/v1/runs/' + enc(id) + '/describe', {signal: ctl.signal});
      drawDetails(details, d);
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (!missingRoute(e)) clear(details).append(errorBox(e, 'Describing the run failed'));
      details.hidden = details.childElementCount === 0;
    }
    const view = d ? Object.assign({}, st, {awaiting: d.awaiting || null, final_agent: d.final_agent, parent_run_id: d.parent_run_id}) : Object.assign({}, st);
    // The record counts turns at checkpoints; the events say which turn
    // the run is in now.
    view.turns = Math.max(view.turns || 0, seenTurn);
    drawStatus(statusEl, facts, view);
    if (st.status === 'completed' || st.status === 'failed') controls.hidden = true;
  };

  const stream = new RunStream(id, {
    onEvent: (env) => {
      tl.add(env);
      if (env.type === 'turn_started' && env.turn > seenTurn) {
        seenTurn = env.turn;
        const dd = facts.querySelector('[data-fact="turns"] dd');
        if (dd) dd.textContent = String(seenTurn);
      }
      if (['run_resumed', 'approval_required', 'approval_resolved', 'run_started'].includes(env.type)) refresh();
    },
    onState: (state, err) => {
      streamState.dataset.state = state;
      streamState.textContent = state + (err ? ': ' + err.message : '');
      if (state === 'failed') timelineEl.append(errorBox(err, 'The event stream stopped'));
    },
  });
  drawControls(controls, id, tl);
  refresh();
  stream.start();
  const timer = setInterval(() => { if (!finished) refresh(); }, STATUS_MS);
  return () => { clearInterval(timer); stream.stop(); ctl.abort(); };
}

function drawStatus(statusEl, facts, st) {
  const parked = st.status === 'parked' || Boolean(st.awaiting?.parked);
  clear(statusEl).append(chip(parked ? 'parked' : st.status));
  const items = [
    ['agent', st.agent], ['final agent', st.final_agent && st.final_agent !== st.agent ? st.final_agent : ''],
    ['worker', st.worker], ['attempt', st.attempt], ['turns', st.turns],
    ['session', st.session_id ? h('a', {href: '#/sessions/' + enc(st.session_id)}, st.session_id) : ''],
    ['parent', st.parent_run_id ? h('a', {href: '#/runs/' + enc(st.parent_run_id)}, st.parent_run_id) : ''],
    ['awaiting', st.awaiting ? `${st.awaiting.question ? 'an answer to “' + st.awaiting.question + '”' : 'a decision on ' + (st.awaiting.tool || '') + ' ' + st.awaiting.call_id}${st.awaiting.deadline ? ' until ' + when(st.awaiting.deadline) : ''}` : ''],
    ['waiting', st.waiting],
    ['registry revision', st.registry_revision],
  ];
  clear(facts);
  for (const [k, v] of items) {
    if (v === undefined || v === null || v === '' || v === 0 && k !== 'attempt' && k !== 'turns') continue;
    facts.append(h('div', {'data-fact': k}, h('dt', {}, k), h('dd', {}, v)));
  }
}

function drawDetails(el, d) {
  clear(el).append(h('h2', {}, 'Details'));
  const dl = h('dl', {class: 'facts'});
  const put = (k, v) => { if (v !== undefined && v !== null && v !== '') dl.append(h('div', {}, h('dt', {}, k), h('dd', {}, v))); };
  put('created', when(d.created_at));
  put('started', when(d.started_at));
  put('finished', when(d.finished_at));
  if (d.duration_ms !== undefined) put('duration', (d.duration_ms / 1000).toFixed(1) + ' s');
  if (d.usage) put('tokens', `${d.usage.input_tokens ?? 0} in, ${d.usage.output_tokens ?? 0} out`);
  el.append(dl);
  if (d.attempts?.length) {
    el.append(h('h3', {}, 'Attempts'), h('ol', {class: 'attempts'},
      d.attempts.map((a) => h('li', {}, `${a.kind}${a.worker ? ' on ' + a.worker : ''} — ${when(a.at)}`))));
  }
  if (d.children?.length) {
    el.append(h('h3', {}, 'Children'), h('ul', {}, d.children.map((c) => h('li', {},
      h('a', {href: '#/runs/' + enc(c.run_id)}, c.run_id), ' ', chip(c.status), ' ', c.agent))));
  }
  el.hidden = false;
}

function drawControls(el, id, tl) {
  const out = h('span', {class: 'result', id: 'control-result'});
  const reason = h('input', {id: 'cancel-reason', placeholder: 'reason (optional)', hidden: true});
  const confirm = h('button', {type: 'button', class: 'danger', id: 'cancel-confirm', hidden: true}, 'Confirm cancel');
  const cancel = h('button', {type: 'button', class: 'ghost', id: 'cancel'}, 'Cancel run…');
  cancel.addEventListener('click', () => { reason.hidden = confirm.hidden = false; cancel.hidden = true; reason.focus(); });
  confirm.addEventListener('click', async () => {
    confirm.disabled = true;
    try {
      const rep = await post('/v1/runs/' + enc(id) + '/cancel', reason.value ? {reason: reason.value} : {});
      clear(out).append(rep.cancelled ? 'cancel requested' : `not cancelled: the run is ${rep.status}`);
    } catch (e) {
      clear(out).append(errorBox(e, 'Cancel failed'));
    }
    confirm.disabled = false;
  });
  const msg = h('input', {id: 'inject-text', placeholder: 'steer the run: a message for its next turn', required: true});
  const pending = h('span', {id: 'inject-pending'});
  const inject = h('form', {class: 'inject', id: 'inject'}, msg, h('button', {type: 'submit'}, 'Inject'), pending);
  inject.addEventListener('submit', async (e) => {
    e.preventDefault();
    const content = msg.value;
    try {
      const rep = await post('/v1/runs/' + enc(id) + '/messages', {content});
      msg.value = '';
      const withdraw = h('button', {type: 'button', class: 'ghost small'}, 'withdraw');
      const item = h('span', {class: 'badge pending', 'data-token': rep.token}, 'queued: ' + content + ' ', withdraw);
      withdraw.addEventListener('click', async () => {
        try {
          const r = await del('/v1/runs/' + enc(id) + '/messages/' + enc(rep.token));
          item.replaceWith(h('span', {class: 'badge'}, r.removed ? 'withdrawn' : 'already delivered'));
        } catch (err) {
          item.append(errorBox(err));
        }
      });
      pending.append(item);
      tl.onInjected(content, () => item.remove());
    } catch (err) {
      clear(out).append(errorBox(err, 'The message was not injected'));
    }
  });
  el.append(inject, cancel, reason, confirm, out);
}

