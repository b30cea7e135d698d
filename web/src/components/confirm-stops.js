// Before an action that stops running work (approving a lease, draining with a deadline): what
// allotd says it would stop, shown in the confirmation. Nothing to stop: no question.
import { api } from '../api.js';
import { fmtTime } from '../format.js';

// Resolves true to go on. `impactPath`: the GET that answers {"would_stop": [...], "stops_at"}.
export async function confirmStops(impactPath, action) {
  const impact = await api.get(impactPath);
  const jobs = impact.would_stop ?? [];
  if (!jobs.length) return true;
  const list = jobs
    .map(
      (j) =>
        `• j-${j.job}${j.name ? ` ${j.name}` : ''} (${j.user}, team ${j.team}) on ${j.host}, ` +
        `${j.gpus} GPU${j.gpus === 1 ? '' : 's'}`,
    )
    .join('\n');
  const count = `${jobs.length} running job${jobs.length === 1 ? '' : 's'}`;
  return window.confirm(
    `${action} stops ${count} at ${fmtTime(impact.stops_at)}:\n\n${list}\n\nGo on?`,
  );
}
