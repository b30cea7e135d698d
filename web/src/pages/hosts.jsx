// Hosts: the fleet as the caller may see it (dedicated hosts of other teams do not exist for
// them), leases, and for one host its GPUs, events, lease calendar, admin actions and the output
// of the host task running now.
import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { useResource } from '../live.js';
import { useSession, isAdmin, canManageTeam, teamNames } from '../session.js';
import { fmtTime, since } from '../format.js';
import { ErrorNote, Loading, Empty, StateBadge, Field, TextInput } from '../components/ui.jsx';
import { useAction } from '../components/action.js';
import './hosts.css';

const DAY = 24 * 3600e3;
const CALENDAR_DAYS = 30;
const OPEN_LEASE = new Set(['requested', 'approved', 'active']);

export function HostsPage(props) {
  const name = props.name ?? props.params?.name ?? null;
  return name ? <HostDetail name={name} key={name} /> : <HostList />;
}

// "8 × H100, 2 × A100"
function gpuSummary(gpus) {
  if (!gpus?.length) return 'no GPUs';
  const by = new Map();
  for (const g of gpus) by.set(g.model, (by.get(g.model) ?? 0) + 1);
  return [...by].map(([m, n]) => `${n} × ${m}`).join(', ');
}

function Owner({ host }) {
  const pool = host.dedicated_to ?? (host.pool && host.pool !== 'shared' ? host.pool : null);
  return (
    <span>
      {pool ? `team ${pool}` : 'shared pool'}
      {host.handover_to && <small class="muted"> → {host.handover_to} (handover)</small>}
    </span>
  );
}

function LeaseCell({ lease }) {
  if (!lease) return <span class="muted">—</span>;
  return (
    <span>
      <StateBadge state={lease.state} /> {lease.team ?? 'another team'}
      <br />
      <small class="muted">
        {fmtTime(lease.start)} – {fmtTime(lease.end)}
      </small>
    </span>
  );
}

