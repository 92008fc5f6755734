// Small DOM helpers. Text always goes in as text (never innerHTML): everything shown is data.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'on') for (const [name, fn] of Object.entries(value)) el.addEventListener(name, fn);
    else if (key === 'text') el.textContent = value;
    else if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key in el && typeof value !== 'string') el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === 'on') for (const [name, fn] of Object.entries(value)) el.addEventListener(name, fn);
    else if (key === 'text') el.textContent = value;
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function ago(iso) {
  if (!iso) return '';
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

let toastTimer = null;
export function toast(message) {
  let el = document.querySelector('.toast');
  if (!el) {
    el = h('div', { class: 'toast', role: 'status' });
    document.body.append(el);
  }
  el.textContent = message;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.remove(), 3500);
}

// A word diff of two texts (longest common subsequence over words and spaces): a list of
// [op, text] with op '=', '+' or '-'. Long texts fall back to lines to stay cheap.
export function wordDiff(before, after) {
  let a = before.split(/(\s+)/), b = after.split(/(\s+)/);
  if (a.length * b.length > 4e6) { a = before.split(/(\n)/); b = after.split(/(\n)/); }
  if (a.length * b.length > 4e6) return [['-', before], ['+', after]];
  const n = a.length, m = b.length;
  const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      dp[i][j] = a[i] === b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  const out = [];
  const push = (op, text) => {
    const last = out[out.length - 1];
    if (last && last[0] === op) last[1] += text; else out.push([op, text]);
  };
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { push('=', a[i]); i++; j++; }
    else if (dp[i + 1][j] >= dp[i][j + 1]) push('-', a[i++]);
    else push('+', b[j++]);
  }
  while (i < n) push('-', a[i++]);
  while (j < m) push('+', b[j++]);
  return out;
}

export function diffView(before, after) {
  return h('p', { class: 'diff' }, wordDiff(before, after).map(([op, text]) =>
    op === '=' ? text : h(op === '+' ? 'ins' : 'del', { text })));
}

// "Are you sure" with an optional reason, in a <dialog> (keyboard: Tab, Enter, Escape).
export function confirmDialog({ title, body, action, withReason = false }) {
  return new Promise((resolve) => {
    const reason = withReason ? h('input', { type: 'text', name: 'reason', maxlength: 500, required: true }) : null;
    const dialog = h('dialog', { 'aria-labelledby': 'dlg-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'dlg-title', text: title }),
        h('p', { text: body }),
        reason && h('label', {}, 'Reason (kept in the audit trail)', reason),
        h('div', { class: 'bar' },
          h('button', { value: 'cancel', formnovalidate: true, text: 'Cancel' }),
          h('button', { value: 'ok', class: 'danger', text: action }))));
    dialog.addEventListener('close', () => {
      const ok = dialog.returnValue === 'ok';
      dialog.remove();
      resolve(ok ? { reason: reason ? reason.value.trim() : null } : null);
    });
    document.body.append(dialog);
    dialog.showModal();
    (reason || dialog.querySelector('button.danger')).focus();
  });
}
