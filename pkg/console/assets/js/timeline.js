// Timeline renders a run's events (docs/protocol.md#event-types) as they
// arrive: streaming text as it streams (cleared on output_discarded), tool
// calls paired with their results by call id, approvals with their
// buttons, handoffs, compactions, the todo list, and the outcome.
//
// A tool call's card shows a state derived from everything known about the
// call — its events and the reply to a decision sent from this page — by
// precedence, not from whichever arrived last: the approve reply races the
// event stream, and a later event never loses to an earlier reply.

import {chip, clear, errorBox, h, pretty, when} from './dom.js';

// The event types the timeline draws; others show as a plain notice.
const HANDLED = new Set(['run_started', 'run_resumed', 'turn_started', 'turn_ended', 'text_delta', 'reasoning_delta',
  'output_discarded', 'message_completed', 'user_message_injected', 'tool_call_started', 'tool_call_completed',
  'tool_call_failed', 'approval_required', 'approval_resolved', 'handoff_occurred', 'context_compacted',
  'run_completed', 'run_failed']);

// decided names a decision: an ask_human call is answered or declined,
// any other approved or rejected.
const decided = (tool, decision) => tool === 'ask_human'
  ? (decision === 'approve' ? 'answered' : 'declined')
  : (decision === 'approve' ? 'approved' : 'rejected');

export class Timeline {
  // el is the timeline's container; opts.todo the todo panel; opts.decide(callID,
  // decision, reason) sends a decision; opts.onTerminal() runs after the terminal event.
  constructor(el, opts) {
    this.el = el;
    this.opts = opts;
    this.calls = new Map(); // call id → its card and what is known of the call (see call)
    this.cur = {text: null, reasoning: null}; // the blocks deltas append to
    this.unsettled = []; // streamed blocks no message_completed has confirmed yet
    this.injected = []; // [{content, after, delivered, undelivered}] waiting for user_message_injected
    this.undelivered = []; // [{content, el}] messages a submission ended without
    this.umis = []; // [{env, content, claimed}] the messages turns took
    this.terminal = null; // {env, how} the last terminal event
    this.turn = null; // the turn of the last divider drawn
    this.retried = false; // streamed output was discarded since that divider
  }

  // onInjected waits for a message injected from this page once the
  // event after seq `after` was shown: delivered(env) runs when a later
  // turn folds it in, undelivered(env, notice) when a later terminal event
  // comes first. It returns a function that stops the wait (the message
  // was withdrawn).
  onInjected(content, {after, delivered, undelivered}) {
    const p = {content, after: after || 0, delivered, undelivered};
    // The events may have told already: the inject's reply can come after
    // the turn that took the message, or after the run's end.
    const u = this.umis.find((m) => !m.claimed && m.content === content && m.env.seq > p.after);
    if (u) {
      u.claimed = true;
      delivered(u.env);
      return () => {};
    }
    if (this.terminal && this.terminal.env.seq > p.after) {
      this.undeliver(p, this.terminal.env, this.terminal.how);
      return () => {};
    }
    this.injected.push(p);
    return () => { this.injected = this.injected.filter((q) => q !== p); };
  }

  add(env) {
    const d = env.data || {};
    this.el.dataset.lastSeq = String(env.seq);
    if (HANDLED.has(env.type)) this[env.type](d, env);
    else this.notice(env, 'event ' + env.type);
    this.el.dataset.types = (this.el.dataset.types ? this.el.dataset.types + ' ' : '') + env.type;
  }

  item(env, cls, ...children) {
    const el = h('div', {class: 'ev ' + cls, 'data-seq': env.seq, 'data-type': env.type, title: when(env.time)}, children);
    this.el.append(el);
    return el;
  }

  notice(env, text, extra) {
    return this.item(env, 'notice', h('span', {class: 'what'}, text), extra || null);
  }

  run_started(d, env) {
    this.notice(env, `started on ${d.worker || 'a worker'}${d.from_checkpoint ? ', from the stored checkpoint' : ''}`);
    for (const e of d.input || []) {
      if (e.kind === 'input') this.item(env, 'bubble user', h('div', {class: 'who'}, e.role || 'user'), h('div', {class: 'text'}, e.content || ''));
    }
  }

  run_resumed(d, env) {
    // What streamed before stays until output_discarded voids it. A call
    // under way lost its worker: the resumed run runs it again.
    this.endTurn();
    for (const t of this.calls.values()) {
      if (t.started && !t.outcome) {
        t.interrupted = true;
        this.draw(t);
      }
    }
    this.notice(env, `resumed on ${d.worker || 'another worker'} — attempt ${d.attempt ?? '?'}, from turn ${d.from_turn ?? '?'}`).classList.add('resumed');
  }

