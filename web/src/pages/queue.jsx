// The queue: work waiting for GPUs, in the scheduler's order, with its reason. Preempted work
// (`evicting`) is still running, so it is listed apart: it is making room for queued work.
import { useMemo, useState } from 'preact/hooks';
import { useResource } from '../live.js';
import { useSession, teamNames, isAdmin } from '../session.js';
import { fmtTime, fmtGpus, since } from '../format.js';
import { ErrorNote, Loading, StateBadge } from '../components/ui.jsx';

function byPosition(a, b) {
  const pa = a.position ?? Infinity;
  const pb = b.position ?? Infinity;
  return pa - pb || a.id - b.id;
}

export function QueuePage() {
  const { me } = useSession();
  const [team, setTeam] = useState('');
  const teamQuery = team ? `&team=${encodeURIComponent(team)}` : '';
  const queued = useResource(`/jobs?state=queued&limit=10000${teamQuery}`, ['jobs']);
  const running = useResource(`/jobs?state=running&limit=10000${teamQuery}`, ['jobs']);
  // Platform admins may filter by any team; others see only their own teams anyway.
  const teamsRes = useResource(isAdmin(me) ? '/teams' : null, ['teams']);
  const teams = isAdmin(me) ? (teamsRes.data ?? []).map((t) => t.name) : teamNames(me);

  const waiting = useMemo(() => [...(queued.data ?? [])].sort(byPosition), [queued.data]);
  const evicting = useMemo(() => (running.data ?? []).filter((j) => j.evicting), [running.data]);

  return (
    <section class="queue">
      <h1>Queue</h1>
      <div class="row">
        <label class="field">
          <span>Team</span>
          <select name="team" value={team} onChange={(e) => setTeam(e.currentTarget.value)}>
            <option value="">all I may see</option>
            {teams.map((t) => (
              <option value={t}>{t}</option>
            ))}
          </select>
        </label>
        <p class="muted">
          {waiting.length} waiting{evicting.length ? `, ${evicting.length} being preempted` : ''}
        </p>
      </div>
      <ErrorNote error={queued.error} />
      {queued.loading && !queued.data ? (
        <Loading what="the queue" />
      ) : (
        <table data-testid="queue-table">
          <thead>
            <tr>
              <th class="num">Position</th>
              <th>Job</th>
              <th>Team</th>
              <th>User</th>
              <th>GPUs asked</th>
              <th class="num">Priority</th>
              <th>Waiting since</th>
              <th>Reason</th>
            </tr>
          </thead>
          <tbody>
            {waiting.length === 0 && (
              <tr>
                <td colSpan={8} class="empty">
                  Nothing is waiting.
                </td>
              </tr>
            )}
            {waiting.map((j) => (
              <tr key={j.id} data-testid={`queue-${j.id}`}>
                <td class="num">{j.position ?? '—'}</td>
                <td>
                  <a href={`/work/${j.id}`}>
                    {j.id}
                    {j.name ? ` ${j.name}` : ''}
                  </a>
                </td>
                <td>
                  {j.team}
                  {j.project ? ` / ${j.project}` : ''}
                </td>
                <td>{j.user}</td>
                <td>
                  {fmtGpus(j)}
                  {j.gpu_models?.length ? ` (${j.gpu_models.join(', ')})` : ''}
                </td>
                <td class="num">{j.priority}</td>
                <td title={fmtTime(j.submitted_at)}>{since(j.submitted_at)}</td>
                <td class="muted">{j.reason ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {evicting.length > 0 && (
        <>
          <h2>Being preempted</h2>
          <table data-testid="queue-evicting">
            <thead>
              <tr>
                <th>Job</th>
                <th>Team</th>
                <th>User</th>
                <th>GPUs</th>
                <th>Host</th>
                <th>Since</th>
                <th>For</th>
              </tr>
            </thead>
            <tbody>
              {evicting.map((j) => (
                <tr key={j.id} data-testid={`queue-${j.id}`}>
                  <td>
                    <a href={`/work/${j.id}`}>{j.id}</a> <StateBadge state="evicting" />
                  </td>
                  <td>{j.team}</td>
                  <td>{j.user}</td>
                  <td>{fmtGpus(j)}</td>
                  <td>{j.host ?? '—'}</td>
                  <td title={fmtTime(j.evicting_since)}>{since(j.evicting_since)}</td>
                  <td>{j.evicted_for != null ? `job ${j.evicted_for}` : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
