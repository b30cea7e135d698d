// Session profiles (docs/sessions.md): the ones this user may use, and, for platform admins
// (platform-wide profiles) and team-admins (their team's), a form to define one and a delete
// button. Sessions themselves will start from these.
import { api, ApiError } from '../api.js';
import { useResource } from '../live.js';
import { useSession, isAdmin, canManageTeam, managedTeams } from '../session.js';
import { ErrorNote, InputField, SelectField, Checkbox } from '../components/ui.jsx';
import { useAction, ActionButton } from '../components/action.jsx';
import { ResourceTable } from '../components/table.jsx';
import { splitCommand } from '../components/shellwords.js';
import { useFields } from '../components/form-fields.jsx';

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
  const teamsIAdmin = managedTeams(me);
  const mayCreate = isAdmin(me) || teamsIAdmin.length > 0;
  return (
    <section class="panel" aria-labelledby="profiles-h" data-testid="profiles">
      <h2 id="profiles-h">Session profiles</h2>
      <ResourceTable
        res={profiles}
        empty="No profile you may use."
        testid="profiles-table"
        cols={PROFILE_COLS}
        row={(p) => (
          <tr key={p.name} data-testid={`profile-${p.name}`}>
            <td title={p.description}>
              <strong>{p.name}</strong>
              {p.description && <div class="muted">{p.description}</div>}
            </td>
            <td>{p.team ?? (p.visible_to?.length ? p.visible_to.join(', ') : 'every team')}</td>
            <td>
              <code>{(p.command ?? []).join(' ')}</code>
              {p.image && (
                <div class="muted">
                  in <code>{p.image}</code>
                </div>
              )}
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
                <ActionButton
                  act={act}
                  class="secondary"
                  confirm={`Delete profile ${p.name}?`}
                  run={() => api.del(`/profiles/${encodeURIComponent(p.name)}`)}
                >
                  Delete
                </ActionButton>
              )}
            </td>
          </tr>
        )}
      >
        <ErrorNote error={act.error} />
      </ResourceTable>
      {mayCreate && (
        <CreateProfile teams={teamsIAdmin} platformWide={isAdmin(me)} onDone={profiles.reload} />
      )}
    </section>
  );
}

const PROFILE_COLS = [
  'Name',
  'For',
  'Command',
  'Default',
  'Maximum',
  'Storage',
  'Idle after',
  'Lifetime',
  '',
];

function CreateProfile({ teams, platformWide, onDone }) {
  const empty = {
    name: '',
    team: platformWide ? '' : teams[0],
    description: '',
    command: '',
    image: '',
    gpus: '0',
    max_gpus: '',
    cpus: '',
    memory_gib: '',
    storage: ['scratch'],
    idle_threshold: '5',
    idle_after: '30m',
    max_lifetime: '',
    visible_to: '',
  };
  const { f, setF, bind } = useFields(empty);
  const act = useAction(() => {
    setF(empty);
    onDone();
  });
  const num = (s) => (s === '' ? 0 : Number(s));

  // A command that does not split (an unbalanced quote) is refused on its field, as the server
  // refuses a bad one, rather than thrown out of the handler.
  function command() {
    try {
      return splitCommand(f.command);
    } catch (e) {
      throw new ApiError(400, { error: { message: e.message, field: 'command' } });
    }
  }

  function submit(ev) {
    ev.preventDefault();
    act.run(() => api.post('/profiles', bodyOf()));
  }

  function bodyOf() {
    const body = {
      name: f.name.trim(),
      description: f.description,
      command: command(),
      defaults: {
        gpus: num(f.gpus),
        cpu_millis: Math.round(num(f.cpus) * 1000),
        memory_mib: Math.round(num(f.memory_gib) * 1024),
      },
      maxima: { gpus: num(f.max_gpus) },
      storage: f.storage,
      idle: { threshold_percent: num(f.idle_threshold), after: f.idle_after },
    };
    if (f.team) body.team = f.team;
    if (f.image.trim()) body.image = f.image.trim();
    if (f.max_lifetime) body.max_lifetime = f.max_lifetime;
    if (!f.team && f.visible_to.trim()) {
      body.visible_to = f.visible_to
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    }
    return body;
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
        <InputField {...bind('name')} label="Name" required />
        <SelectField
          {...bind('team')}
          label="For"
          options={[
            ...(platformWide ? [['', 'every team (platform-wide)']] : []),
            ...teams.map((t) => [t, `team ${t}`]),
          ]}
        />
        {!f.team && (
          <InputField
            {...bind('visible_to')}
            label="Only for teams"
            hint="comma-separated; blank: every team"
          />
        )}
        <InputField {...bind('description')} label="Description" />
      </div>
      <InputField
        {...bind('command')}
        label="Command"
        hint="the environment's server, e.g. /opt/venvs/torch/bin/jupyter-server"
        required
      />
      <InputField
        {...bind('image')}
        label="Image"
        hint="REGISTRY/REPOSITORY:TAG the session runs in; blank: the team's default, or the host"
      />
      <div class="row">
        <InputField {...bind('gpus')} label="GPUs by default" inputMode="numeric" size={4} />
        <InputField
          {...bind('max_gpus')}
          label="GPUs at most"
          hint="blank: no limit"
          inputMode="numeric"
          size={4}
        />
        <InputField {...bind('cpus')} label="CPU cores" inputMode="decimal" size={4} />
        <InputField {...bind('memory_gib')} label="Memory (GiB)" inputMode="decimal" size={5} />
        <fieldset class="storage">
          <legend>Storage</legend>
          {STORAGE_KINDS.map((k) => (
            <Checkbox
              name={`storage_${k}`}
              checked={f.storage.includes(k)}
              set={(on) => toggleStorage(k, on)}
            >
              {k}
            </Checkbox>
          ))}
        </fieldset>
        <InputField
          {...bind('idle_threshold')}
          label="Idle under (%)"
          inputMode="decimal"
          size={4}
        />
        <InputField {...bind('idle_after')} label="Idle for" size={5} />
        <InputField
          {...bind('max_lifetime')}
          label="Lifetime at most"
          hint="e.g. 12h; blank: none"
          size={5}
        />
        <button type="submit" disabled={act.busy}>
          Create profile
        </button>
      </div>
      <ErrorNote error={act.error} />
    </form>
  );
}
