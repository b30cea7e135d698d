// Session profiles (docs/sessions.md): the ones this user may use, and, for platform admins
// (platform-wide profiles) and team-admins (their team's), a form to define one and a delete
// button. Sessions themselves will start from these.
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useResource } from '../live.js';
import { useSession, isAdmin, teamNames, canManageTeam } from '../session.js';
import { ErrorNote, Empty, Field, TextInput } from '../components/ui.jsx';
import { useAction } from '../components/action.js';
import { splitCommand } from '../components/shellwords.js';

const STORAGE_KINDS = ['scratch', 'local', 'shared'];

function resources(r) {
  if (!r) return '—';
  const parts = [];
  if (r.gpus) {
    parts.push(r.gpu_milli && r.gpu_milli < 1000 ? `${r.gpu_milli / 1000} GPU` : `${r.gpus} GPU`);
  }
  if (r.cpu_millis) parts.push(`${r.cpu_millis / 1000} CPU`);
  if (r.memory_mib) parts.push(`${(r.memory_mib / 1024).toFixed(0)} GiB`);
  return parts.length ? parts.join(', ') : 'none';
}

// May `me` delete or replace profile `p`?
function mayManage(me, p) {
  return p.team ? canManageTeam(me, p.team) : isAdmin(me);
}

export function ProfilesPanel() {
  const { me } = useSession();
  const profiles = useResource('/profiles', ['teams']);
  const act = useAction(profiles.reload);
  const list = profiles.data ?? [];
  const teamsIAdmin = teamNames(me).filter((t) => canManageTeam(me, t));
  const mayCreate = isAdmin(me) || teamsIAdmin.length > 0;
  return (
    <section class="panel" aria-labelledby="profiles-h" data-testid="profiles">
      <h2 id="profiles-h">Session profiles</h2>
      <ErrorNote error={profiles.error} />
      <ErrorNote error={act.error} />
      {profiles.data && !list.length && <Empty>No profile you may use.</Empty>}
      {list.length > 0 && (
        <table data-testid="profiles-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>For</th>
              <th>Command</th>
              <th>Default</th>
              <th>Maximum</th>
              <th>Storage</th>
              <th>Idle after</th>
              <th>Lifetime</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((p) => (
              <tr key={p.name} data-testid={`profile-${p.name}`}>
                <td title={p.description}>
                  <strong>{p.name}</strong>
                  {p.description && <div class="muted">{p.description}</div>}
                </td>
                <td>{p.team ?? (p.visible_to?.length ? p.visible_to.join(', ') : 'every team')}</td>
                <td>
                  <code>{(p.command ?? []).join(' ')}</code>
                </td>
                <td>{resources(p.defaults)}</td>
                <td>{resources(p.maxima)}</td>
                <td>{(p.storage ?? []).join(', ')}</td>
                <td>
                  {p.idle?.after ?? '—'}
                  {p.idle ? ` under ${p.idle.threshold_percent}%` : ''}
                </td>
                <td>{p.max_lifetime && p.max_lifetime !== '0s' ? p.max_lifetime : 'none'}</td>
                <td>
                  {mayManage(me, p) && (
                    <button
                      type="button"
                      class="secondary"
                      disabled={act.busy}
                      onClick={() =>
                        confirm(`Delete profile ${p.name}?`) &&
                        act.run(() => api.del(`/profiles/${encodeURIComponent(p.name)}`))
                      }
                    >
                      Delete
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {mayCreate && (
        <CreateProfile teams={teamsIAdmin} platformWide={isAdmin(me)} onDone={profiles.reload} />
      )}
    </section>
  );
}

function CreateProfile({ teams, platformWide, onDone }) {
  const empty = {
    name: '',
    team: platformWide ? '' : teams[0],
    description: '',
    command: '',
    gpus: '0',
    maxGpus: '',
    cpus: '',
    memoryGib: '',
    storage: ['scratch'],
    idleThreshold: '5',
    idleAfter: '30m',
    maxLifetime: '',
    visibleTo: '',
  };
  const [f, setF] = useState(empty);
  const set = (k) => (v) => setF((x) => ({ ...x, [k]: v }));
  const act = useAction(() => {
    setF(empty);
    onDone();
  });
  const num = (s) => (s === '' ? 0 : Number(s));

  function submit(ev) {
    ev.preventDefault();
    const body = {
      name: f.name.trim(),
      description: f.description,
      command: splitCommand(f.command),
      defaults: {
        gpus: num(f.gpus),
        cpu_millis: Math.round(num(f.cpus) * 1000),
        memory_mib: Math.round(num(f.memoryGib) * 1024),
      },
      maxima: { gpus: num(f.maxGpus) },
      storage: f.storage,
      idle: { threshold_percent: num(f.idleThreshold), after: f.idleAfter },
    };
    if (f.team) body.team = f.team;
    if (f.maxLifetime) body.max_lifetime = f.maxLifetime;
    if (!f.team && f.visibleTo.trim()) {
      body.visible_to = f.visibleTo
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    }
    act.run(() => api.post('/profiles', body));
  }

  const toggleStorage = (kind, on) =>
    setF((x) => ({
      ...x,
      storage: on ? [...x.storage, kind] : x.storage.filter((k) => k !== kind),
    }));

  return (
    <form class="profile-form" data-testid="profile-create-form" onSubmit={submit}>
      <h3>New profile</h3>
      <div class="row">
        <Field label="Name">
          <TextInput name="name" required value={f.name} set={set('name')} />
        </Field>
        <Field label="For">
          <select name="team" value={f.team} onChange={(e) => set('team')(e.currentTarget.value)}>
            {platformWide && <option value="">every team (platform-wide)</option>}
            {teams.map((t) => (
              <option value={t}>team {t}</option>
            ))}
          </select>
        </Field>
        {!f.team && (
          <Field label="Only for teams" hint="comma-separated; blank: every team">
            <TextInput name="visible_to" value={f.visibleTo} set={set('visibleTo')} />
          </Field>
        )}
        <Field label="Description">
          <TextInput name="description" value={f.description} set={set('description')} />
        </Field>
      </div>
      <Field
        label="Command"
        hint="the environment's server, e.g. /opt/venvs/torch/bin/jupyter-server"
      >
        <TextInput name="command" required value={f.command} set={set('command')} />
      </Field>
      <div class="row">
        <Field label="GPUs by default">
          <TextInput name="gpus" inputMode="numeric" size={4} value={f.gpus} set={set('gpus')} />
        </Field>
        <Field label="GPUs at most" hint="blank: no limit">
          <TextInput
            name="max_gpus"
            inputMode="numeric"
            size={4}
            value={f.maxGpus}
            set={set('maxGpus')}
          />
        </Field>
        <Field label="CPU cores">
          <TextInput name="cpus" inputMode="decimal" size={4} value={f.cpus} set={set('cpus')} />
        </Field>
        <Field label="Memory (GiB)">
          <TextInput
            name="memory_gib"
            inputMode="decimal"
            size={5}
            value={f.memoryGib}
            set={set('memoryGib')}
          />
        </Field>
        <fieldset class="storage">
          <legend>Storage</legend>
          {STORAGE_KINDS.map((k) => (
            <label class="inline">
              <input
                type="checkbox"
                name={`storage_${k}`}
                checked={f.storage.includes(k)}
                onChange={(e) => toggleStorage(k, e.currentTarget.checked)}
              />{' '}
              {k}
            </label>
          ))}
        </fieldset>
        <Field label="Idle under (%)">
          <TextInput
            name="idle_threshold"
            inputMode="decimal"
            size={4}
            value={f.idleThreshold}
            set={set('idleThreshold')}
          />
        </Field>
        <Field label="Idle for">
          <TextInput name="idle_after" size={5} value={f.idleAfter} set={set('idleAfter')} />
        </Field>
        <Field label="Lifetime at most" hint="e.g. 12h; blank: none">
          <TextInput name="max_lifetime" size={5} value={f.maxLifetime} set={set('maxLifetime')} />
        </Field>
        <button type="submit" disabled={act.busy}>
          Create profile
        </button>
      </div>
      <ErrorNote error={act.error} />
    </form>
  );
}
