// Hosts: the fleet as the caller may see it (dedicated hosts of other teams do not exist for
// them), leases, and for one host its GPUs, their utilisation over time, events, lease calendar,
// admin actions and the output of the host task running now.
import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { useResource } from '../live.js';
import { useSession, useTeamChoices, isAdmin, managedTeams } from '../session.js';
import { fmtTime, gpuSummary, since } from '../format.js';
import {
  ErrorNote,
  Loading,
  Empty,
  StateBadge,
  InputField,
  SelectField,
} from '../components/ui.jsx';
import { useAction, ActionButton, ActionForm } from '../components/action.jsx';
import { confirmStops } from '../components/confirm-stops.js';
import { useFields } from '../components/form-fields.jsx';
import { ResourceTable, Table } from '../components/table.jsx';
import { GpuHistory } from '../components/gpu-history.jsx';
import { ImageCachePanel } from './host-images.jsx';
import './hosts.css';

const HOUR = 3600e3;
const DAY = 24 * HOUR;
const CALENDAR_DAYS = 30;
const OPEN_LEASE = new Set(['requested', 'approved', 'active']);

export function HostsPage(props) {
  const name = props.name ?? props.params?.name ?? null;
  return name ? <HostDetail name={name} key={name} /> : <HostList />;
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
  return (
    <section class="hosts-page">
      <h1>Hosts</h1>
      <ResourceTable
        res={hosts}
        loading="hosts"
        empty="No hosts you may see."
        testid="hosts-table"
        cols={['Host', 'State', 'Admin state', 'Owner', 'Contour', 'GPUs', 'Agent', 'Lease']}
        row={(h) => (
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
        )}
      />
      <LeasesPanel leases={leases} me={me} onDone={reload} />
    </section>
  );
}

function LeaseActions({ lease, onDone }) {
  const act = useAction(onDone);
  const id = encodeURIComponent(lease.id);
  return (
    <span class="lease-actions">
      <ActionButton
        act={act}
        data-testid={`lease-approve-${lease.id}`}
        run={async () => {
          if (!(await confirmStops(`/leases/${id}/impact`, `Approving lease ${lease.id}`))) return;
          await api.post(`/leases/${id}/approve`, {});
        }}
      >
        Approve
      </ActionButton>
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
  return (
    <section class="panel" aria-labelledby="leases-h" data-testid="leases">
      <h2 id="leases-h">Leases</h2>
      <ResourceTable
        res={leases}
        rows={open}
        empty="No requested, approved or active leases."
        cols={[
          'Id',
          'Team',
          'State',
          'Hosts',
          'From',
          'To',
          'Reason',
          'Requested by',
          isAdmin(me) && 'Decision',
        ]}
        row={(l) => (
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
              <td>{l.state === 'requested' ? <LeaseActions lease={l} onDone={onDone} /> : '—'}</td>
            )}
          </tr>
        )}
      />
      {mayRequestLease(me) && <LeaseRequest me={me} onDone={onDone} />}
    </section>
  );
}

// Team-admins ask for leases for their teams; platform admins for any.
function mayRequestLease(me) {
  return isAdmin(me) || managedTeams(me).length > 0;
}

// A lease request: named hosts or a count. Times go to the server as typed (ISO 8601 or "+1d"),
// so its error names the field.
function LeaseRequest({ me, host, onDone }) {
  const choices = useTeamChoices(me, managedTeams(me));
  const { f, set, bind } = useFields({
    team: '',
    hosts: host ?? '',
    count: '',
    start: '+1h',
    end: '+1d',
    reason: '',
  });
  const team = f.team || choices[0];
  const act = useAction(() => {
    set('reason')('');
    onDone();
  });
  const request = () => {
    const body = { team, start: f.start, end: f.end };
    const names = f.hosts.split(/[,\s]+/).filter(Boolean);
    if (names.length) body.hosts = names;
    if (f.count.trim() !== '') body.count = Number(f.count);
    if (f.reason) body.reason = f.reason;
    return api.post('/leases', body);
  };
  return (
    <ActionForm act={act} run={request} class="lease-request" data-testid="lease-request-form">
      <h3>Request a lease</h3>
      <div class="row">
        <SelectField {...bind('team')} label="Team" value={team} options={choices} />
        <InputField {...bind('hosts')} label="Hosts" hint="names, comma-separated" />
        {!host && (
          <InputField
            {...bind('count')}
            label="or Count"
            hint="any hosts"
            inputMode="numeric"
            size={4}
          />
        )}
        <InputField {...bind('start')} label="Start" hint="ISO time or +1d" required />
        <InputField {...bind('end')} label="End" hint="ISO time or +2d" required />
        <InputField {...bind('reason')} label="Reason" />
        <button type="submit" disabled={act.busy || !choices.length}>
          Request lease
        </button>
      </div>
      <ErrorNote error={act.error} />
    </ActionForm>
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
          <UtilisationPanel host={h} />
          {h.images && (
            <ImageCachePanel
              name={name}
              mayRun={isAdmin(me) || (h.dedicated_to && managedTeams(me).includes(h.dedicated_to))}
            />
          )}
          <LeaseCalendar name={name} leases={leases} me={me} onDone={reload} />
          {isAdmin(me) && <AdminActions host={h} onDone={reload} />}
          {isAdmin(me) && <TaskOutput name={name} />}
        </>
      )}
      <EventsPanel events={events} />
    </section>
  );
}

const GPU_COLS = [
  ['#', 'num'],
  'Model',
  ['Memory', 'num'],
  'State',
  'Held by',
  'Dedicated to',
  'Shared',
  ['Utilisation', 'num'],
];

