// The queue: work waiting for GPUs, in the scheduler's order, with its reason. Preempted work
// (`evicting`) is still running, so it is listed apart: it is making room for queued work.
import { useMemo, useState } from 'preact/hooks';
import { useResource } from '../live.js';
import { useSession, useTeamChoices, teamNames } from '../session.js';
import { fmtTime, fmtGpus, since, startsIn } from '../format.js';
import { ErrorNote, Loading, StateBadge, SelectField } from '../components/ui.jsx';
import { Table } from '../components/table.jsx';

const WAITING_COLS = [
  ['Position', 'num'],
  'Job',
  'Team',
  'User',
  'GPUs asked',
  ['Priority', 'num'],
  'Waiting since',
  'Expected start',
  'Reason',
];

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
  const teams = useTeamChoices(me, teamNames(me));

  const waiting = useMemo(() => [...(queued.data ?? [])].sort(byPosition), [queued.data]);
  const evicting = useMemo(() => (running.data ?? []).filter((j) => j.evicting), [running.data]);

  return (
    <section class="queue">
      <h1>Queue</h1>
      <div class="row">
        <SelectField
          label="Team"
          name="team"
          value={team}
          set={setTeam}
          options={[['', 'all I may see'], ...teams]}
        />
        <p class="muted">
          {waiting.length} waiting{evicting.length ? `, ${evicting.length} being preempted` : ''}
        </p>
      </div>
      <ErrorNote error={queued.error} />
      {queued.loading && !queued.data ? (
        <Loading what="the queue" />
      ) : (
        <Table
          testid="queue-table"
          cols={WAITING_COLS}
          rows={waiting}
          empty="Nothing is waiting."
          row={(j) => (
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
              <td
                data-testid={`expected-start-${j.id}`}
                title={
                  j.expected_start
                    ? fmtTime(j.expected_start)
                    : 'Known once the work ahead declares a max runtime'
                }
              >
                {startsIn(j.expected_start)}
              </td>
              <td class="muted">{j.reason ?? ''}</td>
            </tr>
          )}
        />
      )}
      {evicting.length > 0 && (
        <>
          <h2>Being preempted</h2>
          <Table
            testid="queue-evicting"
            cols={['Job', 'Team', 'User', 'GPUs', 'Host', 'Since', 'For']}
            rows={evicting}
            row={(j) => (
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
            )}
          />
        </>
      )}
    </section>
  );
}
