// The viewer's shell: navigation, a hash router (#/page/...), the theme and the live stream.
import { h } from './dom.js';
import { startLive, onLive } from './live.js';
import overview from './overview.js';
import search from './search.js';
import { sessionList, sessionView } from './sessions.js';
import { memoryList, memoryView } from './memories.js';
import graph from './graph.js';
import context from './context.js';
import { observationView } from './observation.js';

const PAGES = [
  ['overview', 'Overview'], ['search', 'Search'], ['sessions', 'Sessions'],
  ['memories', 'Memories'], ['graph', 'Graph'], ['context', 'Context preview'],
];
const ROUTES = {
  overview, search, sessions: sessionList, memories: memoryList, graph, context,
  'sessions/:id': sessionView, 'memories/:id': memoryView, 'observations/:id': observationView,
};

const main = document.getElementById('main');
const nav = document.getElementById('nav');
let current = null;

function parse() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, qs] = raw.split('?');
  const parts = (path || 'overview').split('/').map(decodeURIComponent);
  const params = new URLSearchParams(qs || '');
  if (parts.length === 1) return { name: parts[0], id: null, params };
  return { name: `${parts[0]}/:id`, id: parts.slice(1).join('/'), section: parts[0], params };
}

async function route() {
  const r = parse();
  const page = ROUTES[r.name] || overview;
  if (current?.dispose) current.dispose();
  current = null;
  const section = r.section || r.name;
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const title = PAGES.find(([k]) => k === section)?.[1] || 'Engram';
  document.title = `${title} · Engram`;
  const view = h('div', { class: 'view' });
  main.replaceChildren(view);
  try {
    current = (await page(view, r)) || null;
  } catch (err) {
    view.replaceChildren(h('p', { class: 'error', role: 'alert', text: `Could not load: ${err.message}` }));
  }
}

function theme() {
  const saved = localStorage.getItem('engram-theme');
  if (saved) document.documentElement.dataset.theme = saved;
  const button = h('button', { type: 'button', 'aria-label': 'Switch light or dark', text: '◐', on: { click() {
    const dark = document.documentElement.dataset.theme === 'dark' ||
      (!document.documentElement.dataset.theme && matchMedia('(prefers-color-scheme: dark)').matches);
    const next = dark ? 'light' : 'dark';
    document.documentElement.dataset.theme = next;
    localStorage.setItem('engram-theme', next);
  } } });
  document.querySelector('header.top').append(button);
}

nav.replaceChildren(...PAGES.map(([key, label]) => h('a', { href: `#/${key}`, dataset: { page: key }, text: label })));
theme();
startLive(document.getElementById('live'));
onLive((type, data) => current?.onEvent?.(type, data));
document.addEventListener('engram:signed-out', () => location.reload());
window.addEventListener('hashchange', route);
route();