function GpuTable({ host }) {
  return (
    <section class="panel" aria-labelledby="gpus-h">
      <h2 id="gpus-h">GPUs ({gpuSummary(host.gpus)})</h2>
      {host.gpus?.length ? (
        <Table
          testid="host-gpus"
          cols={GPU_COLS}
          rows={host.gpus}
          row={(g) => {
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
          }}
        />
      ) : (
        <Empty>No GPUs you may see.</Empty>
      )}
    </section>
  );
}

const HISTORY_WINDOWS = [
  ['1h', 'Last hour', HOUR],
  ['24h', 'Last 24 hours', DAY],
  ['7d', 'Last 7 days', 7 * DAY],
];

// Each GPU's utilisation and memory over the last hour (or day, or week), one line per GPU.
function UtilisationPanel({ host }) {
  const [win, setWin] = useState('1h');
  const span = HISTORY_WINDOWS.find((w) => w[0] === win)[2];
  const gpus = (host.gpus ?? []).map((g) => ({
    host: host.name,
    index: g.index,
    label: `GPU ${g.index}`,
  }));
  return (
    <section class="panel" aria-labelledby="util-h" data-testid="host-utilisation">
      <div class="row chart-head">
        <h2 id="util-h">Utilisation</h2>
        <SelectField
          label="Window"
          name="history-window"
          value={win}
          set={setWin}
          options={HISTORY_WINDOWS.map(([k, label]) => [k, label])}
        />
      </div>
      {gpus.length ? (
        <GpuHistory
          gpus={gpus}
          from={`-${win}`}
          spanMs={span}
          testid="host-history"
          empty="No samples yet: the agent has not reported GPU readings in this window."
        />
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
      {mayRequestLease(me) && <LeaseRequest me={me} host={name} onDone={onDone} />}
    </section>
  );
}

function AdminActions({ host, onDone }) {
  const n = encodeURIComponent(host.name);
  const act = useAction(onDone);
  const teams = useResource('/teams', ['teams']);
  const { f, bind } = useFields({
    deadline: '',
    reason: '',
    team: '',
    state: 'failed',
    profile: '',
    timeout: '',
  });
  // Only the fields given: the server applies its defaults to the rest.
  const given = (...keys) =>
    Object.fromEntries(keys.map((k) => [k, f[k]]).filter(([, v]) => v !== ''));
  const assigned = host.pool && host.pool !== 'shared';
  const button = { act, host: n };
  return (
    <section class="panel admin-actions" aria-labelledby="admin-h" data-testid="host-actions">
      <h2 id="admin-h">Admin actions</h2>
      <div class="row">
        <InputField
          {...bind('deadline')}
          label="Deadline"
          hint="e.g. 30m; blank: work may finish"
          size={8}
        />
        <InputField {...bind('reason')} label="Reason" />
        <HostAction
          {...button}
          what="drain"
          body={given('deadline', 'reason')}
          impact={
            f.deadline ? `/hosts/${n}/impact?deadline=${encodeURIComponent(f.deadline)}` : null
          }
        >
          Drain
        </HostAction>
        <HostAction {...button} what="resume" body={{}} class="secondary">
          Resume
        </HostAction>
      </div>
      <div class="row">
        <SelectField
          {...bind('team')}
          name="assign-team"
          label="Team"
          options={[['', 'choose…'], ...(teams.data ?? []).map((t) => t.name)]}
        />
        <HostAction {...button} what="assign" body={given('team', 'deadline', 'reason')}>
          Assign to team
        </HostAction>
        <HostAction
          {...button}
          what="unassign"
          body={given('deadline', 'reason')}
          class="secondary"
          disabled={!assigned}
        >
          Back to shared pool
        </HostAction>
        <small class="muted">Assign and unassign use the deadline and reason above.</small>
      </div>
      <div class="row">
        <SelectField
          {...bind('state')}
          name="admin-state"
          label="Admin state"
          options={['failed', 'retired']}
        />
        <HostAction
          {...button}
          what="admin-state"
          body={given('state', 'reason')}
          class="danger"
          confirm={`Mark ${host.name} ${f.state}?`}
        >
          Set admin state
        </HostAction>
        <InputField {...bind('profile')} label="Profile" hint="blank: default" size={10} />
        <InputField {...bind('timeout')} label="Timeout" hint="e.g. 10m" size={6} />
        <HostAction
          {...button}
          what="reprovision"
          body={given('profile', 'timeout')}
          class="secondary"
        >
          Reprovision
        </HostAction>
      </div>
      <ErrorNote error={act.error} />
    </section>
  );
}

// An admin action's button: POST /hosts/{host}/{what} with `body`, marked `{what}-button`.
// `impact`: where allotd says what the action would stop; the user confirms that list first.
function HostAction({ act, host, what, body, impact, ...props }) {
  return (
    <ActionButton
      act={act}
      data-testid={`${what}-button`}
      run={async () => {
        if (impact && !(await confirmStops(impact, `Draining ${decodeURIComponent(host)}`))) return;
        await api.post(`/hosts/${host}/${what}`, body);
      }}
      {...props}
    />
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
  return (
    <section class="panel" aria-labelledby="events-h">
      <h2 id="events-h">Recent events</h2>
      <ResourceTable
        res={events}
        rows={[...(events.data ?? [])].reverse().slice(0, 50)}
        empty="No events."
        testid="host-events"
        cols={['When', 'By', 'Change', 'Reason', 'Output']}
        row={(ev) => (
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
        )}
      />
    </section>
  );
}
