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

// A stable colour per team, so a team keeps its colour on every page.
export function teamColor(team) {
  if (!team) return 'var(--shared)';
  let h = 0;
  for (const c of team) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360} 60% 45%)`;
}
