// The agents page: the agents the live fleet serves (GET /v1/agents), with
// their instructions, tools and the tools' JSON Schemas.

import {get} from './api.js';
import {errorBox, h, pretty} from './dom.js';

export function render(main) {
  const ctl = new AbortController();
  const out = h('div', {id: 'agents', class: 'cards'});
  main.append(h('div', {class: 'page-head'}, h('h1', {}, 'Agents')), out);
  get('/v1/agents', {signal: ctl.signal}).then((rep) => {
    const agents = rep.agents || [];
    if (!agents.length) out.append(h('p', {class: 'muted empty'}, 'No live worker serves an agent. Start one: lovia worker --agents agents.yaml'));
    for (const a of agents) out.append(card(a));
  }).catch((e) => {
    if (e.name !== 'AbortError') out.append(errorBox(e, 'Listing the agents failed'));
  });
  return () => ctl.abort();
}

function card(a) {
  const schemas = new Map((a.schemas || []).map((s) => [s.name, s]));
  // The declared tools, then those only the schemas name (a plugin's).
  const tools = [...new Set([...(a.tools || []), ...schemas.keys()])];
  return h('section', {class: 'panel agent', 'data-agent': a.name},
    h('h2', {}, a.name, ' ', h('span', {class: 'muted small'}, a.model || '')),
    a.instructions ? h('div', {class: 'instructions'}, h('div', {class: 'label'}, 'instructions'), h('pre', {}, a.instructions)) : null,
    a.handoffs?.length ? h('p', {}, 'hands off to ', a.handoffs.join(', ')) : null,
    h('div', {class: 'label'}, tools.length ? `tools (${tools.length})` : 'no tools'),
    h('ul', {class: 'tools'}, tools.map((name) => {
      const s = schemas.get(name);
      return h('li', {'data-tool': name}, h('span', {class: 'tool-name'}, name), s?.description ? h('span', {class: 'muted'}, ' — ' + s.description) : null,
        s?.parameters ? h('details', {}, h('summary', {}, 'schema'), h('pre', {}, pretty(s.parameters))) : null);
    })));
}
