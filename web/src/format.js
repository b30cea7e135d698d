// Formatting shared by the pages: times, durations, GPU amounts, team colours.

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// "3m", "2h 5m", "4d 1h" from milliseconds.
export function fmtDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

// How long ago (or since) an ISO time was.
export function since(iso) {
  return iso ? fmtDuration(Date.now() - new Date(iso).getTime()) : '—';
}

// When a queued job is expected to start: "in 12m", "now" once the time has come, or "unknown"
// (the scheduler has no end declared for the work ahead of it).
export function startsIn(iso) {
  if (!iso) return 'unknown';
  const ms = new Date(iso).getTime() - Date.now();
  return ms <= 0 ? 'now' : `in ${fmtDuration(ms)}`;
}

export function fmtHours(h) {
  if (h === null || h === undefined) return '—';
  return h >= 100 ? h.toFixed(0) : h >= 10 ? h.toFixed(1) : h.toFixed(2);
}

export function fmtPercent(fraction) {
  return fraction === null || fraction === undefined ? '—' : `${Math.round(fraction * 100)}%`;
}

// A job's GPU request as people say it: "2 GPUs", "0.25 GPU", "whole host".
export function fmtGpus(job) {
  if (job.whole_host) return 'whole host';
  if (!job.gpus) return 'no GPU';
  const per = job.gpu_milli && job.gpu_milli < 1000 ? `${job.gpu_milli / 1000} GPU` : null;
  const n = per ?? `${job.gpus} GPU${job.gpus === 1 ? '' : 's'}`;
  return job.hosts > 1 ? `${job.hosts} × ${n}` : n;
}

// A host's GPUs by model, as a card or a table says them: "8× H100", "2× A100, 2× H100".
export function gpuSummary(gpus) {
  if (!gpus?.length) return 'no GPUs';
  const by = new Map();
  for (const g of gpus) by.set(g.model || 'GPU', (by.get(g.model || 'GPU') ?? 0) + 1);
  return [...by].map(([m, n]) => `${n}× ${m}`).join(', ');
}

// Team colours: ten slots, --team-0 .. --team-9 in style.css (set for light and dark; the
// palette test checks their contrast and how far apart they are). A team's slot is a hash of its
// name, so it keeps its colour on every page without asking the server.
export const TEAM_SLOTS = 10;

function hashSlot(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h % TEAM_SLOTS;
}

// Slots for a set of teams such that no two share one (up to TEAM_SLOTS teams): in name order,
// each takes its hashed slot or, when an earlier team has it, the next free one. Ten hashed slots
// collide often (four teams share one about half the time), so pages colour teams
// through this, from every team the user may see: a team then keeps its slot as long as the
// set of teams does. Beyond ten teams slots repeat, and the legend and tooltips name the team.
export function teamSlots(teams) {
  const slots = new Map();
  const taken = new Set();
  for (const t of [...new Set(teams)].filter(Boolean).sort()) {
    let s = hashSlot(t);
    for (let i = 0; i < TEAM_SLOTS && taken.has(s); i++) s = (s + 1) % TEAM_SLOTS;
    slots.set(t, s);
    taken.add(s);
  }
  return slots;
}

// A team's colour as CSS (a custom property, so the theme decides the shade); `slots` from
// teamSlots(), else the hashed slot. No team: the shared grey.
export function teamColor(team, slots) {
  if (!team) return 'var(--shared)';
  return `var(--team-${slots?.get(team) ?? hashSlot(team)})`;
}

// The value of a CSS colour such as "var(--team-3)" now, for what cannot use custom properties
// (uPlot draws on a canvas); anything else is returned as given.
export function resolveColor(css) {
  const m = /^var\((--[\w-]+)\)$/.exec(css ?? '');
  if (!m || typeof document === 'undefined') return css;
  const v = getComputedStyle(document.documentElement).getPropertyValue(m[1]).trim();
  return v || css;
}

// Bytes as a person reads them: 1536 -> "1.5 KiB", 3.2e9 -> "3.0 GiB".
export function fmtBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}
