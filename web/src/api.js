// The console's only way to the server: the same REST API the CLI uses, on the session cookie.
// Non-GET requests carry the session's CSRF token (from the login reply, or from /whoami after a
// reload). A 401 anywhere means the session is over: listeners send the user to the login page.

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? body?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code ?? body?.code ?? null;
    this.field = body?.error?.field ?? body?.field ?? null;
  }
}

let csrfToken = null;
const unauthorizedListeners = new Set();

export function setCsrfToken(token) {
  csrfToken = token ?? null;
}

// Called with no arguments whenever the server says the session is gone.
export function onUnauthorized(listener) {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export function sessionEnded() {
  csrfToken = null;
  for (const l of unauthorizedListeners) l();
}

async function request(method, path, body, { raw = false, signal } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  const res = await fetch(`/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
    signal,
  });
  if (res.status === 401 && path !== '/login') sessionEnded();
  if (raw && res.ok) return res;
  const text = await res.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = { message: text };
  }
  if (!res.ok) throw new ApiError(res.status, parsed);
  return parsed;
}

export const api = {
  get: (path, opts) => request('GET', path, undefined, opts),
  post: (path, body = {}, opts) => request('POST', path, body, opts),
  put: (path, body = {}, opts) => request('PUT', path, body, opts),
  patch: (path, body = {}, opts) => request('PATCH', path, body, opts),
  del: (path, opts) => request('DELETE', path, undefined, opts),
  // The raw Response of a GET (for text bodies such as logs and CSV).
  raw: (path, opts) => request('GET', path, undefined, { ...opts, raw: true }),
};

// Builds "?a=1&b=2" from an object, leaving out null, undefined and empty strings.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

export async function login(user, password) {
  const out = await api.post('/login', { user, password, session: true });
  setCsrfToken(out.csrf_token);
  return out;
}

export async function logout() {
  try {
    await api.post('/logout');
  } finally {
    sessionEnded();
  }
}

// Who the session belongs to, or null when there is no session.
export async function whoami() {
  try {
    const me = await api.get('/whoami');
    setCsrfToken(me.csrf_token);
    return me;
  } catch (e) {
    if (e.status === 401) return null;
    throw e;
  }
}
