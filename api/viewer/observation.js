// One observation (a deep link to any event): where it happened, what it held.
import { h, when } from './dom.js';
import { get } from './api.js';
import { observationDetail } from './sessions.js';

export async function observationView(view, route) {
  const o = await get(`v1/observations/${encodeURIComponent(route.id)}`);
  view.append(
    h('p', {}, h('a', { href: `#/sessions/${encodeURIComponent(o.sessionId)}?at=${encodeURIComponent(o.id)}`, text: '← This step in its session' })),
    h('h1', { text: o.title }),
    h('p', { class: 'muted', text: `${o.kind}${o.toolName ? ` · ${o.toolName}` : ''} · ${o.project} · ${o.host} · ${when(o.createdAt)} · ${o.id}` }),
    ...observationDetail(o));
  return null;
}
