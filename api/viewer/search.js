// Search: the hybrid search with its mode and filters; each stream's rank shown per hit.
import { h, when } from './dom.js';
import { post } from './api.js';

const KINDS = ['observation', 'summary', 'memory'];
const MODES = [['hybrid', 'Hybrid (keyword + semantic + graph)'], ['keyword', 'Keyword (BM25)'], ['semantic', 'Semantic (vectors)']];

export function sourceLink(hit) {
  if (hit.kind === 'memory') return `#/memories/${encodeURIComponent(hit.id)}`;
  if (hit.kind === 'summary' || !hit.id.startsWith('obs_')) return `#/sessions/${encodeURIComponent(hit.sessionId)}`;
  return `#/observations/${encodeURIComponent(hit.id)}`;
}

export default async function search(view, route) {
  const p = route.params;
  const q = h('input', { type: 'search', name: 'q', class: 'wide', value: p.get('q') || '', placeholder: 'What are you looking for?', 'aria-label': 'Search query' });
  const mode = h('select', { name: 'mode' }, MODES.map(([v, label]) => h('option', { value: v, text: label, selected: v === (p.get('mode') || 'hybrid') })));
  const project = h('input', { type: 'text', name: 'project', value: p.get('project') || '', placeholder: 'all projects' });
  const agent = h('input', { type: 'text', name: 'agent', value: p.get('agent') || '', placeholder: 'any agent' });
  const kind = h('select', { name: 'kind' }, h('option', { value: '', text: 'any kind' }), KINDS.map((k) => h('option', { value: k, text: k, selected: k === p.get('kind') })));
  const since = h('input', { type: 'datetime-local', name: 'since', value: p.get('since') || '' });
  const until = h('input', { type: 'datetime-local', name: 'until', value: p.get('until') || '' });
  const results = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'bar', role: 'search', on: { submit(e) {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [k, el] of Object.entries({ q, mode, project, agent, kind, since, until })) if (el.value) next.set(k, el.value);
    location.hash = `#/search?${next}`;
  } } },
  h('label', {}, 'Query', q), h('label', {}, 'Mode', mode), h('label', {}, 'Project', project),
  h('label', {}, 'Agent', agent), h('label', {}, 'Kind', kind), h('label', {}, 'From', since),
  h('label', {}, 'To', until), h('button', { class: 'primary', type: 'submit', text: 'Search' }));
  view.append(h('h1', { text: 'Search' }), form, results);
  q.focus();
  if (!q.value.trim()) {
    results.append(h('p', { class: 'muted', text: 'Search observations, session summaries and memories. Each hit shows where each stream ranked it.' }));
    return null;
  }
  const body = { query: q.value.trim(), mode: mode.value, project: project.value.trim() || '*', limit: 30 };
  if (agent.value.trim()) body.agentId = agent.value.trim();
  if (kind.value) body.kinds = [kind.value];
  // the picker's local time, sent as an instant; "to" takes in its whole minute
  if (since.value) body.since = new Date(since.value).toISOString();
  if (until.value) body.until = new Date(new Date(until.value).getTime() + 60000).toISOString();
  let found;
  try {
    found = await post('v1/search', body);
  } catch (err) {
    results.append(h('p', { class: 'error', role: 'alert', text: err.message }));
    return null;
  }
  const items = found.items;
  results.append(h('p', { class: 'muted' },
    `${items.length} hit(s), ${found.mode} over ${(found.streams || []).join(' + ')}`,
    found.reranker ? `, reranked by ${found.reranker}` : '',
    found.degraded ? ` — degraded: ${Object.entries(found.degraded).map(([k, v]) => `${k}: ${v}`).join('; ')}` : ''));
  results.append(h('ol', { class: 'list', 'aria-label': 'Results' }, items.map((hit, i) => h('li', {},
    h('div', { class: 'row' },
      h('span', { class: 'muted', text: `${i + 1}.` }),
      h('span', { class: 'tag', text: hit.kind }),
      h('a', { class: 'title grow', href: sourceLink(hit), text: hit.title }),
      h('span', { class: 'muted', text: `${hit.project} · ${when(hit.createdAt)}` })),
    h('div', { class: 'ranks', text: 'ranks: ' + Object.entries(hit.ranks || {}).map(([s, r]) => `${s} #${r}`).join(' · ') + ` · score ${hit.score.toFixed(3)}` }),
    h('pre', { text: hit.text.length > 600 ? hit.text.slice(0, 600) + '…' : hit.text })))));
  return null;
}
