// Timeline renders a run's events (docs/protocol.md#event-types) as they
// arrive: streaming text as it streams (cleared on output_discarded), tool
// calls paired with their results by call id, approvals with their
// buttons, handoffs, compactions, the todo list, and the outcome.

import {chip, clear, errorBox, h, pretty, when} from './dom.js';

// The event types the timeline draws; others show as a plain notice.
const HANDLED = new Set(['run_started', 'run_resumed', 'turn_started', 'turn_ended', 'text_delta', 'reasoning_delta',
  'output_discarded', 'message_completed', 'user_message_injected', 'tool_call_started', 'tool_call_completed',
  'tool_call_failed', 'approval_required', 'approval_resolved', 'handoff_occurred', 'context_compacted',
  'run_completed', 'run_failed']);

export class Timeline {
  // el is the timeline's container; opts.todo the todo panel; opts.decide(callID,
  // decision, reason) sends a decision; opts.onTerminal() runs after the terminal event.
  constructor(el, opts) {
    this.el = el;
    this.opts = opts;
    this.calls = new Map(); // call id → {card, body, state, actions}
    this.cur = {text: null, reasoning: null}; // the blocks deltas append to
    this.unsettled = []; // streamed blocks no message_completed has confirmed yet
    this.injected = []; // [{content, done}] waiting for user_message_injected
  }

  onInjected(content, done) { this.injected.push({content, done}); }

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
    // What streamed before stays until output_discarded voids it.
    this.endTurn();
    this.notice(env, `resumed on ${d.worker || 'another worker'} — attempt ${d.attempt ?? '?'}, from turn ${d.from_turn ?? '?'}`).classList.add('resumed');
  }

  turn_started(d, env) {
    this.endTurn();
    this.item(env, 'turn', `turn ${d.turn ?? env.turn} · ${env.agent}`);
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
  output_discarded(d, env) {
    for (const el of this.unsettled) el.remove();
    this.unsettled = [];
    this.cur = {text: null, reasoning: null};
    this.notice(env, 'streamed output discarded (the turn is tried again)').classList.add('discarded');
  }

  message_completed(d, env) {
    const texts = [];
    const reasoning = [];
    for (const e of d.entries || []) {
      if (e.kind === 'assistant_text') texts.push(e.text || '');
      else if (e.kind === 'reasoning') reasoning.push(e.text || '');
      else if (e.kind === 'tool_call') this.call(env, {id: e.call_id, name: e.name, arguments: e.arguments}, 'requested');
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
    const i = this.injected.findIndex((p) => p.content === d.content);
    if (i >= 0) this.injected.splice(i, 1)[0].done();
  }

  // call returns the card of a tool call, made on first sight.
  call(env, c, state) {
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
      t = {card, body, actions, decision, stateEl, name: c.name, args: c.arguments};
      this.calls.set(c.id, t);
    }
    if (state) {
      t.card.dataset.state = state;
      t.stateEl.textContent = state;
    }
    return t;
  }

  tool_call_started(d, env) { this.call(env, d.call || {}, 'running'); }

  tool_call_completed(d, env) {
    const c = d.call || {};
    const t = this.call(env, c, d.is_error ? 'error' : 'done');
    clear(t.actions);
    t.body.append(h('div', {class: 'tool-result' + (d.is_error ? ' is-error' : '')}, h('div', {class: 'label'}, d.is_error ? 'error' : 'result'),
      h('pre', {}, d.output !== undefined && d.output !== '' ? pretty(d.output) : pretty(d.result))));
    if (c.name === 'todo_write' && !d.is_error && d.result && Array.isArray(d.result.todos)) this.todo(d.result.todos);
  }

  tool_call_failed(d, env) {
    const t = this.call(env, d.call || {}, 'failed');
    t.body.append(errorBox(d.error || {}, 'The call failed'));
  }

  approval_required(d, env) {
    const c = d.call || {};
    const t = this.call(env, c, 'awaiting approval');
    t.card.classList.add('awaiting');
    clear(t.actions);
    const send = async (decision, reason, buttons) => {
      buttons.forEach((b) => (b.disabled = true));
      try {
        const rep = await this.opts.decide(c.id, decision, reason);
        if (!rep.accepted) t.actions.append(h('div', {class: 'notice'}, 'not applied: an earlier decision for this call stands'));
        else t.stateEl.textContent = decision === 'approve' ? 'approved, running' : 'rejected';
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
    const text = `${d.decision === 'approve' ? 'approved' : 'rejected'}${d.reason ? ': ' + d.reason : ''}`;
    if (!t) {
      this.notice(env, `call ${d.call_id} ${text}`);
      return;
    }
    t.card.classList.remove('awaiting');
    clear(t.actions);
    clear(t.decision).append(h('div', {class: 'decision decision-' + d.decision, 'data-seq': env.seq}, text));
    t.card.dataset.state = d.decision === 'approve' ? 'approved' : 'rejected';
    t.stateEl.textContent = t.card.dataset.state;
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
    this.endTurn();
    const u = d.usage || {};
    this.item(env, 'outcome completed', h('div', {class: 'outcome-head'}, chip('completed'),
      ` ${d.turns ?? '?'} turns · ${u.input_tokens ?? 0} tokens in, ${u.output_tokens ?? 0} out${d.final_agent ? ' · final agent ' + d.final_agent : ''}${d.finish_reason ? ' · ' + d.finish_reason : ''}`),
    h('pre', {class: 'output'}, typeof d.output === 'string' ? d.output : pretty(d.output)));
    this.opts.onTerminal();
  }

  run_failed(d, env) {
    this.endTurn();
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
