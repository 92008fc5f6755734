// Context preview: what the next session in a project would be told, under a chosen budget.
import { h } from './dom.js';
import { post } from './api.js';

export default async function context(view, route) {
  const p = route.params;
  const project = h('input', { type: 'text', name: 'project', value: p.get('project') || '', required: true, placeholder: 'project name' });
  const budget = h('input', { type: 'number', name: 'budget', min: 50, max: 100000, step: 50, value: p.get('budget') || '1000' });
  const q = h('input', { type: 'search', name: 'q', value: p.get('q') || '', placeholder: 'optional: the first prompt', class: 'wide' });
  const out = h('div', { 'aria-live': 'polite' });
  view.append(h('h1', { text: 'Context preview' }),
    h('form', { class: 'bar', on: { submit(e) {
      e.preventDefault();
      const next = new URLSearchParams({ project: project.value.trim(), budget: budget.value });
      if (q.value.trim()) next.set('q', q.value.trim());
      location.hash = `#/context?${next}`;
    } } }, h('label', {}, 'Project', project), h('label', {}, 'Budget (tokens)', budget), h('label', {}, 'Prompt', q),
    h('button', { class: 'primary', type: 'submit', text: 'Preview' })),
    out);
  if (!project.value.trim()) {
    out.append(h('p', { class: 'muted', text: 'The block a session start would inject: memories, the last sessions, the project profile, within the budget.' }));
    project.focus();
    return null;
  }
  const body = { project: project.value.trim(), budgetTokens: Number(budget.value) || 1000 };
  if (q.value.trim()) body.query = q.value.trim();
  const block = await post('v1/context', body);
  out.append(
    h('p', { class: 'muted', text: `${block.tokens} of ${block.budgetTokens} tokens (${block.tokenEstimate}) · ${block.items} item(s) considered${block.omitted ? ` · ${block.omitted} left out` : ''}` }),
    h('pre', { class: 'context', text: block.context || '(empty: nothing is remembered for this project yet)' }));
  return null;
}
