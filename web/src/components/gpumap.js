// GPU-count maps such as a quota's `guaranteed` ({"A100": 4, "any": 2}), as people write them:
// "A100=4, any=2".

export function fmtGpuMap(map) {
  const entries = Object.entries(map ?? {});
  if (!entries.length) return '—';
  return entries.map(([k, v]) => `${k}=${v}`).join(', ');
}

// Parses "A100=4, any=2" into {"A100": 4, "any": 2}. Values are passed on as typed so that the
// server, not us, judges them (it names the field when it refuses).
export function parseGpuMap(text) {
  const out = {};
  for (const part of text.split(/[,\s]+/)) {
    if (!part) continue;
    const [k, v] = part.split('=');
    const n = Number(v);
    out[k] = v !== undefined && v !== '' && !Number.isNaN(n) ? n : v;
  }
  return out;
}
