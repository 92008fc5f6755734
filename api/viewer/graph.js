// Graph: an entity and its neighbourhood, drawn as SVG (no library), clickable, with the
// observations about it.
import { h, svg, when } from './dom.js';
import { post } from './api.js';
import { sourceLink } from './search.js';

const COLOURS = { file: '#3b5bdb', symbol: '#2b8a3e', error: '#c92a2a', command: '#e67700', package: '#862e9c', concept: '#0b7285', session: '#5f6b7a', person: '#d6336c' };

function layout(center, neighbours, width, height) {
  // the centre in the middle, neighbours on rings by depth, spread evenly by angle
  const cx = width / 2, cy = height / 2;
  const rings = [[], [], []];
  for (const n of neighbours) rings[Math.min(n.depth || 1, 2)].push(n);
  const placed = [{ ...center, x: cx, y: cy, center: true }];
  rings.forEach((ring, depth) => {
    const radius = Math.min(width, height) * (depth === 1 ? 0.33 : 0.46);
    ring.forEach((n, i) => {
      const angle = (2 * Math.PI * i) / ring.length + depth * 0.3;
      placed.push({ ...n, x: cx + radius * Math.cos(angle) * (width / height > 1.4 ? 1.35 : 1), y: cy + radius * Math.sin(angle) });
    });
  });
  return placed;
}

export default async function graph(view, route) {
  const p = route.params;
  const entity = h('input', { type: 'text', name: 'entity', value: p.get('entity') || '', placeholder: 'a file, symbol, error, command…', class: 'wide' });
  const project = h('input', { type: 'text', name: 'project', value: p.get('project') || '', placeholder: 'all projects' });
  const out = h('div');
  view.append(h('h1', { text: 'Graph' }),
    h('form', { class: 'bar', on: { submit(e) {
      e.preventDefault();
      const next = new URLSearchParams();
      if (entity.value.trim()) next.set('entity', entity.value.trim());
      if (project.value.trim()) next.set('project', project.value.trim());
      location.hash = `#/graph?${next}`;
    } } }, h('label', {}, 'Entity', entity), h('label', {}, 'Project', project), h('button', { class: 'primary', type: 'submit', text: 'Show' })),
    out);
  if (!entity.value.trim()) {
    out.append(h('p', { class: 'muted', text: 'Name a file, symbol, error type, command or package the agents worked with.' }));
    entity.focus();
    return null;
  }
  const found = await post('v1/graph/query', { entity: entity.value.trim(), project: project.value.trim() || '*', limit: 20 });
  const center = found.entities?.[0];
  if (!center) {
    out.append(h('p', { class: 'muted', text: `Nothing in the graph is called “${entity.value.trim()}”.` }));
    return null;
  }
  const neighbours = (found.neighbours || []).slice(0, 40);
  // drawn at the width it is shown at, so a phone gets readable labels, not a shrunk picture
  const width = Math.round(Math.min(Math.max(view.clientWidth || 960, 320), 960));
  const height = width < 600 ? 360 : 460;
  const nodes = layout(center, neighbours, width, height);
  const go = (n) => {
    const next = new URLSearchParams({ entity: n.name });
    if (project.value.trim()) next.set('project', project.value.trim());
    location.hash = `#/graph?${next}`;
  };
  const picture = svg('svg', { class: 'graph', viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': `${center.name} and ${neighbours.length} neighbours` },
    nodes.slice(1).map((n) => {
      const from = n.via && n.depth > 1 ? nodes.find((m) => m.name === n.via) || nodes[0] : nodes[0];
      return svg('line', { x1: from.x, y1: from.y, x2: n.x, y2: n.y });
    }),
    nodes.map((n) => svg('g', { class: `node ${n.center ? 'center' : ''}`, tabindex: 0, role: 'link', 'aria-label': `${n.type} ${n.name}${n.relation ? `, ${n.relation}` : ''}`, on: {
      click: () => go(n), keydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); go(n); } } } },
    svg('title', { text: `${n.type}: ${n.name}${n.relation ? ` (${n.relation}, weight ${n.weight})` : ''}` }),
    svg('circle', { cx: n.x, cy: n.y, r: n.center ? 14 : 8 + Math.min(n.weight || 1, 6), fill: COLOURS[n.type] || '#868e96' }),
    svg('text', { x: n.x + (n.center ? 18 : 14), y: n.y + 4, text: n.name.length > 34 ? n.name.slice(0, 33) + '…' : n.name }))));
  const types = [...new Set(nodes.map((n) => n.type))];
  out.append(
    h('p', { class: 'muted', text: `${center.type} · in ${center.docCount} document(s) · first seen ${when(center.firstSeen)} · last seen ${when(center.lastSeen)}` }),
    h('div', { class: 'legend' }, types.map((t) => h('span', {}, h('span', { class: 'swatch', dataset: { type: t } }), t))),
    picture,
    h('h2', { text: 'Observations about it' }),
    h('ul', { class: 'list' }, (found.items || []).map((d) => h('li', {},
      h('div', { class: 'row' }, h('span', { class: 'tag', text: d.kind || 'observation' }),
        h('a', { class: 'title grow', href: sourceLink({ kind: d.kind || 'observation', id: d.id, sessionId: d.sessionId }), text: d.title || d.id }),
        h('span', { class: 'muted', text: when(d.createdAt) }))))));
  for (const sw of out.querySelectorAll('.swatch')) sw.style.background = COLOURS[sw.dataset.type] || '#868e96';
  return null;
}