  // A turn runs again under its number after a resume or a retry: its
  // divider is drawn again only when output was discarded ("again").
  turn_started(d, env) {
    this.endTurn();
    const n = d.turn ?? env.turn;
    if (n === this.turn && !this.retried) return;
    this.item(env, 'turn', `turn ${n}${n === this.turn ? ' again' : ''} · ${env.agent}`);
    this.turn = n;
    this.retried = false;
  }

  turn_ended() { /* the next turn_started or message_completed says enough */ }

  // Deltas append to one text node (appendData), not by rewriting the text.
  text_delta(d, env) {
    if (!this.cur.text) {
      this.cur.text = h('div', {class: 'text'}, document.createTextNode(''));
      this.unsettled.push(this.item(env, 'bubble assistant streaming', h('div', {class: 'who'}, env.agent), this.cur.text));
    }
    this.cur.text.firstChild.appendData(d.delta || '');
  }

  reasoning_delta(d, env) {
    if (!this.cur.reasoning) {
      this.cur.reasoning = h('pre', {class: 'text'}, document.createTextNode(''));
      this.unsettled.push(this.item(env, 'reasoning streaming', h('details', {open: true}, h('summary', {}, 'reasoning'), this.cur.reasoning)));
    }
    this.cur.reasoning.firstChild.appendData(d.delta || '');
  }

  // output_discarded voids what streamed since the last assembled
  // message: a retried turn, or the turn a crashed worker was streaming.
  // With nothing streamed since (a parked run's resume, a resume after the
  // turn's message was assembled) nothing was discarded, and it says so
  // by saying nothing.
  output_discarded(d, env) {
    const void_ = this.unsettled;
    this.unsettled = [];
    this.cur = {text: null, reasoning: null};
    if (!void_.length) return;
    for (const el of void_) el.remove();
    this.retried = true;
    this.notice(env, 'streamed output discarded (the turn is tried again)').classList.add('discarded');
  }

  message_completed(d, env) {
    const texts = [];
    const reasoning = [];
    for (const e of d.entries || []) {
      if (e.kind === 'assistant_text') texts.push(e.text || '');
      else if (e.kind === 'reasoning') reasoning.push(e.text || '');
      else if (e.kind === 'tool_call') this.call(env, {id: e.call_id, name: e.name, arguments: e.arguments});
    }
    // The assembled message is authoritative: it replaces what streamed.
    this.settle('reasoning', reasoning.join('\n'), env, () => h('details', {}, h('summary', {}, 'reasoning'), h('pre', {class: 'text'})));
    this.settle('text', texts.join(''), env, () => [h('div', {class: 'who'}, env.agent), h('div', {class: 'text'})]);
    this.cur = {text: null, reasoning: null};
    this.unsettled = [];
  }

  settle(kind, text, env, make) {
    let box = this.cur[kind];
    if (!text && !box) return;
    if (!box) {
      const el = this.item(env, kind === 'text' ? 'bubble assistant' : 'reasoning', make());
      box = el.querySelector('.text');
    }
    if (text) box.textContent = text;
    box.closest('.ev').classList.remove('streaming');
  }

  endTurn() {
    for (const k of ['text', 'reasoning']) this.cur[k]?.closest('.ev')?.classList.remove('streaming');
    this.cur = {text: null, reasoning: null};
  }

  user_message_injected(d, env) {
    this.item(env, 'bubble user injected', h('div', {class: 'who'}, 'injected'), h('div', {class: 'text'}, d.content || ''));
    const m = {env, content: d.content, claimed: false};
    this.umis.push(m);
    const i = this.injected.findIndex((p) => p.content === d.content && env.seq > p.after);
    if (i >= 0) {
      m.claimed = true;
      this.injected.splice(i, 1)[0].delivered(env);
    }
    // A message an earlier submission ended without, delivered by a later one.
    const u = this.undelivered.findIndex((p) => p.content === d.content);
    if (u >= 0) {
      m.claimed = true;
      const {el} = this.undelivered.splice(u, 1)[0];
      el.classList.replace('undelivered', 'delivered-later');
      clear(el.querySelector('.what')).append(`message delivered later, in turn ${d.turn ?? env.turn}: “${d.content}”`);
      el.querySelector('.why')?.remove();
      el.querySelector('.withdraw')?.remove();
    }
  }

  // ended settles what the submission's end leaves open: calls without an
  // outcome and messages no turn took.
  ended(env, how) {
    this.endTurn();
    this.terminal = {env, how};
    for (const t of this.calls.values()) {
      if (!t.outcome) {
        t.ended = how;
        this.draw(t);
      }
    }
    const left = this.injected.filter((p) => env.seq > p.after);
    this.injected = this.injected.filter((p) => env.seq <= p.after);
    for (const p of left) this.undeliver(p, env, how);
  }

