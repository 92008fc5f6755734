// Memories: list and search, provenance, versions with a word diff, edit (a new version),
// forget with a reason and confirmation, bulk forget, export.
import { h, when, ago, diffView, confirmDialog, toast } from './dom.js';
import { get, post, api, all } from './api.js';

const SOURCES = { api: 'saved through the REST API', mcp: 'saved by an agent over MCP', sync: 'imported from a memory file', consolidate: 'consolidated from sessions' };

export function provenance(m) {
  const meta = m.meta || {};
  const parts = [SOURCES[m.source] || `source: ${m.source}`];
  if (meta.path || meta.relpath) parts.push(`file ${meta.path || meta.relpath}`);
  if (meta.tool) parts.push(`(${meta.tool})`);
  if (Array.isArray(meta.sessions) && meta.sessions.length) parts.push(`from ${meta.sessions.length} session(s)`);
  return parts.join(' ');
}

function download(name, data) {
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }));
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export async function memoryList(view, route) {
  const p = route.params;
  const project = h('input', { type: 'text', name: 'project', value: p.get('project') || '', placeholder: 'all projects' });
  const q = h('input', { type: 'search', name: 'q', value: p.get('q') || '', placeholder: 'search memories' });
  const evicted = h('input', { type: 'checkbox', name: 'evicted', checked: p.get('evicted') === 'true' });
  const list = h('ul', { class: 'list', 'aria-label': 'Memories' });
  const count = h('span', { class: 'muted', 'aria-live': 'polite' });
  const forgetSel = h('button', { type: 'button', class: 'danger', text: 'Forget selected', disabled: true });
  const exportBtn = h('button', { type: 'button', text: 'Export (JSON)' });
  const selectAll = h('input', { type: 'checkbox', 'aria-label': 'Select all' });
  view.append(h('h1', { text: 'Memories' }),
    h('form', { class: 'bar', on: { submit(e) {
      e.preventDefault();
      const next = new URLSearchParams();
      if (project.value.trim()) next.set('project', project.value.trim());
      if (q.value.trim()) next.set('q', q.value.trim());
      if (evicted.checked) next.set('evicted', 'true');
      location.hash = `#/memories?${next}`;
    } } }, h('label', {}, 'Project', project), h('label', {}, 'Search', q),
    h('label', { class: 'inline' }, evicted, 'evicted (decayed) ones'), h('button', { type: 'submit', text: 'Show' })),
    h('div', { class: 'bar' }, h('label', { class: 'inline' }, selectAll, 'all'), forgetSel, exportBtn, count),
    list);

  const params = { project: project.value.trim() || '*', query: q.value.trim() || undefined, evicted: evicted.checked ? 'true' : undefined };
  let items = params.query ? (await get('v1/memories', { ...params, limit: 100 })).items : await all('v1/memories', params, 500);
  const selected = () => [...list.querySelectorAll('input[type=checkbox]:checked')].map((c) => c.value);
  const sync = () => {
    const n = selected().length;
    forgetSel.disabled = !n;
    forgetSel.textContent = n ? `Forget selected (${n})` : 'Forget selected';
  };
  function item(m, fresh = false) {
    return h('li', { class: fresh ? 'fresh' : '', dataset: { id: m.id } },
      h('div', { class: 'row' },
        h('input', { type: 'checkbox', value: m.id, 'aria-label': `Select ${m.id}`, on: { change: sync } }),
        h('a', { class: 'title grow', href: `#/memories/${encodeURIComponent(m.id)}`, text: m.content.length > 160 ? m.content.slice(0, 160) + '…' : m.content }),
        h('span', { class: 'tag', text: `v${m.version}` }),
        h('span', { class: 'muted', text: `${m.project} · ${m.scope} · ${ago(m.updatedAt)}` })),
      h('div', { class: 'muted', text: provenance(m) + (m.evictedAt ? ` · evicted ${ago(m.evictedAt)}` : '') }));
  }
  function render() {
    list.replaceChildren(...(items.length ? items.map((m) => item(m)) : [h('li', { class: 'muted', text: 'No memories here.' })]));
    count.textContent = `${items.length} memor${items.length === 1 ? 'y' : 'ies'}`;
    sync();
  }
  render();
  selectAll.addEventListener('change', () => {
    for (const c of list.querySelectorAll('input[type=checkbox]')) c.checked = selectAll.checked;
    sync();
  });
  forgetSel.addEventListener('click', async () => {
    const ids = selected();
    const answer = await confirmDialog({ title: `Forget ${ids.length} memor${ids.length === 1 ? 'y' : 'ies'}?`, body: 'Forgotten memories leave every index and their versions are deleted. This cannot be undone.', action: 'Forget', withReason: true });
    if (!answer) return;
    const done = await post('v1/memories/forget', { ids, reason: answer.reason });
    items = items.filter((m) => !done.forgotten.includes(m.id));
    render();
    toast(`${done.forgotten.length} forgotten${done.missing.length ? `, ${done.missing.length} not found` : ''}`);
  });
  exportBtn.addEventListener('click', () => {
    const ids = new Set(selected());
    const chosen = ids.size ? items.filter((m) => ids.has(m.id)) : items;
    download(`engram-memories-${new Date().toISOString().slice(0, 10)}.json`, { exportedAt: new Date().toISOString(), memories: chosen });
  });
  return {
    async onEvent(type, data) {
      if (!type.startsWith('memory.')) return;
      if (type === 'memory.forgotten' || type === 'memory.evicted') {
        items = items.filter((m) => m.id !== data.id);
        list.querySelector(`[data-id="${CSS.escape(data.id)}"]`)?.remove();
        count.textContent = `${items.length} memor${items.length === 1 ? 'y' : 'ies'}`;
        return;
      }
      if (params.query || (params.project !== '*' && data.project && data.project !== params.project)) return;
      const m = await get(`v1/memories/${encodeURIComponent(data.id)}`).catch(() => null);
      if (!m) return;
      const at = items.findIndex((x) => x.id === m.id);
      const li = item(m, true);
      if (at >= 0) { items[at] = m; list.querySelector(`[data-id="${CSS.escape(m.id)}"]`)?.replaceWith(li); }
      else { items.unshift(m); list.querySelector('li.muted')?.remove(); list.prepend(li); }
      count.textContent = `${items.length} memor${items.length === 1 ? 'y' : 'ies'}`;
    },
  };
}

