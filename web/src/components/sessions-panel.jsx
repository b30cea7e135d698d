// My sessions (docs/sessions.md): the user's Jupyter and command workspaces, with Open and Stop,
// and a form that starts one from a profile. A session is a job, so it changes on the `jobs`
// topic; what it may ask for comes from its profile (GET /profiles), the server checks it.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { useResource } from '../live.js';
import { useSession, teamNames, canSubmit, canManageTeam, isAdmin } from '../session.js';
import { fmtTime, fmtGpus, since } from '../format.js';
import { ErrorNote, Loading, Field, StateBadge } from './ui.jsx';
import { useAction } from './action.js';
import { GpuAmountFields } from './gpu-amount-fields.jsx';
import { parseMemory, fmtMib } from './memory.js';
import './sessions-panel.css';

const ENDED = new Set(['stopped', 'failed', 'lost']);
// States the server moves a session out of by itself; see the poll in SessionsPanel.
const MOVING = new Set(['queued', 'starting', 'stopping']);

function mayStop(me, s) {
  if (ENDED.has(s.state) || s.state === 'stopping') return false;
  return s.user === me.name || canManageTeam(me, s.team);
}

export function SessionsPanel() {
  const { me } = useSession();
  const [showEnded, setShowEnded] = useState(false);
  const sessions = useResource(showEnded ? '/sessions?ended=true' : '/sessions', ['jobs']);
  const stop = useAction(sessions.reload);
  const list = sessions.data ?? [];
  const mayCreate = isAdmin(me) || teamNames(me).some((t) => canSubmit(me, t));

  // "starting" ends when Jupyter first answers on the host, which the live stream may not
  // announce; while a session is between states, look again now and then so the badge (and
  // the Open link) follow without a reload.
  const moving = list.some((s) => MOVING.has(s.state));
  useEffect(() => {
    if (!moving) return undefined;
    const t = setInterval(sessions.reload, 3000);
    return () => clearInterval(t);
  }, [moving, sessions.reload]);

  function stopSession(s) {
    const scratch = s.storage === 'scratch' ? ' Its scratch storage is deleted.' : '';
    if (!window.confirm(`Stop session ${s.name}? Its kernels end.${scratch}`)) return;
    stop.run(() => api.post(`/sessions/${s.id}/stop`));
  }

  return (
    <section class="panel sessions" aria-labelledby="sessions-h" data-testid="sessions-panel">
      <div class="row sessions-head">
        <h2 id="sessions-h">Sessions</h2>
        <label class="inline">
          <input
            type="checkbox"
            name="show_ended"
            data-testid="sessions-show-ended"
            checked={showEnded}
            onChange={(e) => setShowEnded(e.currentTarget.checked)}
          />{' '}
          show ended
        </label>
      </div>
      <ErrorNote error={sessions.error} />
      <ErrorNote error={stop.error} />
      {sessions.loading && !sessions.data ? (
        <Loading what="sessions" />
      ) : (
        <table data-testid="sessions-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Profile</th>
              <th>State</th>
              <th>Host</th>
              <th>GPUs</th>
              <th>Storage</th>
              <th>Age</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.length === 0 && (
              <tr>
                <td colSpan={8} class="empty">
                  {showEnded ? 'No sessions.' : 'No live sessions.'}
                </td>
              </tr>
            )}
            {list.map((s) => (
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
                    <div class="muted">
                      {fmtMib(Math.ceil(s.storage_used_bytes / 1048576))} used
                    </div>
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
                    <button
                      type="button"
                      class="danger"
                      data-testid={`session-stop-${s.name}`}
                      disabled={stop.busy}
                      onClick={() => stopSession(s)}
                    >
                      Stop
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
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
  const allTeams = useResource(admin ? '/teams' : null, ['teams']);
  const projects = useResource('/projects', ['teams']);
  const myTeams = teamNames(me).filter((t) => canSubmit(me, t));
  // Platform admins may start sessions for any team; everyone else in their own.
  const teams = admin ? (allTeams.data ?? []).map((t) => t.name) : myTeams;

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
  const set = (k) => (e) => {
    const v = e.currentTarget.value;
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
  const team = f.team || (profile?.team && teams.includes(profile.team) ? profile.team : teams[0]);
  const teamProjects = (projects.data ?? []).filter((p) => p.team === team);

  function body() {
    const b = {};
    if (profileName) b.profile = profileName;
    // Sent as typed (not trimmed away): the server says what a name may hold.
    if (f.name !== '') b.name = f.name;
    if (team && (teams.length > 1 || admin)) b.team = team;
    if (f.project) b.project = f.project;
    if (f.gpu_fraction) {
      b.gpus = 1;
      b.gpu_milli = Number(f.gpu_fraction);
    } else if (f.gpus !== '') {
      b.gpus = /^\d+$/.test(f.gpus.trim()) ? Number(f.gpus) : f.gpus;
    }
    if (f.cpus !== '') {
      const n = Number(f.cpus);
      b.cpu_millis = Number.isFinite(n) ? Math.round(n * 1000) : f.cpus;
    }
    if (f.memory.trim() !== '') b.memory_mib = parseMemory(f.memory);
    if (storage) b.storage = storage;
    return b;
  }

  function submit(ev) {
    ev.preventDefault();
    act.run(() => api.post('/sessions', body()));
  }

  const error = act.error;
  const errField = error?.field ? (FIELD_OF[error.field] ?? error.field) : null;
  const inForm = errField && Object.values(FIELD_OF).includes(errField);
  const fieldError = (name) =>
    errField === name ? (
      <small class="error" id={`err-session-${name}`} role="alert" data-testid="new-session-error">
        {error.message}
      </small>
    ) : null;
  const aria = (name) =>
    errField === name ? { 'aria-invalid': 'true', 'aria-describedby': `err-session-${name}` } : {};
  const d = profile?.defaults;

  return (
    <form class="new-session" data-testid="new-session-form" onSubmit={submit} noValidate>
      <h3>New session</h3>
      <ErrorNote error={profiles.error} />
      <div class="row">
        <Field label="Profile">
          <select
            name="profile"
            data-testid="new-session-profile"
            value={profileName}
            onChange={set('profile')}
            {...aria('profile')}
          >
            {list.map((p) => (
              <option value={p.name}>{p.team ? `${p.name} (${p.team})` : p.name}</option>
            ))}
          </select>
          {fieldError('profile')}
        </Field>
        <Field label="Name">
          <input
            name="name"
            data-testid="new-session-name"
            value={f.name}
            onInput={set('name')}
            placeholder={profileName ? `${profileName}, numbered` : ''}
            autoComplete="off"
            spellCheck={false}
            {...aria('name')}
          />
          {fieldError('name')}
        </Field>
        {(teams.length > 1 || admin) && (
          <Field label="Team">
            <select name="team" value={team} onChange={set('team')} {...aria('team')}>
              {teams.map((t) => (
                <option value={t}>{t}</option>
              ))}
            </select>
            {fieldError('team')}
          </Field>
        )}
        {teamProjects.length > 0 && (
          <Field label="Project">
            <select name="project" value={f.project} onChange={set('project')} {...aria('project')}>
              <option value="">(none)</option>
              {teamProjects.map((p) => (
                <option value={p.name}>{p.name}</option>
              ))}
            </select>
            {fieldError('project')}
          </Field>
        )}
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
        <GpuAmountFields
          gpus={f.gpus}
          fraction={f.gpu_fraction}
          onGpus={set('gpus')}
          onFraction={set('gpu_fraction')}
          aria={aria}
          fieldError={fieldError}
          placeholder={String(d?.gpus ?? 0)}
          testId="new-session-gpus"
        />
        <Field label="CPU cores">
          <input
            name="cpus"
            type="number"
            min="0"
            step="0.25"
            class="short"
            value={f.cpus}
            onInput={set('cpus')}
            placeholder={d?.cpu_millis ? String(d.cpu_millis / 1000) : 'no limit'}
            {...aria('cpus')}
          />
          {fieldError('cpus')}
        </Field>
        <Field label="Memory (MiB, or 16Gi)">
          <input
            name="memory"
            class="short"
            value={f.memory}
            onInput={set('memory')}
            placeholder={d?.memory_mib ? fmtMib(d.memory_mib) : 'no limit'}
            autoComplete="off"
            {...aria('memory')}
          />
          {fieldError('memory')}
        </Field>
        <Field label="Storage">
          <select
            name="storage"
            data-testid="new-session-storage"
            value={storage}
            onChange={set('storage')}
            {...aria('storage')}
          >
            {storageKinds.map((k) => (
              <option value={k}>{k}</option>
            ))}
          </select>
          {fieldError('storage')}
        </Field>
        <button type="submit" data-testid="new-session-submit" disabled={act.busy || !profileName}>
          {act.busy ? 'Starting…' : 'Start session'}
        </button>
      </div>
      {error && !inForm && (
        <p class="error" role="alert" data-testid="new-session-error">
          {error.message}
          {error.field ? ` (field: ${error.field})` : ''}
        </p>
      )}
    </form>
  );
}
