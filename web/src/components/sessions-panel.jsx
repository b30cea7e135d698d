// My sessions (docs/sessions.md): the user's Jupyter and command workspaces, with Open and Stop,
// and a form that starts one from a profile. A session is a job, so it changes on the `jobs`
// topic; what it may ask for comes from its profile (GET /profiles), the server checks it.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { useResource } from '../live.js';
import {
  useSession,
  useTeamChoices,
  submittableTeams,
  canManageTeam,
  isAdmin,
  preferredTeam,
  rememberTeam,
} from '../session.js';
import { fmtTime, fmtGpus, since } from '../format.js';
import { ErrorNote, Loading, StateBadge, Checkbox, InputField, SelectField } from './ui.jsx';
import { useAction, ActionButton, ActionForm } from './action.jsx';
import { Table } from './table.jsx';
import { fieldErrors, binder, scaled } from './form-fields.jsx';
import { GpuAmountFields, CpuField, TeamField, ProjectField, gpuAmount } from './work-fields.jsx';
import { parseMemory, fmtMib } from './memory.js';
import './sessions-panel.css';

const ENDED = new Set(['stopped', 'failed', 'lost']);
// States the server moves a session out of by itself; see the poll in SessionsPanel.
const MOVING = new Set(['queued', 'starting', 'stopping']);

const SESSION_COLS = ['Name', 'Profile', 'State', 'Host', 'GPUs', 'Storage', 'Age', 'Actions'];

function mayStop(me, s) {
  if (ENDED.has(s.state) || s.state === 'stopping') return false;
  return s.user === me.name || canManageTeam(me, s.team);
}

function scratchNote(s) {
  return s.storage === 'scratch' ? ' Its scratch storage is deleted.' : '';
}

export function SessionsPanel() {
  const { me } = useSession();
  const [showEnded, setShowEnded] = useState(false);
  const sessions = useResource(showEnded ? '/sessions?ended=true' : '/sessions', ['jobs']);
  const stop = useAction(sessions.reload);
  const list = sessions.data ?? [];
  const mayCreate = isAdmin(me) || submittableTeams(me).length > 0;

  // "starting" ends when Jupyter first answers on the host, which the live stream may not
  // announce; while a session is between states, look again now and then so the badge (and
  // the Open link) follow without a reload.
  const moving = list.some((s) => MOVING.has(s.state));
  useEffect(() => {
    if (!moving) return undefined;
    const t = setInterval(sessions.reload, 3000);
    return () => clearInterval(t);
  }, [moving, sessions.reload]);

  return (
    <section class="panel sessions" aria-labelledby="sessions-h" data-testid="sessions-panel">
      <div class="row sessions-head">
        <h2 id="sessions-h">Sessions</h2>
        <Checkbox
          name="show_ended"
          data-testid="sessions-show-ended"
          checked={showEnded}
          set={setShowEnded}
        >
          show ended
        </Checkbox>
      </div>
      <ErrorNote error={sessions.error} />
      <ErrorNote error={stop.error} />
      {sessions.loading && !sessions.data ? (
        <Loading what="sessions" />
      ) : (
        <Table
          testid="sessions-table"
          cols={SESSION_COLS}
          rows={list}
          empty={showEnded ? 'No sessions.' : 'No live sessions.'}
          row={(s) => (
            <tr key={s.id} data-testid={`session-row-${s.name}`}>
              <td>
                <strong>{s.name}</strong>
                {s.team && (
                  <div class="muted">{s.project ? `${s.team} / ${s.project}` : s.team}</div>
                )}
              </td>
              <td>{s.profile}</td>
              <td>
                <span data-testid={`session-state-${s.name}`}>
                  <StateBadge state={s.state} />
                </span>
                {s.reason && <div class="reason">{s.reason}</div>}
              </td>
              <td>{s.host ?? '—'}</td>
              <td>{fmtGpus(s)}</td>
              <td data-testid={`session-storage-${s.name}`}>
                {s.storage}
                {s.storage_used_bytes != null && (
                  <div class="muted">{fmtMib(Math.ceil(s.storage_used_bytes / 1048576))} used</div>
                )}
                {s.ssh && (
                  <div class="muted" title={`SSH as ${s.ssh.user}`}>
                    <code>allot ssh {s.name}</code>
                  </div>
                )}
              </td>
              <td title={fmtTime(s.created_at)}>
                {since(s.created_at)}
                {s.ended_at && <div class="muted">ended {since(s.ended_at)} ago</div>}
              </td>
              <td class="actions">
                {s.state === 'running' && s.url && (
                  <a
                    href={s.url}
                    target="_blank"
                    rel="noopener"
                    class="button"
                    data-testid={`session-open-${s.name}`}
                  >
                    Open Jupyter
                  </a>
                )}
                {mayStop(me, s) && (
                  <ActionButton
                    act={stop}
                    class="danger"
                    data-testid={`session-stop-${s.name}`}
                    confirm={`Stop session ${s.name}? Its kernels end.${scratchNote(s)}`}
                    run={() => api.post(`/sessions/${s.id}/stop`)}
                  >
                    Stop
                  </ActionButton>
                )}
              </td>
            </tr>
          )}
        />
      )}
      {mayCreate ? (
        <NewSession onDone={sessions.reload} />
      ) : (
        <p class="muted">Your role lets you see your team's sessions, not start one.</p>
      )}
    </section>
  );
}