function HostList() {
  const { me } = useSession();
  const hosts = useResource('/hosts', ['hosts', 'leases']);
  const leases = useResource('/leases', ['leases']);
  const reload = () => {
    hosts.reload();
    leases.reload();
  };
  const list = hosts.data ?? [];
  return (
    <section class="hosts-page">
      <h1>Hosts</h1>
      <ErrorNote error={hosts.error} />
      {hosts.loading && !hosts.data && <Loading what="hosts" />}
      {hosts.data && !list.length && <Empty>No hosts you may see.</Empty>}
      {list.length > 0 && (
        <table data-testid="hosts-table">
          <thead>
            <tr>
              <th>Host</th>
              <th>State</th>
              <th>Admin state</th>
              <th>Owner</th>
              <th>Contour</th>
              <th>GPUs</th>
              <th>Agent</th>
              <th>Lease</th>
            </tr>
          </thead>
          <tbody>
            {list.map((h) => (
              <tr key={h.name} data-testid={`hostrow-${h.name}`}>
                <td>
                  <a href={`/hosts/${encodeURIComponent(h.name)}`}>{h.name}</a>
                </td>
                <td>
                  <StateBadge state={h.state} />
                </td>
                <td>
                  <StateBadge state={h.admin_state} />
                  {h.task && <small class="muted"> {h.task}</small>}
                </td>
                <td>
                  <Owner host={h} />
                </td>
                <td>{h.contour ?? '—'}</td>
                <td>{gpuSummary(h.gpus)}</td>
                <td>
                  {h.agent_version}{' '}
                  {h.simulated ? (
                    <span class="badge simulated" title={`GPU provider: ${h.gpu_provider}`}>
                      simulated
                    </span>
                  ) : (
                    <small class="muted">{h.gpu_provider}</small>
                  )}
                </td>
                <td>
                  <LeaseCell lease={h.lease} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <LeasesPanel leases={leases} me={me} onDone={reload} />
    </section>
  );
}

function LeaseActions({ lease, onDone }) {
  const act = useAction(onDone);
  const id = encodeURIComponent(lease.id);
  return (
    <span class="lease-actions">
      <button
        type="button"
        data-testid={`lease-approve-${lease.id}`}
        disabled={act.busy}
        onClick={() => act.run(() => api.post(`/leases/${id}/approve`, {}))}
      >
        Approve
      </button>
      <button
        type="button"
        class="danger"
        data-testid={`lease-reject-${lease.id}`}
        disabled={act.busy}
        onClick={() => {
          const reason = prompt('Reason for rejecting (optional)') ?? null;
          if (reason === null) return;
          act.run(() => api.post(`/leases/${id}/reject`, reason ? { reason } : {}));
        }}
      >
        Reject
      </button>
      <ErrorNote error={act.error} />
    </span>
  );
}

function leaseTarget(l) {
  if (l.hosts?.length) return l.hosts.join(', ');
  const parts = [`${l.count} host${l.count === 1 ? '' : 's'}`];
  if (l.gpu_model) parts.push(l.gpu_model);
  if (l.min_gpus) parts.push(`≥ ${l.min_gpus} GPUs`);
  return parts.join(', ');
}

function LeasesPanel({ leases, me, onDone }) {
  const open = (leases.data ?? []).filter((l) => OPEN_LEASE.has(l.state));
  const canRequest = isAdmin(me) || teamNames(me).some((t) => canManageTeam(me, t));
  return (
    <section class="panel" aria-labelledby="leases-h" data-testid="leases">
      <h2 id="leases-h">Leases</h2>
      <ErrorNote error={leases.error} />
      {leases.data && !open.length && <Empty>No requested, approved or active leases.</Empty>}
      {open.length > 0 && (
        <table>
          <thead>
            <tr>
              <th>Id</th>
              <th>Team</th>
              <th>State</th>
              <th>Hosts</th>
              <th>From</th>
              <th>To</th>
              <th>Reason</th>
              <th>Requested by</th>
              {isAdmin(me) && <th>Decision</th>}
            </tr>
          </thead>
          <tbody>
            {open.map((l) => (
              <tr key={l.id} data-testid={`lease-${l.id}`}>
                <td>{l.id}</td>
                <td>{l.team}</td>
                <td>
                  <StateBadge state={l.state} />
                </td>
                <td>{leaseTarget(l)}</td>
                <td>{fmtTime(l.start)}</td>
                <td>{fmtTime(l.end)}</td>
                <td>{l.reason || '—'}</td>
                <td>{l.requested_by}</td>
                {isAdmin(me) && (
                  <td>
                    {l.state === 'requested' ? <LeaseActions lease={l} onDone={onDone} /> : '—'}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {canRequest && <LeaseRequest me={me} onDone={onDone} />}
    </section>
  );
}

// A lease request: named hosts or a count. Times go to the server as typed (ISO 8601 or "+1d"),
// so its error names the field.
function LeaseRequest({ me, host, onDone }) {
  const teams = useResource(isAdmin(me) ? '/teams' : null, ['teams']);
  const choices = isAdmin(me)
    ? (teams.data ?? []).map((t) => t.name)
    : teamNames(me).filter((t) => canManageTeam(me, t));
  const [team, setTeam] = useState('');
  const [hosts, setHosts] = useState(host ?? '');
  const [count, setCount] = useState('');
  const [start, setStart] = useState('+1h');
  const [end, setEnd] = useState('+1d');
  const [reason, setReason] = useState('');
  const act = useAction(() => {
    setReason('');
    onDone();
  });
  const submit = (e) => {
    e.preventDefault();
    const body = { team: team || choices[0], start, end };
    const names = hosts.split(/[,\s]+/).filter(Boolean);
    if (names.length) body.hosts = names;
    if (count.trim() !== '') body.count = Number(count);
    if (reason) body.reason = reason;
    act.run(() => api.post('/leases', body));
  };
  return (
    <form class="lease-request" data-testid="lease-request-form" onSubmit={submit}>
      <h3>Request a lease</h3>
      <div class="row">
        <Field label="Team">
          <select
            name="team"
            value={team || choices[0]}
            onChange={(e) => setTeam(e.currentTarget.value)}
          >
            {choices.map((t) => (
              <option value={t}>{t}</option>
            ))}
          </select>
        </Field>
        <Field label="Hosts" hint="names, comma-separated">
          <TextInput name="hosts" value={hosts} set={setHosts} />
        </Field>
        {!host && (
          <Field label="or Count" hint="any hosts">
            <TextInput name="count" inputMode="numeric" size={4} value={count} set={setCount} />
          </Field>
        )}
        <Field label="Start" hint="ISO time or +1d">
          <TextInput name="start" value={start} set={setStart} required />
        </Field>
        <Field label="End" hint="ISO time or +2d">
          <TextInput name="end" value={end} set={setEnd} required />
        </Field>
        <Field label="Reason">
          <TextInput name="reason" value={reason} set={setReason} />
        </Field>
        <button type="submit" disabled={act.busy || !choices.length}>
          Request lease
        </button>
      </div>
      <ErrorNote error={act.error} />
    </form>
  );
}

function HostDetail({ name }) {
  const { me } = useSession();
  const n = encodeURIComponent(name);
  const host = useResource(`/hosts/${n}`, ['hosts', 'jobs']);
  const events = useResource(`/hosts/${n}/events`, ['hosts']);
  const leases = useResource('/leases', ['leases']);
  const reload = () => {
    host.reload();
    events.reload();
    leases.reload();
  };
  const h = host.data;
  return (
    <section class="hosts-page" data-testid="host-detail">
      <p>
        <a href="/hosts">← Hosts</a>
      </p>
      <h1>Host {name}</h1>
      <ErrorNote error={host.error} />
      {host.loading && !h && <Loading />}
      {h && (
        <>
          <div class="panel host-facts">
            <dl>
              <dt>State</dt>
              <dd>
                <StateBadge state={h.state} /> last seen {since(h.last_seen_at)} ago
              </dd>
              <dt>Admin state</dt>
              <dd data-testid="host-admin-state">
                <StateBadge state={h.admin_state} />
                {h.admin_reason && <span class="muted"> {h.admin_reason}</span>}
                {h.task && <span class="muted"> · running: {h.task}</span>}
              </dd>
              {h.admin_state === 'draining' && (
                <>
                  <dt>Drain</dt>
                  <dd>
                    {h.drain_reason || 'no reason given'}; deadline{' '}
                    {h.drain_deadline ? fmtTime(h.drain_deadline) : 'none (work may finish)'}
                  </dd>
                </>
              )}
              <dt>Owner</dt>
              <dd>
                <Owner host={h} />
              </dd>
              <dt>Contour</dt>
              <dd>{h.contour ?? '—'}</dd>
              <dt>Agent</dt>
              <dd>
                {h.agent_version} ·{' '}
                {h.simulated ? <span class="badge simulated">simulated</span> : h.gpu_provider} ·
                cgroup {h.cgroup} · run as owner: {h.run_as_owner}
              </dd>
              <dt>Resources</dt>
              <dd>
                {h.cpus} CPUs, {Math.round((h.memory_mib ?? 0) / 1024)} GiB memory · driver{' '}
                {h.driver_version ?? 'unknown'}, CUDA {h.cuda_version ?? 'unknown'}
              </dd>
              <dt>Health check</dt>
              <dd>{h.health_checked_at ? `passed ${fmtTime(h.health_checked_at)}` : '—'}</dd>
              <dt>Joined</dt>
              <dd>{fmtTime(h.joined_at)}</dd>
            </dl>
          </div>
          <GpuTable host={h} />
          <LeaseCalendar name={name} leases={leases} me={me} onDone={reload} />
          {isAdmin(me) && <AdminActions host={h} onDone={reload} />}
          {isAdmin(me) && <TaskOutput name={name} />}
        </>
      )}
      <EventsPanel events={events} />
    </section>
  );
}

function GpuTable({ host }) {
  return (
    <section class="panel" aria-labelledby="gpus-h">
      <h2 id="gpus-h">GPUs ({gpuSummary(host.gpus)})</h2>
      {host.gpus?.length ? (
        <table data-testid="host-gpus">
          <thead>
            <tr>
              <th class="num">#</th>
              <th>Model</th>
              <th class="num">Memory</th>
              <th>State</th>
              <th>Held by</th>
              <th>Dedicated to</th>
              <th>Shared</th>
              <th class="num">Utilisation</th>
            </tr>
          </thead>
          <tbody>
            {host.gpus.map((g) => {
              const holders = g.holders ?? [];
              const util = g.telemetry?.utilization_pct;
              return (
                <tr key={g.index}>
                  <td class="num">{g.index}</td>
                  <td>{g.model}</td>
                  <td class="num">{Math.round(g.memory_mib / 1024)} GiB</td>
                  <td>
                    <StateBadge state={holders.length ? 'allocated' : 'free'} />
                  </td>
                  <td>
                    {holders.length
                      ? holders.map((x) => (
                          <div>
                            {x.job_id ? <a href={`/work/${x.job_id}`}>job {x.job_id}</a> : 'a job'}{' '}
                            <span class="muted">
                              {x.team ?? 'another team'}
                              {x.user ? ` / ${x.user}` : ''}
                              {x.gpu_milli && x.gpu_milli < 1000
                                ? ` (${x.gpu_milli / 1000} GPU)`
                                : ''}
                            </span>
                          </div>
                        ))
                      : '—'}
                  </td>
                  <td>{g.dedicated_to ?? '—'}</td>
                  <td>{g.shared ? 'yes' : 'no'}</td>
                  <td class="num">
                    {util === undefined || util === null ? '—' : `${Math.round(util)}%`}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : (
        <Empty>No GPUs you may see.</Empty>
      )}
    </section>
  );
}

// The next 30 days as a strip; one bar per requested, approved or active lease of this host.
function LeaseCalendar({ name, leases, me, onDone }) {
  const now = Date.now();
  const endOfView = now + CALENDAR_DAYS * DAY;
  const mine = (leases.data ?? []).filter(
    (l) =>
      OPEN_LEASE.has(l.state) &&
      (l.hosts ?? []).includes(name) &&
      new Date(l.end).getTime() > now &&
      new Date(l.start).getTime() < endOfView,
  );
  const pct = (t) =>
    `${((Math.min(Math.max(t, now), endOfView) - now) / (endOfView - now)) * 100}%`;
  const ticks = [];
  for (let d = 0; d <= CALENDAR_DAYS; d += 5) ticks.push(d);
  const canRequest = isAdmin(me) || teamNames(me).some((t) => canManageTeam(me, t));
  return (
    <section class="panel" aria-labelledby="cal-h" data-testid="lease-calendar">
      <h2 id="cal-h">Leases, next {CALENDAR_DAYS} days</h2>
      <ErrorNote error={leases.error} />
      <div class="calendar">
        <div class="cal-axis" aria-hidden="true">
          {ticks.map((d) => (
            <span style={{ left: `${(d / CALENDAR_DAYS) * 100}%` }}>
              {new Date(now + d * DAY).toLocaleDateString(undefined, {
                month: 'short',
                day: 'numeric',
              })}
            </span>
          ))}
        </div>
        {mine.length === 0 && (
          <Empty>No leases of this host in the next {CALENDAR_DAYS} days.</Empty>
        )}
        <ul class="cal-rows">
          {mine.map((l) => {
            const s = new Date(l.start).getTime();
            const e = new Date(l.end).getTime();
            return (
              <li key={l.id} data-testid={`lease-bar-${l.id}`}>
                <div class="cal-track">
                  <div
                    class={`cal-bar lease-${l.state}`}
                    style={{ left: pct(s), width: `calc(${pct(e)} - ${pct(s)})` }}
                    title={`${l.team ?? 'another team'}: ${fmtTime(l.start)} – ${fmtTime(l.end)}`}
                  >
                    {l.team ?? 'another team'} · {l.state}
                  </div>
                </div>
                <div class="cal-label">
                  #{l.id} {fmtTime(l.start)} – {fmtTime(l.end)}
                  {l.reason ? ` · ${l.reason}` : ''}
                  {isAdmin(me) && l.state === 'requested' && (
                    <LeaseActions lease={l} onDone={onDone} />
                  )}
                </div>
              </li>
            );
          })}
        </ul>
      </div>
      {canRequest && <LeaseRequest me={me} host={name} onDone={onDone} />}
    </section>
  );
}

function AdminActions({ host, onDone }) {
  const n = encodeURIComponent(host.name);
  const act = useAction(onDone);
  const teams = useResource('/teams', ['teams']);
  const [deadline, setDeadline] = useState('');
  const [reason, setReason] = useState('');
  const [team, setTeam] = useState('');
  const [adminState, setAdminState] = useState('failed');
  const [profile, setProfile] = useState('');
  const [timeout, setTimeoutText] = useState('');
  // Only the fields given: the server applies its defaults to the rest.
  const opt = (o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== ''));
  const post = (what, body) => act.run(() => api.post(`/hosts/${n}/${what}`, body));
  const assigned = host.pool && host.pool !== 'shared';
  return (
    <section class="panel admin-actions" aria-labelledby="admin-h" data-testid="host-actions">
      <h2 id="admin-h">Admin actions</h2>
      <div class="row">
        <Field label="Deadline" hint="e.g. 30m; blank: work may finish">
          <TextInput name="deadline" size={8} value={deadline} set={setDeadline} />
        </Field>
        <Field label="Reason">
          <TextInput name="reason" value={reason} set={setReason} />
        </Field>
        <button
          type="button"
          data-testid="drain-button"
          disabled={act.busy}
          onClick={() => post('drain', opt({ deadline, reason }))}
        >
          Drain
        </button>
        <button
          type="button"
          class="secondary"
          data-testid="resume-button"
          disabled={act.busy}
          onClick={() => post('resume', {})}
        >
          Resume
        </button>
      </div>
      <div class="row">
        <Field label="Team">
          <select name="assign-team" value={team} onChange={(e) => setTeam(e.currentTarget.value)}>
            <option value="">choose…</option>
            {(teams.data ?? []).map((t) => (
              <option value={t.name}>{t.name}</option>
            ))}
          </select>
        </Field>
        <button
          type="button"
          data-testid="assign-button"
          disabled={act.busy}
          onClick={() => post('assign', opt({ team, deadline, reason }))}
        >
          Assign to team
        </button>
        <button
          type="button"
          class="secondary"
          data-testid="unassign-button"
          disabled={act.busy || !assigned}
          onClick={() => post('unassign', opt({ deadline, reason }))}
        >
          Back to shared pool
        </button>
        <small class="muted">Assign and unassign use the deadline and reason above.</small>
      </div>
      <div class="row">
        <Field label="Admin state">
          <select
            name="admin-state"
            value={adminState}
            onChange={(e) => setAdminState(e.currentTarget.value)}
          >
            <option value="failed">failed</option>
            <option value="retired">retired</option>
          </select>
        </Field>
        <button
          type="button"
          class="danger"
          data-testid="admin-state-button"
          disabled={act.busy}
          onClick={() => {
            if (confirm(`Mark ${host.name} ${adminState}?`))
              post('admin-state', opt({ state: adminState, reason }));
          }}
        >
          Set admin state
        </button>
        <Field label="Profile" hint="blank: default">
          <TextInput name="profile" size={10} value={profile} set={setProfile} />
        </Field>
        <Field label="Timeout" hint="e.g. 10m">
          <TextInput name="timeout" size={6} value={timeout} set={setTimeoutText} />
        </Field>
        <button
          type="button"
          class="secondary"
          data-testid="reprovision-button"
          disabled={act.busy}
          onClick={() => post('reprovision', opt({ profile, timeout }))}
        >
          Reprovision
        </button>
      </div>
      <ErrorNote error={act.error} />
    </section>
  );
}

// Follows the host task's output: polls quickly while a task runs, slowly otherwise (one may
// start: a handover, a reprovisioning). Offsets are bytes, so the next one counts UTF-8 bytes.
function TaskOutput({ name }) {
  const [state, setState] = useState({
    text: '',
    offset: 0,
    taskId: null,
    running: false,
    error: null,
  });
  useEffect(() => {
    let stop = false;
    let timer = null;
    let offset = 0;
    let taskId = null;
    let text = '';
    const enc = new TextEncoder();
    const tick = async () => {
      let running = false;
      try {
        const out = await api.get(
          `/hosts/${encodeURIComponent(name)}/task-output${query({ offset })}`,
        );
        if (stop) return;
        if (out.task_id !== taskId) {
          // A new task: its output starts afresh.
          taskId = out.task_id;
          text = '';
        }
        if (out.offset > offset && text) text += `\n[… ${out.offset - offset} bytes dropped …]\n`;
        text += out.data ?? '';
        offset = (out.offset ?? offset) + enc.encode(out.data ?? '').length;
        running = !!out.running;
        setState({ text, offset, taskId, running, error: null });
      } catch (error) {
        if (stop) return;
        setState((s) => ({ ...s, error }));
        if (error.status === 403 || error.status === 404) return;
      }
      timer = setTimeout(tick, running ? 2000 : 10000);
    };
    tick();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [name]);
  return (
    <section class="panel" aria-labelledby="task-h">
      <h2 id="task-h">
        Host task output{' '}
        {state.taskId ? `(task ${state.taskId}${state.running ? ', running' : ', done'})` : ''}
      </h2>
      <ErrorNote error={state.error} />
      <pre class="log" data-testid="task-output" aria-live="polite">
        {state.text || (state.running ? 'Waiting for output…' : 'No host task is running.')}
      </pre>
    </section>
  );
}

function EventsPanel({ events }) {
  const list = [...(events.data ?? [])].reverse();
  return (
    <section class="panel" aria-labelledby="events-h">
      <h2 id="events-h">Recent events</h2>
      <ErrorNote error={events.error} />
      {events.data && !list.length && <Empty>No events.</Empty>}
      {list.length > 0 && (
        <table data-testid="host-events">
          <thead>
            <tr>
              <th>When</th>
              <th>By</th>
              <th>Change</th>
              <th>Reason</th>
              <th>Output</th>
            </tr>
          </thead>
          <tbody>
            {list.slice(0, 50).map((ev) => (
              <tr key={ev.id}>
                <td>{fmtTime(ev.at)}</td>
                <td>{ev.by}</td>
                <td>
                  {ev.from} → {ev.to}
                </td>
                <td>{ev.reason ?? '—'}</td>
                <td>
                  {ev.output ? (
                    <details>
                      <summary>show</summary>
                      <pre class="log">{ev.output}</pre>
                    </details>
                  ) : (
                    '—'
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
