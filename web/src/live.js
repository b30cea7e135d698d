// Live updates: one server-sent event stream (/api/v1/stream) per tab. The stream carries only
// which kinds of objects changed ("jobs", "hosts", ...), never the objects themselves: pages
// refetch through the API, so they show exactly what the API lets this user see.
// EventSource reconnects by itself after a network error; after a refused reconnect (the session
// ended) it gives up, and so do we until the next login.
import { useEffect, useRef, useState, useCallback } from 'preact/hooks';
import { api, sessionEnded } from './api.js';

const subscribers = new Set();
let source = null;
let wanted = false; // between startLive() and stopLive(): retry after a refused reconnect
let retryTimer = null;
let connected = false;
const statusListeners = new Set();

function setConnected(value) {
  connected = value;
  for (const l of statusListeners) l(value);
}

export function startLive() {
  wanted = true;
  if (source) return;
  source = new EventSource('/api/v1/stream', { withCredentials: true });
  source.addEventListener('hello', () => {
    setConnected(true);
    // Whatever happened while we were away: everything is stale.
    for (const s of subscribers) s(null);
  });
  source.addEventListener('change', (ev) => {
    let topics = null;
    try {
      topics = JSON.parse(ev.data).topics ?? null;
    } catch {
      /* a malformed message refreshes everything */
    }
    for (const s of subscribers) s(topics);
  });
  source.addEventListener('expired', () => {
    stopLive();
    sessionEnded();
  });
  source.onerror = () => {
    setConnected(false);
    if (source && source.readyState === EventSource.CLOSED) {
      // The server refused the reconnect (401): the session is over, or allotd is down. Ask
      // the API which; a 401 there logs the app out (stopLive), else we try again.
      source.close();
      source = null;
      api.get('/whoami').catch(() => {});
      clearTimeout(retryTimer);
      retryTimer = setTimeout(() => wanted && startLive(), 5000);
    }
  };
}

export function stopLive() {
  wanted = false;
  clearTimeout(retryTimer);
  if (source) source.close();
  source = null;
  setConnected(false);
}

export function useLiveStatus() {
  const [value, setValue] = useState(connected);
  useEffect(() => {
    statusListeners.add(setValue);
    return () => statusListeners.delete(setValue);
  }, []);
  return value;
}

// Calls onChange when one of `topics` changes (or when the stream reconnects).
export function useLive(topics, onChange) {
  const ref = useRef(onChange);
  ref.current = onChange;
  const key = topics.join(',');
  useEffect(() => {
    const wanted = new Set(key.split(','));
    const sub = (changed) => {
      if (!changed || changed.some((t) => wanted.has(t))) ref.current();
    };
    subscribers.add(sub);
    return () => subscribers.delete(sub);
  }, [key]);
}

// Fetches `path` (null: nothing) and refetches it when one of `topics` changes, at most once per
// `minIntervalMs`. Returns { data, error, loading, reload }. Keeps the last data while reloading,
// so live pages do not flicker.
export function useResource(path, topics = [], { minIntervalMs = 1000 } = {}) {
  const [state, setState] = useState({ data: null, error: null, loading: path !== null });
  const inflight = useRef(false);
  const pending = useRef(false);
  const last = useRef(0);
  const timer = useRef(null);
  const current = useRef(path);
  current.current = path;

  const load = useCallback(async () => {
    const p = current.current;
    if (p === null) return;
    if (inflight.current) {
      pending.current = true;
      return;
    }
    inflight.current = true;
    last.current = Date.now();
    try {
      const data = await api.get(p);
      if (current.current === p) setState({ data, error: null, loading: false });
    } catch (error) {
      if (current.current === p) setState((s) => ({ data: s.data, error, loading: false }));
    } finally {
      inflight.current = false;
      if (pending.current) {
        pending.current = false;
        schedule();
      }
    }
  }, []);

  const schedule = useCallback(() => {
    if (timer.current) return;
    const wait = Math.max(0, last.current + minIntervalMs - Date.now());
    timer.current = setTimeout(() => {
      timer.current = null;
      load();
    }, wait);
  }, [load, minIntervalMs]);

  useEffect(() => {
    setState((s) => ({ data: null, error: null, loading: path !== null }));
    load();
    return () => {
      if (timer.current) clearTimeout(timer.current);
      timer.current = null;
    };
  }, [path]);

  useLive(topics, schedule);
  return { ...state, reload: load };
}
