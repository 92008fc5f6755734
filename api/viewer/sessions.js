// Sessions: the list, and one session's timeline with a scrubber to replay it step by step.
import { h, when, ago } from './dom.js';
import { get, all } from './api.js';

function sessionItem(s, fresh = false) {
  return h('li', { class: fresh ? 'fresh' : '', dataset: { id: s.id } },
    h('div', { class: 'row' },
      h('span', { class: `tag ${s.status === 'active' ? 'good' : ''}`, dataset: { role: 'status' }, text: s.status }),
      h('a', { class: 'title grow', href: `#/sessions/${encodeURIComponent(s.id)}`, text: s.summaryData?.request || s.id }),
      h('span', { class: 'muted', text: `${s.project} · ${s.host || 'unknown host'} · ${ago(s.startedAt)}` })),
    s.summaryData?.outcome ? h('div', { class: 'muted', text: `Outcome: ${s.summaryData.outcome}` }) : null);
}

export async function sessionList(view, route) {
  const project = route.params.get('project') || '';
  const filter = h('input', { type: 'text', name: 'project', value: project, placeholder: 'all projects' });
  const list = h('ul', { class: 'list', 'aria-label': 'Sessions' });
  const more = h('button', { type: 'button', text: 'More', hidden: true });
  let cursor = null;
  async function load() {
    const page = await get('v1/sessions', { project: project || '*', limit: 30, cursor });
    list.append(...page.items.map((s) => sessionItem(s)));
    cursor = page.nextCursor;
    more.hidden = !cursor;
    if (!list.children.length) list.append(h('li', { class: 'muted', text: 'No sessions yet.' }));
  }
  more.addEventListener('click', load);
  view.append(h('h1', { text: 'Sessions' }),
    h('form', { class: 'bar', on: { submit(e) { e.preventDefault(); location.hash = `#/sessions?project=${encodeURIComponent(filter.value.trim())}`; } } },
      h('label', {}, 'Project', filter), h('button', { type: 'submit', text: 'Filter' })),
    list, more);
  await load();
  return {
    onEvent(type, data) {
      if (project && data.project !== project) return;
      const existing = data.id && list.querySelector(`[data-id="${CSS.escape(data.id)}"]`);
      if (type === 'session.started' && !existing) {
        list.querySelector('li.muted')?.remove();
        list.prepend(sessionItem({ id: data.id, project: data.project, host: data.host, status: 'active', startedAt: new Date(data.at * 1000).toISOString() }, true));
      }
      if (type === 'session.ended' && existing) {
        const tag = existing.querySelector('[data-role="status"]');
        tag.textContent = 'ended';
        tag.className = 'tag';
      }
    },
  };
}

const failed = (o) => o.errors?.length || /exit [1-9]/.test(o.title);

function step(o, index) {
  const detail = h('div', { class: 'detail', hidden: true });
  const toggle = h('button', { type: 'button', 'aria-expanded': 'false', text: 'Details', on: { async click() {
    const open = detail.hidden;
    detail.hidden = !open;
    toggle.setAttribute('aria-expanded', String(open));
    if (open && !detail.childElementCount) detail.append(...observationDetail(await get(`v1/observations/${encodeURIComponent(o.id)}`)));
  } } });
  return h('li', { id: `step-${index}`, class: `k-${o.kind} ${failed(o) ? 'failed' : ''}`, dataset: { id: o.id, index } },
    h('div', { class: 'row' },
      h('span', { class: 'muted mono', text: `#${index + 1}` }),
      h('span', { class: `tag ${failed(o) ? 'bad' : ''}`, text: o.toolName ? `${o.kind} · ${o.toolName}` : o.kind }),
      h('span', { class: 'title grow', text: o.title }),
      h('a', { class: 'muted', href: `#/observations/${encodeURIComponent(o.id)}`, text: 'link', title: 'A link to this event' }),
      toggle),
    o.errors?.length ? h('div', { class: 'error', text: o.errors.join('\n') }) : null,
    o.filesModified?.length ? h('div', { class: 'muted', text: `changed ${o.filesModified.join(', ')}` }) : null,
    detail);
}