  // undeliver reports a message the submission that ended with env never
  // took.
  undeliver(p, env, how) {
    const why = how === 'completed'
      ? 'the run completed before another turn took it; it is left in the run\'s mailbox, where nothing reads it: withdraw it, or send it to a new run'
      : 'the run ended before a turn took it; it waits in the run\'s mailbox: resubmitting the run (if_run_exists: resume) delivers it, or withdraw it';
    const el = this.notice(env, `message not delivered: “${p.content}”`, h('div', {class: 'why'}, why));
    el.classList.add('undelivered');
    this.undelivered.push({content: p.content, el});
    p.undelivered(env, el);
  }

  // call returns the card of a tool call, made on first sight, after
  // update(card) records what the event says of the call.
  call(env, c, update) {
    let t = this.calls.get(c.id);
    if (!t) {
      const argText = pretty(c.arguments || '{}');
      const args = h('pre', {class: 'args'}, argText);
      const body = h('div', {class: 'tool-body'});
      const actions = h('div', {class: 'actions'}); // the approval's controls
      const decision = h('div', {class: 'decision-box'});
      const stateEl = h('span', {class: 'tool-state'});
      const card = this.item(env, 'tool', h('div', {class: 'tool-head'}, h('span', {class: 'tool-name'}, c.name || 'tool'),
        h('span', {class: 'mono muted'}, c.id), stateEl), h('details', {open: argText.split('\n').length <= 6}, h('summary', {}, 'arguments'), args), actions, decision, body);
      card.dataset.callId = c.id;
      card.dataset.tool = c.name || '';
      // What is known of the call; draw derives the card from it.
      t = {card, body, actions, decision, stateEl, name: c.name, args: c.arguments,
        required: false, sent: null, resolved: null, started: false, interrupted: false, outcome: '', ended: ''};
      this.calls.set(c.id, t);
    }
    if (update) update(t);
    this.draw(t);
    return t;
  }

  // draw shows a call's state: its outcome first, then the run's end, then
  // the call running, then its decision, then the decision sent from here,
  // then the wait for one. The approval's buttons show only while the call
  // waits for a decision nobody has given.
  draw(t) {
    let state = 'requested';
    let label = 'requested';
    const rejected = t.resolved?.decision === 'reject';
    if (t.outcome === 'done') state = label = 'done';
    else if (t.outcome && rejected) {
      state = 'rejected';
      label = decided(t.name, 'reject');
    }
    else if (t.outcome) state = label = t.outcome;
    else if (t.ended) {
      state = t.ended === 'cancelled' ? 'cancelled' : 'unfinished';
      label = rejected ? decided(t.name, 'reject') : t.ended === 'cancelled' ? 'cancelled with the run' : t.ended === 'completed' ? 'no result' : 'no result: the run failed';
    } else if (t.started) {
      state = 'running';
      label = t.interrupted ? 'interrupted: its worker stopped; the resumed run runs it again' : 'running';
    } else if (t.resolved) {
      state = rejected ? 'rejected' : 'approved';
      label = decided(t.name, t.resolved.decision);
    } else if (t.sent?.accepted) {
      state = 'decided';
      label = decided(t.name, t.sent.decision) + ': waiting for the run to apply it';
    } else if (t.required) {
      state = 'awaiting approval';
      label = t.name === 'ask_human' ? 'awaiting an answer' : 'awaiting approval';
    }
    t.card.dataset.state = state;
    if (t.sent) t.card.dataset.sent = t.sent.decision; // the reply to this page's decision came
    t.stateEl.textContent = label;
    const waits = state === 'awaiting approval';
    t.card.classList.toggle('awaiting', waits);
    if (!waits && t.actions.querySelector('button')) clear(t.actions);
  }

  tool_call_started(d, env) {
    this.call(env, d.call || {}, (t) => { t.started = true; t.interrupted = false; t.ended = ''; });
  }

  tool_call_completed(d, env) {
    const c = d.call || {};
    const t = this.call(env, c, (u) => { u.outcome = d.is_error ? 'error' : 'done'; });
    t.body.append(h('div', {class: 'tool-result' + (d.is_error ? ' is-error' : '')}, h('div', {class: 'label'}, d.is_error ? 'error' : 'result'),
      h('pre', {}, d.output !== undefined && d.output !== '' ? pretty(d.output) : pretty(d.result))));
    if (c.name === 'todo_write' && !d.is_error && d.result && Array.isArray(d.result.todos)) this.todo(d.result.todos);
  }

  tool_call_failed(d, env) {
    const t = this.call(env, d.call || {}, (u) => { u.outcome = 'failed'; });
    t.body.append(errorBox(d.error || {}, 'The call failed'));
  }

