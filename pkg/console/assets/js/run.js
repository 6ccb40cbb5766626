// The run page: the run's status and a live timeline of its events over
// SSE, with the controls an operator needs: approve or reject a gated
// call, answer ask_human, cancel, inject a message.

import {del, enc, get, missingRoute, post, rememberRun} from './api.js';
import {RunStream} from './sse.js';
import {chip, clear, errorBox, h, when} from './dom.js';
import {Timeline} from './timeline.js';

const STATUS_MS = 5000;

// RUN_ID is what a run id may be (docs/protocol.md#identifiers).
const RUN_ID = /^[A-Za-z0-9_-]{1,128}$/;
const TERMINAL = new Set(['run_completed', 'run_failed']);

export function render(main, {id}) {
  if (!RUN_ID.test(id)) {
    main.append(h('div', {class: 'page-head'}, h('h1', {}, 'Run ', h('span', {class: 'mono', id: 'run-id'}, id))),
      h('div', {id: 'run-missing'}, errorBox({type: 'InvalidRequest', message: `“${id}” is not a run id: a run id is 1–128 characters of A–Z, a–z, 0–9, _ and -`,
        hint: 'check the link, or find the run on the runs page'}, 'No such run'),
      h('p', {}, h('a', {href: '#/runs'}, 'Back to the runs'))));
    return () => {};
  }
  const ctl = new AbortController();
  const statusEl = h('span', {id: 'run-status'}, chip('', '…'));
  const facts = h('dl', {class: 'facts', id: 'run-facts'});
  const streamState = h('span', {class: 'stream-state', id: 'stream-state', 'data-state': 'connecting'}, 'connecting');
  // The controls show once the fleet says the run exists, until it ends.
  const controls = h('div', {class: 'controls', id: 'run-controls', hidden: true});
  const missing = h('div', {id: 'run-missing', hidden: true});
  // What the controls answered: outside them, so an answer that comes
  // as the run ends (and the controls go) is still read.
  const answer = h('div', {class: 'result', id: 'control-result'});
  const side = h('aside', {class: 'side'});
  const todo = h('section', {class: 'panel todo', id: 'todo', hidden: true}, h('h2', {}, 'Todo'), h('ol'));
  const details = h('section', {class: 'panel', id: 'run-details', hidden: true});
  const timelineEl = h('div', {class: 'timeline', id: 'timeline', 'data-last-seq': '0'});
  side.append(todo, details);
  main.append(
    h('div', {class: 'page-head'}, h('h1', {}, 'Run ', h('span', {class: 'mono', id: 'run-id'}, id)), statusEl, streamState),
    missing, facts, controls, answer,
    h('div', {class: 'columns'}, h('section', {class: 'grow'}, timelineEl), side));

  // What the events say, which a status reply older than them must not
  // undo: the terminal event of the last submission shown (cleared by a
  // later submission's start), the turn, the submissions ended.
  const ev = {lastSeq: 0, terminal: '', terminalSeq: 0, turns: 0, ended: 0, claim: null};
  const tl = new Timeline(timelineEl, {
    todo,
    decide: (callID, decision, reason) => post('/v1/runs/' + enc(id) + '/approvals/' + enc(callID), {decision, reason}),
    onTerminal: () => { controls.hidden = true; refresh(); },
  });

  let stream = null;
  const follow = () => {
    stream?.stop();
    stream = new RunStream(id, {
      onEvent: (env) => {
        tl.add(env);
        ev.lastSeq = env.seq;
        if (env.turn > ev.turns) ev.turns = env.turn;
        if (TERMINAL.has(env.type)) {
          ev.terminal = env.type === 'run_completed' ? 'completed' : 'failed';
          ev.terminalSeq = env.seq;
          ev.ended++;
          if (env.type === 'run_completed' && env.data?.turns > 0) ev.turns = env.data.turns;
        } else if (env.type === 'run_started' || env.type === 'run_resumed') {
          ev.terminal = '';
          // The worker that holds the run now, newer than a status read
          // before this event.
          ev.claim = {seq: env.seq, worker: env.data?.worker, attempt: env.data?.attempt};
          if (env.type === 'run_started') controls.hidden = false;
        }
        if (['run_resumed', 'turn_started', 'approval_resolved', 'run_completed', 'run_failed'].includes(env.type)) paint();
        if (['run_resumed', 'approval_required', 'approval_resolved', 'run_started'].includes(env.type)) refresh();
      },
      onState: (state, err) => {
        streamState.dataset.state = state;
        streamState.textContent = state + (err ? ': ' + err.message : '');
        if (state === 'failed') timelineEl.append(errorBox(err, 'The event stream stopped'));
      },
    });
    stream.lastID = ev.lastSeq; // a later submission's events follow the ones shown
    stream.start();
  };

  let gen = 0; // the latest refresh: an older reply must not overwrite a newer one
  let found = false;
  const refresh = async () => {
    const mine = ++gen;
    const asOf = ev.lastSeq; // the events shown when the status was read
    let st;
    try {
      st = await get('/v1/runs/' + enc(id), {signal: ctl.signal});
    } catch (e) {
      if (e.name === 'AbortError' || mine !== gen) return;
      if ((e.status === 404 && !missingRoute(e)) || e.status === 400) {
        notFound(e);
        return;
      }
      clear(facts).append(errorBox(e, 'Reading the status failed'));
      if (!found) {
        // The stream opens once the status says the run exists.
        streamState.dataset.state = 'waiting';
        streamState.textContent = `waiting for the gateway: trying again every ${STATUS_MS / 1000} s`;
      }
      return;
    }
    // describe (newer gateways) adds what the run awaits from the first
    // second of the wait, the final agent, the parent, the attempts and
    // the submissions.
    let d = null;
    try {
      d = await get('/v1/runs/' + enc(id) + '/describe', {signal: ctl.signal});
    } catch (e) {
      if (e.name === 'AbortError' || mine !== gen) return;
      if (!missingRoute(e)) clear(details).append(errorBox(e, 'Describing the run failed'));
      details.hidden = details.childElementCount === 0;
    }
    if (mine !== gen) return;
    if (d) drawDetails(details, d);
    if (!found) {
      found = true;
      missing.hidden = true;
      clear(missing);
      rememberRun(id, st.agent);
      controls.hidden = st.status === 'completed' || st.status === 'failed';
      follow();
    }
    reply = {st, d, asOf};
    // A later submission: the run runs again, or ran again and ended,
    // after the last terminal event shown (each submission ends with one).
    // Its events follow.
    if (later() && stream && streamState.dataset.state === 'ended') follow();
    paint();
  };

  let reply = null; // the last status and description
  const later = () => Boolean(ev.terminal) && (reply?.d?.submissions || 0) > ev.ended;
  // paint draws the status from the last reply and what the events said
  // since: the terminal event shown is the run's state until a later
  // submission, whatever an older or slower record says, and a decision
  // shown ends the wait for it.
  const paint = () => {
    if (!reply) return;
    const {st, d, asOf} = reply;
    const view = d ? Object.assign({}, st, {awaiting: d.awaiting || null, final_agent: d.final_agent, parent_run_id: d.parent_run_id}) : Object.assign({}, st);
    if (ev.claim && ev.claim.seq > asOf) {
      if (ev.claim.worker) view.worker = ev.claim.worker;
      if (ev.claim.attempt) view.attempt = ev.claim.attempt;
    }
    if (ev.terminal && !later()) {
      view.status = ev.terminal;
      view.awaiting = null;
    }
    const awaited = view.awaiting && tl.calls.get(view.awaiting.call_id);
    if (awaited && (awaited.resolved || awaited.outcome)) view.awaiting = null;
    // The record counts a run's turns when it completes; the events say
    // which turn the run is in now.
    view.turns = Math.max(view.turns || 0, ev.turns);
    drawStatus(statusEl, facts, view);
    controls.hidden = view.status === 'completed' || view.status === 'failed';
  };

  const notFound = (e) => {
    controls.hidden = true;
    streamState.dataset.state = 'missing';
    streamState.textContent = e.status === 400 ? 'not a run id' : 'no such run';
    clear(statusEl).append(chip('', 'unknown'));
    clear(facts);
    const again = e.status === 404 ? h('p', {class: 'muted'}, `Checking again every ${STATUS_MS / 1000} s: a run submitted with this id shows here.`) : null;
    clear(missing).append(errorBox(e, 'No such run'), again, h('p', {}, h('a', {href: '#/runs'}, 'Back to the runs')));
    missing.hidden = false;
    if (e.status !== 404) stop();
  };

  drawControls(controls, answer, id, tl, () => ev.lastSeq);
  refresh();
  let timer = setInterval(refresh, STATUS_MS);
  const stop = () => { clearInterval(timer); timer = null; };
  return () => { stop(); stream?.stop(); ctl.abort(); };
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

// The messages injected from this browser that no turn has taken yet, by
// run, kept across reloads (localStorage): a reload still says what became
// of them.
const PENDING = 'lovia.console.pending.';
function pendingOf(id) {
  try { return JSON.parse(localStorage.getItem(PENDING + id)) || []; } catch { return []; }
}
function setPending(id, list) {
  if (list.length) localStorage.setItem(PENDING + id, JSON.stringify(list.slice(-20)));
  else localStorage.removeItem(PENDING + id);
}

function drawControls(el, out, id, tl, lastSeq) {
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
    if (!content.trim()) {
      clear(out).append(errorBox({type: 'InvalidRequest', message: 'the message is empty', hint: 'type what the run should hear at its next turn'}, 'Nothing injected'));
      msg.focus();
      return;
    }
    clear(out);
    const after = lastSeq(); // a turn that takes it comes after the events shown now
    const send = inject.querySelector('button[type="submit"]');
    send.disabled = true; // one message per click, however many clicks
    try {
      const rep = await post('/v1/runs/' + enc(id) + '/messages', {content});
      msg.value = '';
      const p = {token: rep.token, content, after};
      setPending(id, [...pendingOf(id).filter((q) => q.token !== p.token), p]);
      track(p);
    } catch (err) {
      clear(out).append(errorBox(err, 'The message was not injected'));
    }
    send.disabled = false;
  });
  const done = (p) => setPending(id, pendingOf(id).filter((q) => q.token !== p.token));
  const withdrawIt = async (p) => (await del('/v1/runs/' + enc(id) + '/messages/' + enc(p.token)))?.removed;
  // track shows a message waiting for a turn, and what became of it.
  const track = (p) => {
    const withdraw = h('button', {type: 'button', class: 'ghost small'}, 'withdraw');
    const item = h('span', {class: 'badge pending', 'data-token': p.token}, 'queued: ' + p.content + ' ', withdraw);
    let forget = () => {};
    withdraw.addEventListener('click', async () => {
      withdraw.disabled = true;
      try {
        const removed = await withdrawIt(p);
        if (removed) {
          forget(); // no turn will take it
          done(p);
        }
        item.replaceWith(h('span', {class: 'badge'}, removed ? 'withdrawn' : 'already delivered'));
      } catch (err) {
        withdraw.disabled = false;
        item.append(errorBox(err));
      }
    });
    pending.append(item);
    forget = tl.onInjected(p.content, {
      after: p.after,
      delivered: () => { item.remove(); done(p); },
      // The run ended without it: the timeline says so, with the withdraw.
      // It stays listed here while it waits in the mailbox.
      undelivered: (env, notice) => {
        item.remove();
        const w = h('button', {type: 'button', class: 'ghost small withdraw'}, 'withdraw');
        w.addEventListener('click', async () => {
          w.disabled = true;
          try {
            const removed = await withdrawIt(p);
            done(p);
            w.replaceWith(h('span', {class: 'badge'}, removed ? 'withdrawn' : 'not in the mailbox any more'));
          } catch (err) {
            w.disabled = false;
            notice.append(errorBox(err, 'The message was not withdrawn'));
          }
        });
        notice.append(w);
      },
    });
  };
  for (const p of pendingOf(id)) track(p);
  el.append(inject, cancel, reason, confirm);
}

