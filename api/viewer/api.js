// The REST API, as the page calls it: relative URLs (so a path prefix behind a reverse proxy
// works), the session cookie, and the CSRF token the page was given on every change.

const csrf = document.querySelector('meta[name="engram-csrf"]')?.content || '';

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') headers['X-Engram-CSRF'] = csrf;
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => null);
  if (response.status === 401) signedOut();
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path, params) => api('GET', path + query(params));
export const post = (path, body) => api('POST', path, body ?? {});

// Every page of a listing (bounded: the viewer never pulls more than `most` items).
export async function all(path, params, most = 1000) {
  const items = [];
  let cursor = null;
  do {
    const page = await get(path, { ...params, limit: 100, cursor });
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor && items.length < most);
  return items;
}

function signedOut() {
  document.dispatchEvent(new CustomEvent('engram:signed-out'));
}
