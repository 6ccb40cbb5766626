// The sessions page: a conversation's segments (GET /v1/sessions/{id}),
// one per run that appended to it, with their transcript entries.

import {enc, get} from './api.js';
import {clear, errorBox, h, pretty} from './dom.js';

export function render(main, {id}) {
  const ctl = new AbortController();
  const form = h('form', {class: 'inline', id: 'session-open'},
    h('input', {name: 'session', id: 'session-id', placeholder: 'session id', required: true, value: id}),
    h('button', {type: 'submit'}, 'Open'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = '#/sessions/' + enc(form.session.value.trim());
  });
  const out = h('div', {id: 'session'});
  main.append(h('div', {class: 'page-head'}, h('h1', {}, 'Sessions'), form), out);
  if (!id) {
    out.append(h('p', {class: 'muted'}, 'A session is a conversation: each run submitted with its session_id appends a segment. Enter a session id, or follow the session link of a run.'));
    return () => ctl.abort();
  }
  get('/v1/sessions/' + enc(id), {signal: ctl.signal}).then((rep) => {
    const segs = rep.segments || [];
    out.append(h('h2', {}, `Session ${rep.session_id} · ${segs.length} segment${segs.length === 1 ? '' : 's'}`));
    if (!segs.length) out.append(h('p', {class: 'muted'}, 'No segments yet: no run of this session has finished a turn.'));
    segs.forEach((seg, i) => out.append(segment(seg, i)));
  }).catch((e) => {
    if (e.name !== 'AbortError') out.append(errorBox(e, 'Reading the session failed'));
  });
  return () => ctl.abort();
}

function segment(seg, i) {
  const results = new Map();
  for (const e of seg.entries || []) if (e.kind === 'tool_result') results.set(e.call_id, e);
  const body = h('div', {class: 'timeline'});
  for (const e of seg.entries || []) {
    switch (e.kind) {
      case 'input':
        body.append(h('div', {class: 'ev bubble user'}, h('div', {class: 'who'}, e.role || 'user'), h('div', {class: 'text'}, e.content || '')));
        break;
      case 'assistant_text':
        body.append(h('div', {class: 'ev bubble assistant'}, h('div', {class: 'who'}, 'assistant'), h('div', {class: 'text'}, e.text || '')));
        break;
      case 'reasoning':
        body.append(h('div', {class: 'ev reasoning'}, h('details', {}, h('summary', {}, 'reasoning'), h('pre', {}, e.text || ''))));
        break;
      case 'tool_call': {
        const r = results.get(e.call_id);
        body.append(h('div', {class: 'ev tool', 'data-call-id': e.call_id},
          h('div', {class: 'tool-head'}, h('span', {class: 'tool-name'}, e.name), h('span', {class: 'mono muted'}, e.call_id)),
          h('pre', {class: 'args'}, pretty(e.arguments || '{}')),
          r ? h('div', {class: 'tool-result' + (r.is_error ? ' is-error' : '')}, h('div', {class: 'label'}, r.is_error ? 'error' : 'result'), h('pre', {}, r.output || '')) : null));
        break;
      }
      case 'tool_result':
        break; // drawn with its call
      default:
        body.append(h('div', {class: 'ev notice'}, e.kind));
    }
  }
  return h('section', {class: 'panel segment', 'data-run-id': seg.run_id},
    h('h3', {}, `#${i + 1} · run `, h('a', {href: '#/runs/' + enc(seg.run_id), class: 'mono'}, seg.run_id)),
    seg.meta && Object.keys(seg.meta).length ? h('details', {}, h('summary', {}, 'meta'), h('pre', {}, pretty(seg.meta))) : null,
    body);
}