  approval_required(d, env) {
    const c = d.call || {};
    // A resumed run asks again about a call it parked on, or one decided
    // before its worker stopped: the stored decision applies at once.
    const t = this.call(env, c, (u) => { u.required = true; u.ended = ''; });
    if (t.card.dataset.state !== 'awaiting approval' || t.actions.querySelector('button')) return;
    clear(t.actions);
    const send = async (decision, reason, buttons) => {
      buttons.forEach((b) => (b.disabled = true));
      try {
        const rep = await this.opts.decide(c.id, decision, reason);
        t.sent = {decision, accepted: Boolean(rep?.accepted)};
        if (!rep?.accepted) t.decision.append(h('div', {class: 'notice'}, 'not applied: an earlier decision for this call stands'));
        this.draw(t);
      } catch (e) {
        t.actions.append(errorBox(e, 'The decision was not sent'));
        buttons.forEach((b) => (b.disabled = false));
      }
    };
    if (c.name === 'ask_human') {
      let question = '';
      try { question = JSON.parse(c.arguments || '{}').question || ''; } catch { /* shown raw in the arguments */ }
      const answer = h('textarea', {class: 'answer', rows: 2, placeholder: 'your answer'});
      const ok = h('button', {type: 'button', class: 'approve'}, 'Answer');
      const no = h('button', {type: 'button', class: 'reject ghost'}, 'Decline');
      ok.addEventListener('click', () => answer.value.trim() ? send('approve', answer.value.trim(), [ok, no]) : answer.focus());
      no.addEventListener('click', () => send('reject', 'declined in the console', [ok, no]));
      t.actions.append(h('div', {class: 'question'}, question), answer, h('div', {class: 'buttons'}, ok, no));
      return;
    }
    const reason = h('input', {class: 'reason', placeholder: 'reason (optional)'});
    const ok = h('button', {type: 'button', class: 'approve'}, 'Approve');
    const no = h('button', {type: 'button', class: 'reject danger'}, 'Reject');
    ok.addEventListener('click', () => send('approve', reason.value, [ok, no]));
    no.addEventListener('click', () => send('reject', reason.value, [ok, no]));
    t.actions.append(h('div', {class: 'buttons'}, ok, no, reason));
  }

  approval_resolved(d, env) {
    const t = this.calls.get(d.call_id);
    const text = `${decided(t?.name, d.decision)}${d.reason ? ': ' + d.reason : ''}`;
    if (!t) {
      this.notice(env, `call ${d.call_id} ${text}`);
      return;
    }
    t.resolved = {decision: d.decision, reason: d.reason || ''};
    clear(t.decision).append(h('div', {class: 'decision decision-' + d.decision, 'data-seq': env.seq}, text));
    this.draw(t);
  }

  handoff_occurred(d, env) {
    this.notice(env, `handoff: ${d.from_agent || '?'} → ${d.to_agent || '?'}`).classList.add('handoff');
  }

  context_compacted(d, env) {
    const n = d.notice || {};
    this.notice(env, `context compacted (${n.reason || 'limit'}${n.reactive ? ', after the model refused' : ''}): ` +
      `${n.tokens_before ?? '?'} → ${n.tokens_after ?? '?'} tokens, ${d.entries_before ?? '?'} → ${d.entries_after ?? '?'} entries`,
    n.summary ? h('details', {}, h('summary', {}, 'summary'), h('pre', {}, n.summary)) : null).classList.add('compacted');
  }

  run_completed(d, env) {
    this.ended(env, 'completed');
    const u = d.usage || {};
    this.item(env, 'outcome completed', h('div', {class: 'outcome-head'}, chip('completed'),
      ` ${d.turns ?? '?'} turns · ${u.input_tokens ?? 0} tokens in, ${u.output_tokens ?? 0} out${d.final_agent ? ' · final agent ' + d.final_agent : ''}${d.finish_reason ? ' · ' + d.finish_reason : ''}`),
    h('pre', {class: 'output'}, typeof d.output === 'string' ? d.output : pretty(d.output)));
    this.opts.onTerminal();
  }

  run_failed(d, env) {
    this.ended(env, /Cancel/.test(d.error?.type || '') ? 'cancelled' : 'failed');
    this.item(env, 'outcome failed', h('div', {class: 'outcome-head'}, chip('failed')), errorBox(d.error || {}));
    this.opts.onTerminal();
  }

  todo(todos) {
    const panel = this.opts.todo;
    const ol = clear(panel.querySelector('ol'));
    for (const t of todos) {
      ol.append(h('li', {class: 'todo-' + t.status, 'data-status': t.status},
        h('span', {class: 'mark'}, t.status === 'completed' ? '✓' : t.status === 'in_progress' ? '▶' : '○'), ' ',
        t.status === 'in_progress' && t.active_form ? t.active_form : t.content));
    }
    panel.hidden = false;
  }
}
