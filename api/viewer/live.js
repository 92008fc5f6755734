// The live stream (GET v1/events, Server-Sent Events): typed events with ids, resumed with
// lastEventId after a drop, reconnected with backoff; the header says how fresh the page is.

const listeners = new Set();
let source = null;
let lastId = null;
let lastMessage = 0;
let backoff = 1000;
let retryTimer = null;
let indicator = null;
const TYPES = ['observation.stored', 'session.started', 'session.ended', 'memory.created',
  'memory.changed', 'memory.forgotten', 'memory.evicted', 'memory.restored',
  'observation.forgotten', 'capture.dead', 'capture.retried', 'counts', 'reset'];

export function onLive(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function startLive(element) {
  indicator = element;
  connect();
  setInterval(showFreshness, 1000);
}

function connect() {
  clearTimeout(retryTimer);
  const url = 'v1/events' + (lastId !== null ? `?lastEventId=${encodeURIComponent(lastId)}` : '');
  source = new EventSource(url);
  source.addEventListener('open', () => {
    backoff = 1000;
    lastMessage = Date.now();
    showFreshness();
  });
  source.addEventListener('message', () => { lastMessage = Date.now(); });
  for (const type of TYPES) source.addEventListener(type, (e) => deliver(type, e));
  source.addEventListener('error', () => {
    // The browser would retry at a fixed pace; we back off (1 s doubling to 30 s) and resume.
    source.close();
    source = null;
    showFreshness();
    retryTimer = setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 30000);
  });
  // a heartbeat is a comment: the stream is alive when anything arrives, so poll readyState
}

function deliver(type, e) {
  lastMessage = Date.now();
  if (e.lastEventId) lastId = e.lastEventId;
  let data = {};
  try { data = JSON.parse(e.data); } catch { /* keep {} */ }
  for (const fn of listeners) {
    try { fn(type, data); } catch (err) { console.error(err); }
  }
}

function showFreshness() {
  if (!indicator) return;
  const open = source && source.readyState === EventSource.OPEN;
  if (open) {
    indicator.className = 'live ok';
    indicator.textContent = 'live';
    lastMessage = Date.now();
    return;
  }
  const stale = lastMessage ? Math.round((Date.now() - lastMessage) / 1000) : null;
  indicator.className = 'live stale';
  indicator.textContent = stale === null ? 'connecting…' : `offline, ${stale} s stale — reconnecting`;
}

export function liveState() {
  return { open: !!source && source.readyState === EventSource.OPEN, lastId };
}
