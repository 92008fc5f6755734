// Overview: counts, capture health, index lag, memory, problems with their fixes, activity.
import { h, ago, debounce, toast } from './dom.js';
import { get, post } from './api.js';

export default async function overview(view) {
  const [status, recent, dead] = await Promise.all([
    get('v1/status'),
    get('v1/observations', { project: '*', limit: 15 }),
    get('v1/capture', { state: 'dead', limit: 20 }),
  ]);
  const cells = new Map(); // key -> element whose text is that figure
  const fig = (key, text) => { const el = h('dd', { dataset: { key }, text }); cells.set(key, el); return el; };
  const kv = (rows) => h('dl', { class: 'kv' }, rows.map(([label, key]) => [h('dt', { text: label }), fig(key, '')]));

  const problems = h('section', { 'aria-label': 'Problems' });
  const deadList = h('ul', { class: 'list' });
  const activity = h('ul', { class: 'list', 'aria-label': 'Recent activity' });
  view.append(
    h('h1', { text: 'Overview' }),
    problems,
    h('div', { class: 'grid' },
      h('section', { class: 'card' }, h('h2', { text: 'Stored' }), kv([
        ['Observations', 'observations'], ['Sessions', 'sessions'], ['Memories', 'memories'],
        ['Keyword documents', 'keywordDocs']])),
      h('section', { class: 'card' }, h('h2', { text: 'Capture' }), kv([
        ['Waiting in the inbox', 'waiting'], ['Oldest waiting', 'oldest'], ['Dead letters', 'dead'],
        ['Workers', 'workers'], ['Last sweep', 'sweep'], ['Mode', 'mode']])),
      h('section', { class: 'card' }, h('h2', { text: 'Index lag' }), kv([
        ['Vectors pending', 'vectorPending'], ['Vector lag', 'vectorLag'], ['Graph pending', 'graphPending'],
        ['Graph lag', 'graphLag'], ['LLM work', 'llm']])),
      h('section', { class: 'card' }, h('h2', { text: 'Memory (RSS)' }), h('dl', { class: 'kv', dataset: { key: 'rss' } }))),
    h('h2', { text: 'Dead letters' }),
    h('div', { class: 'bar' }, h('button', { type: 'button', id: 'retry-all', text: 'Retry all dead letters', on: { click: () => retry({ all: true }) } })),
    deadList,
    h('h2', { text: 'Recent activity' }),
    activity,
  );

  function set(key, value) {
    const el = cells.get(key);
    const text = value === null || value === undefined ? '—' : String(value);
    if (el && el.textContent !== text) el.textContent = text;
  }

  function fill(s) {
    const sizes = s.indexes?.keyword || {};
    for (const k of ['observations', 'sessions', 'memories', 'keywordDocs']) set(k, sizes[k]);
    set('waiting', `${s.inbox?.waiting ?? '—'} of ${s.inbox?.capacity ?? '—'}`);
    set('oldest', s.inbox?.oldestWaitingSeconds ? `${s.inbox.oldestWaitingSeconds} s` : 'none');
    set('dead', s.deadLetters);
    set('workers', s.workers ? `${s.workers.alive} (${(s.workers.names || []).join(', ') || 'none'})` : '—');
    set('sweep', s.sweeper?.lastSweepSecondsAgo == null ? 'never' : `${s.sweeper.lastSweepSecondsAgo} s ago`);
    set('mode', s.mode);
    set('vectorPending', s.derived?.vector?.pending ?? (s.indexes?.vector?.enabled ? 0 : 'off'));
    set('vectorLag', s.derived?.vector ? `${s.derived.vector.lagSeconds} s` : 'off');
    set('graphPending', s.derived?.graph?.pending ?? 0);
    set('graphLag', s.derived?.graph ? `${s.derived.graph.lagSeconds} s` : '—');
    set('llm', s.llm?.backlog ? `${s.llm.backlog.pending} waiting` : (s.llm?.providers?.length ? 'idle' : 'off (no provider)'));
    const rss = view.querySelector('[data-key="rss"]');
    const processes = Object.entries(s.memory?.processes || {});
    rss.replaceChildren(...processes.flatMap(([name, p]) => [
      h('dt', { text: name }), h('dd', { text: `${p.rssMb} MB (peak ${p.peakRssMb}) of ${s.memory.budgetMb}` })]));
    const list = s.problems || [];
    problems.replaceChildren(...(list.length
      ? list.map((p) => h('div', { class: 'problem', role: 'alert' },
        h('div', {}, h('strong', { text: p.component }), ': ', p.problem), h('div', { class: 'fix', text: `Fix: ${p.fix}` })))
      : [h('p', { class: 'ok-line', text: 'Everything is working: no problems found.' })]));
  }

  function fillDead(items) {
    deadList.replaceChildren(...(items.length ? items.map((e) => h('li', { dataset: { event: e.eventId } },
      h('div', { class: 'row' },
        h('span', { class: 'title grow mono', text: e.eventId }),
        h('span', { class: 'tag bad', text: `${e.attempts} attempts` }),
        h('button', { type: 'button', text: 'Retry', on: { click: () => retry({ eventId: e.eventId }) } })),
      h('div', { class: 'muted', text: e.lastError || '' }))) : [h('li', { class: 'muted', text: 'No dead letters.' })]));
    view.querySelector('#retry-all').disabled = !items.length;
  }

  async function retry(body) {
    try {
      const done = await post('v1/capture/retry', body);
      toast(`${done.retried} dead letter(s) sent again`);
    } catch (err) { toast(`Retry failed: ${err.message}`); }
    refresh();
  }

  function activityItem(o, fresh = false) {
    return h('li', { class: fresh ? 'fresh' : '', dataset: { id: o.id } },
      h('div', { class: 'row' },
        h('span', { class: 'tag', text: o.kind }),
        h('a', { class: 'title grow', href: `#/observations/${encodeURIComponent(o.id)}`, text: o.title }),
        h('span', { class: 'muted', text: o.project }),
        h('a', { class: 'muted', href: `#/sessions/${encodeURIComponent(o.sessionId)}`, text: 'session' })));
  }

  fill(status);
  fillDead(dead.items);
  activity.replaceChildren(...recent.items.map((o) => activityItem(o)));

  const refresh = debounce(async () => {
    const [s, d] = await Promise.all([get('v1/status'), get('v1/capture', { state: 'dead', limit: 20 })]);
    fill(s); fillDead(d.items);
  }, 1000);
  const poll = setInterval(refresh, 15000); // ages and lag move without events too

  return {
    onEvent(type, data) {
      if (type === 'observation.stored') {
        if (!activity.querySelector(`[data-id="${CSS.escape(data.id)}"]`)) {
          activity.prepend(activityItem({ ...data, title: data.title }, true));
          while (activity.children.length > 30) activity.lastChild.remove();
        }
      }
      refresh(); // counts, dead letters and lag, from one status read (debounced)
    },
    dispose() { clearInterval(poll); },
  };
}