export async function memoryView(view, route) {
  const id = route.id;
  const body = h('div');
  view.append(h('p', {}, h('a', { href: '#/memories', text: '← Memories' })), body);
  async function render() {
    const m = await get(`v1/memories/${encodeURIComponent(id)}`);
    const editor = h('textarea', { name: 'content', 'aria-label': 'Memory content', text: m.content });
    const save = h('button', { type: 'submit', class: 'primary', text: 'Save as a new version' });
    const versions = [...(m.versions || [])].reverse();
    body.replaceChildren(...[
      h('h1', { text: `Memory ${m.id}` }),
      h('p', { class: 'muted', text: `${m.project} · ${m.scope} · version ${m.version} · created ${when(m.createdAt)} · used ${m.accessCount} time(s)` }),
      h('p', {}, h('strong', { text: 'Provenance: ' }), provenance(m)),
      m.meta ? h('details', {}, h('summary', { text: 'Provenance details' }), h('pre', { text: JSON.stringify(m.meta, null, 2) })) : null,
      h('form', { on: { async submit(e) {
        e.preventDefault();
        if (editor.value.trim() === m.content.trim()) { toast('Nothing changed'); return; }
        save.disabled = true;
        try { await api('PATCH', `v1/memories/${encodeURIComponent(id)}`, { content: editor.value }); toast('Saved as a new version'); await render(); }
        catch (err) { toast(`Not saved: ${err.message}`); save.disabled = false; }
      } } }, h('label', {}, 'Content', editor), h('div', { class: 'bar' }, save,
        h('button', { type: 'button', class: 'danger', text: 'Forget…', on: { async click() {
          const answer = await confirmDialog({ title: 'Forget this memory?', body: 'It leaves every index and its versions are deleted. This cannot be undone.', action: 'Forget', withReason: true });
          if (!answer) return;
          await post('v1/memories/forget', { ids: [id], reason: answer.reason });
          toast('Forgotten');
          location.hash = '#/memories';
        } } }))),
      h('h2', { text: 'Version history' }),
      h('ol', { class: 'list', 'aria-label': 'Versions' }, versions.map((v, i) => {
        const older = versions[i + 1];
        return h('li', {},
          h('div', { class: 'row' }, h('span', { class: 'tag', text: `v${v.version}` }), h('span', { class: 'muted', text: when(v.createdAt) }),
            v.supersededAt ? h('span', { class: 'muted', text: `superseded ${when(v.supersededAt)}` }) : h('span', { class: 'tag good', text: 'current' })),
          older ? diffView(older.content, v.content) : h('p', { text: v.content }));
      })),
    ].filter(Boolean));
  }
  await render();
  return {
    async onEvent(type, data) {
      if (data.id !== id) return;
      if (type === 'memory.forgotten') body.replaceChildren(h('p', { class: 'muted', text: 'This memory was forgotten.' }));
      else if (type === 'memory.changed' && !view.contains(document.activeElement?.closest('form') || null)) await render();
    },
  };
}