// What a profile gives (defaults) or allows (maxima), as people say it.
function resources(r, zero) {
  if (!r) return zero;
  const parts = [];
  if (r.gpus) {
    parts.push(r.gpu_milli && r.gpu_milli < 1000 ? `${r.gpu_milli / 1000} GPU` : `${r.gpus} GPU`);
  }
  if (r.cpu_millis) parts.push(`${r.cpu_millis / 1000} CPU`);
  if (r.memory_mib) parts.push(fmtMib(r.memory_mib));
  return parts.length ? parts.join(', ') : zero;
}

// The API's field names -> the form's inputs, so a 400 lands next to what the user typed.
const FIELD_OF = {
  profile: 'profile',
  name: 'name',
  team: 'team',
  project: 'project',
  gpus: 'gpus',
  gpu_milli: 'gpu_fraction',
  cpu_millis: 'cpus',
  memory_mib: 'memory',
  storage: 'storage',
};

function NewSession({ onDone }) {
  const { me } = useSession();
  const admin = isAdmin(me);
  const profiles = useResource('/profiles', ['teams']);
  const projects = useResource('/projects', ['teams']);
  // Platform admins may start sessions for any team; everyone else in their own.
  const teams = useTeamChoices(me, submittableTeams(me));

  const empty = {
    profile: '',
    name: '',
    team: '',
    project: '',
    gpus: '',
    gpu_fraction: '',
    cpus: '',
    memory: '',
    storage: '',
  };
  const [f, setF] = useState(empty);
  const set = (k) => (v) => {
    if (k === 'team') rememberTeam(v);
    // A new profile offers other storage: keep the choice only if it still offers it.
    setF((prev) => ({ ...prev, [k]: v, ...(k === 'profile' ? { storage: '' } : {}) }));
  };
  const act = useAction(() => {
    setF((prev) => ({ ...empty, profile: prev.profile, team: prev.team }));
    onDone();
  });

  const list = profiles.data ?? [];
  // Sessions without a profile named use `jupyter`; the form starts there when it exists.
  const profileName =
    f.profile || (list.some((p) => p.name === 'jupyter') ? 'jupyter' : (list[0]?.name ?? ''));
  const profile = list.find((p) => p.name === profileName);
  const storageKinds = profile?.storage?.length ? profile.storage : [];
  const storage = f.storage || storageKinds[0] || '';
  // A team's own profile runs in that team; otherwise the team picked last, as in the launch form.
  const team =
    f.team || (profile?.team && teams.includes(profile.team) ? profile.team : preferredTeam(teams));
  const teamProjects = (projects.data ?? []).filter((p) => p.team === team);

  function body() {
    const b = {};
    if (profileName) b.profile = profileName;
    // Sent as typed (not trimmed away): the server says what a name may hold.
    if (f.name !== '') b.name = f.name;
    if (team && (teams.length > 1 || admin)) b.team = team;
    if (f.project) b.project = f.project;
    Object.assign(b, gpuAmount(f.gpus, f.gpu_fraction));
    if (f.cpus !== '') b.cpu_millis = scaled(f.cpus, 1000);
    if (f.memory.trim() !== '') b.memory_mib = parseMemory(f.memory);
    if (storage) b.storage = storage;
    return b;
  }

  const start = () => api.post('/sessions', body());
  const errors = fieldErrors(act.error, FIELD_OF, {
    id: 'err-session-',
    testid: 'new-session-error',
  });
  const bind = binder(f, set, errors);
  const d = profile?.defaults;

  return (
    <ActionForm act={act} run={start} class="new-session" data-testid="new-session-form" noValidate>
      <h3>New session</h3>
      <ErrorNote error={profiles.error} />
      <div class="row">
        <SelectField
          {...bind('profile')}
          label="Profile"
          data-testid="new-session-profile"
          value={profileName}
          options={list.map((p) => [p.name, p.team ? `${p.name} (${p.team})` : p.name])}
        />
        <InputField
          {...bind('name')}
          label="Name"
          data-testid="new-session-name"
          placeholder={profileName ? `${profileName}, numbered` : ''}
          autoComplete="off"
          spellCheck={false}
        />
        <TeamField bind={bind} value={team} teams={teams} admin={admin} />
        {teamProjects.length > 0 && <ProjectField bind={bind} projects={teamProjects} />}
      </div>
      {profile && (
        <p class="muted profile-note" data-testid="new-session-profile-note">
          {profile.description && <>{profile.description.replace(/\.$/, '')}. </>}
          Default: {resources(profile.defaults, 'no GPU')}; at most:{' '}
          {resources(profile.maxima, 'no limit')}.
          {profile.max_lifetime && profile.max_lifetime !== '0s' && (
            <> Ends after {profile.max_lifetime}.</>
          )}
          {profile.idle?.after && (
            <>
              {' '}
              Idle after {profile.idle.after} under {profile.idle.threshold_percent}% GPU.
            </>
          )}
        </p>
      )}
      <div class="row">
        <GpuAmountFields bind={bind} placeholder={String(d?.gpus ?? 0)} testId="new-session-gpus" />
        <CpuField
          {...bind('cpus')}
          placeholder={d?.cpu_millis ? String(d.cpu_millis / 1000) : 'no limit'}
        />
        <InputField
          {...bind('memory')}
          label="Memory (MiB, or 16Gi)"
          class="short"
          placeholder={d?.memory_mib ? fmtMib(d.memory_mib) : 'no limit'}
          autoComplete="off"
        />
        <SelectField
          {...bind('storage')}
          label="Storage"
          data-testid="new-session-storage"
          value={storage}
          options={storageKinds}
        />
        <button type="submit" data-testid="new-session-submit" disabled={act.busy || !profileName}>
          {act.busy ? 'Starting…' : 'Start session'}
        </button>
      </div>
      {!errors.inForm && <ErrorNote error={act.error} testid="new-session-error" />}
    </ActionForm>
  );
}
