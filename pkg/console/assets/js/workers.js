// The workers page: the live workers (GET /v1/workers), refreshed.

import {get} from './api.js';
import {ago, clear, errorBox, h, when} from './dom.js';

const REFRESH_MS = 3000;

export function render(main) {
  const ctl = new AbortController();
  const out = h('div', {id: 'workers'});
  const updated = h('span', {class: 'muted'});
  main.append(h('div', {class: 'page-head'}, h('h1', {}, 'Workers'), updated), out);
  const load = async () => {
    try {
      const rep = await get('/v1/workers', {signal: ctl.signal});
      const ws = rep.workers || [];
      clear(out);
      if (!ws.length) {
        out.append(h('p', {class: 'muted empty'}, 'No live worker. Start one: lovia worker --agents agents.yaml'));
      } else {
        out.append(h('table', {class: 'workers'},
          h('thead', {}, h('tr', {}, ['worker', 'agents', 'runs in flight', 'version', 'started', 'seen'].map((c) => h('th', {}, c)))),
          h('tbody', {}, ws.map((w) => h('tr', {'data-worker': w.id},
            h('td', {class: 'mono'}, w.id),
            h('td', {}, (w.agents || []).join(', ')),
            h('td', {}, `${w.in_flight ?? 0} / ${w.concurrency || '?'}`),
            h('td', {}, w.version || ''),
            h('td', {title: when(w.started_at)}, ago(w.started_at)),
            h('td', {title: when(w.seen_at)}, ago(w.seen_at)))))));
      }
      updated.textContent = 'updated ' + new Date().toLocaleTimeString();
    } catch (e) {
      if (e.name !== 'AbortError') clear(out).append(errorBox(e, 'Listing the workers failed'));
    }
  };
  load();
  const timer = setInterval(load, REFRESH_MS);
  return () => { clearInterval(timer); ctl.abort(); };
}