export function observationDetail(o) {
  const parts = [h('pre', { text: o.text })];
  if (o.prompt) parts.push(h('h3', { text: 'Prompt' }), h('pre', { text: o.prompt }));
  if (o.toolInput) parts.push(h('h3', { text: 'Tool input' }), h('pre', { text: typeof o.toolInput === 'string' ? o.toolInput : JSON.stringify(o.toolInput, null, 2) }));
  if (o.toolOutput) parts.push(h('h3', { text: 'Tool output' }), h('pre', { text: typeof o.toolOutput === 'string' ? o.toolOutput : JSON.stringify(o.toolOutput, null, 2) }));
  return parts;
}

export async function sessionView(view, route) {
  const id = route.id;
  const [session, items] = await Promise.all([get(`v1/sessions/${encodeURIComponent(id)}`), all(`v1/sessions/${encodeURIComponent(id)}/observations`, {}, 2000)]);
  const timeline = h('ol', { class: 'list timeline', 'aria-label': 'Timeline' }, items.map(step));
  const range = h('input', { type: 'range', min: 1, max: Math.max(items.length, 1), value: items.length || 1, 'aria-label': 'Replay position' });
  const position = h('span', { class: 'mono', 'aria-live': 'polite' });
  const back = h('button', { type: 'button', text: '◀ Step back', 'aria-keyshortcuts': 'ArrowLeft' });
  const fwd = h('button', { type: 'button', text: 'Step ▶', 'aria-keyshortcuts': 'ArrowRight' });
  const play = h('button', { type: 'button', text: 'Play' });
  let timer = null;
  function show(n, scroll = true) {
    const count = timeline.children.length;
    n = Math.min(Math.max(n, 1), Math.max(count, 1));
    range.max = Math.max(count, 1);
    range.value = n;
    position.textContent = count ? `step ${n} of ${count}` : 'no steps yet';
    [...timeline.children].forEach((li, i) => {
      li.classList.toggle('current', i === n - 1);
      li.classList.toggle('future', i > n - 1);
    });
    const cur = timeline.children[n - 1];
    if (cur && scroll) cur.scrollIntoView({ block: 'nearest' });
  }
  range.addEventListener('input', () => show(Number(range.value)));
  back.addEventListener('click', () => show(Number(range.value) - 1));
  fwd.addEventListener('click', () => show(Number(range.value) + 1));
  play.addEventListener('click', () => {
    if (timer) { clearInterval(timer); timer = null; play.textContent = 'Play'; return; }
    if (Number(range.value) >= timeline.children.length) show(1);
    play.textContent = 'Pause';
    timer = setInterval(() => {
      if (Number(range.value) >= timeline.children.length) { clearInterval(timer); timer = null; play.textContent = 'Play'; return; }
      show(Number(range.value) + 1);
    }, 700);
  });
  const keys = (e) => {
    if (e.target.closest('input, textarea, select')) return;
    if (e.key === 'ArrowLeft') show(Number(range.value) - 1);
    if (e.key === 'ArrowRight') show(Number(range.value) + 1);
  };
  document.addEventListener('keydown', keys);
  const summary = session.summary
    ? h('section', { class: 'card' }, h('h2', { text: 'Summary' }), h('pre', { text: session.summary }))
    : h('p', { class: 'muted', text: session.status === 'active' ? 'The session is still running: its summary follows its end.' : 'No summary yet.' });
  view.append(
    h('p', {}, h('a', { href: '#/sessions', text: '← Sessions' })),
    h('h1', { text: session.summaryData?.request || session.id }),
    h('p', { class: 'muted', text: `${session.id} · ${session.project} · ${session.host || 'unknown host'} · ${when(session.startedAt)} · ${session.status}` }),
    summary,
    h('h2', { text: 'Timeline' }),
    h('div', { class: 'scrubber' }, back, range, fwd, play, position),
    timeline);
  const at = route.params.get('at');
  const index = at ? items.findIndex((o) => o.id === at) : -1;
  show(index >= 0 ? index + 1 : items.length, index >= 0);
  return {
    onEvent(type, data) {
      if (type === 'observation.stored' && data.sessionId === id && !timeline.querySelector(`[data-id="${CSS.escape(data.id)}"]`)) {
        const following = Number(range.value) === timeline.children.length;
        const li = step({ id: data.id, kind: data.kind, title: data.title }, timeline.children.length);
        li.classList.add('fresh');
        timeline.append(li);
        show(following ? timeline.children.length : Number(range.value), false);
      }
    },
    dispose() { clearInterval(timer); document.removeEventListener('keydown', keys); },
  };
}
