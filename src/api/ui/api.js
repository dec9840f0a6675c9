// api.js: the console's one way to the controller. Every request carries
// the bearer token the page was given (the URL fragment #token=..., which
// browsers never send to a server, kept in this tab's sessionStorage), so
// the console sees what the token's role may see and no more.

const KEY = 'arbiter.token';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Take #token=... out of the address bar (into sessionStorage) at once, so
// that it is neither bookmarked nor shown.
export function takeTokenFromUrl() {
  const m = location.hash.match(/(?:^#|&)token=([^&]*)/);
  if (!m) return;
  sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
  let rest = location.hash.replace(/(^#|&)token=[^&]*/, '$1').replace(/^#&/, '#');
  if (rest === '#') rest = '';
  history.replaceState(null, '', location.pathname + location.search + rest);
}

export function token() {
  return sessionStorage.getItem(KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(KEY, t);
  else sessionStorage.removeItem(KEY);
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const t = token();
  if (t) h.Authorization = 'Bearer ' + t;
  return h;
}

// GET (or opts.method) path on this controller; the reply's JSON. Throws
// ApiError with the controller's message ({"error": {"message"}}).
export async function call(path, opts = {}) {
  const r = await fetch(path, {
    method: opts.method || 'GET',
    headers: headers(opts.headers),
    signal: opts.signal,
    cache: 'no-store',
  });
  const text = await r.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (e) {
    body = null;
  }
  if (!r.ok) {
    const msg = body && body.error && body.error.message ? body.error.message : text || r.statusText;
    throw new ApiError(r.status, msg);
  }
  return body;
}

// The tail (at most `bytes`) of a task's log, read from its node's agent
// with a ticket from the controller (docs/agent.md): {text, size, node}.
export async function logTail(job, task, stream, bytes) {
  const t = await call(`/v1/jobs/${job}/logs-ticket?task=${task}`, { method: 'POST' });
  const auth = { Authorization: 'Bearer ' + t.ticket };
  const base = `${t.logs_url}/v1/logs/${job}/${task}?stream=${stream}`;
  // A first request past the end learns the size (X-Arbiter-Log-Size).
  const probe = await fetch(`${base}&offset=999999999999`, { headers: auth, cache: 'no-store' });
  if (!probe.ok) throw new ApiError(probe.status, await probe.text());
  const size = Number(probe.headers.get('X-Arbiter-Log-Size') || 0);
  const from = Math.max(0, size - bytes);
  if (size === 0) return { text: '', size: 0, node: t.node, from: 0 };
  const r = await fetch(`${base}&offset=${from}`, { headers: auth, cache: 'no-store' });
  if (!r.ok) throw new ApiError(r.status, await r.text());
  return { text: await r.text(), size, node: t.node, from };
}
