// Teams: the teams I belong to (every team for platform admins), and for one team its quota and
// position, projects and their split, members and roles, and idle policy. Edits are offered by
// role (session.js), but the server decides: its refusal is shown next to the form.
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useResource } from '../live.js';
import { useSession, teamNames, isAdmin, canManageTeam } from '../session.js';
import { fmtTime, teamColor } from '../format.js';
import { ErrorNote, Loading, Empty, Field, TextInput } from '../components/ui.jsx';
import { useAction } from '../components/action.js';
import { fmtGpuMap, parseGpuMap } from '../components/gpumap.js';
import './teams.css';

const ROLES = ['viewer', 'member', 'team-admin'];

export function TeamsPage(props) {
  const team = props.team ?? props.params?.team ?? null;
  const { me } = useSession();
  const teams = useResource('/teams', ['teams']);
  const mine = new Set(teamNames(me));
  // The server lists what the caller may see; platform admins see all teams, others their own.
  const list = (teams.data ?? []).filter((t) => isAdmin(me) || mine.has(t.name));
  // With one team there is nothing to choose: show it.
  const shown = team ?? (list.length === 1 ? list[0].name : null);

  return (
    <section class="teams-page">
      <h1>Teams</h1>
      <div class="teams-layout">
        <aside class="panel teams-list">
          <h2>{isAdmin(me) ? 'All teams' : 'My teams'}</h2>
          <ErrorNote error={teams.error} />
          {teams.loading && !teams.data && <Loading />}
          {teams.data && !list.length && <Empty>No teams.</Empty>}
          <ul>
            {list.map((t) => (
              <li key={t.name}>
                <a
                  href={`/teams/${encodeURIComponent(t.name)}`}
                  data-testid={`team-${t.name}`}
                  aria-current={t.name === shown ? 'page' : undefined}
                >
                  <span class="swatch" style={{ background: teamColor(t.name) }} />
                  {t.name}
                </a>
                {mine.has(t.name) && <small class="muted"> {me.teams[t.name]}</small>}
              </li>
            ))}
          </ul>
          {isAdmin(me) && <CreateTeam onDone={teams.reload} />}
        </aside>
        <div class="teams-detail">
          {shown ? (
            <TeamDetail team={shown} me={me} key={shown} />
          ) : (
            <p class="muted">Choose a team to see its quota, projects, members and idle policy.</p>
          )}
        </div>
      </div>
    </section>
  );
}

// A one-field form that creates something by name (a team, a project) and clears itself.
function CreateByName({ label, button, testid, cls, create, onDone }) {
  const [name, setName] = useState('');
  const act = useAction(() => {
    setName('');
    onDone();
  });
  return (
    <form
      class={cls}
      data-testid={testid}
      onSubmit={(e) => {
        e.preventDefault();
        act.run(() => create(name));
      }}
    >
      <Field label={label}>
        <TextInput name="name" value={name} set={setName} required />
      </Field>
      <button type="submit" disabled={act.busy}>
        {button}
      </button>
      <ErrorNote error={act.error} />
    </form>
  );
}

function CreateTeam({ onDone }) {
  return (
    <CreateByName
      label="New team"
      button="Create team"
      testid="create-team-form"
      cls="create-team"
      create={(name) => api.post('/teams', { name })}
      onDone={onDone}
    />
  );
}

function TeamDetail({ team, me }) {
  const t = encodeURIComponent(team);
  const quota = useResource(`/teams/${t}/quota`, ['teams']);
  const members = useResource(`/teams/${t}/members`, ['teams', 'users']);
  const projects = useResource('/projects', ['teams']);
  const policy = useResource(`/teams/${t}/idle-policy`, ['teams']);
  const manage = canManageTeam(me, team);

  if (quota.error?.status === 404) {
    return <ErrorNote error={quota.error} />;
  }
  const reloadQuota = () => {
    quota.reload();
    projects.reload();
  };
  return (
    <div>
      <h2 class="team-title">
        <span class="swatch" style={{ background: teamColor(team) }} />
        {team}
      </h2>
      <QuotaPanel team={team} quota={quota} me={me} onDone={reloadQuota} />
      <ProjectsPanel
        team={team}
        quota={quota.data}
        projects={projects}
        manage={manage}
        onDone={reloadQuota}
      />
      <MembersPanel team={team} members={members} manage={manage} />
      <IdlePolicyPanel policy={policy} />
    </div>
  );
}

function limit(v) {
  return v === null || v === undefined ? 'no limit' : String(v);
}

function QuotaPanel({ team, quota, me, onDone }) {
  const q = quota.data;
  const [editing, setEditing] = useState(false);
  return (
    <section class="panel" data-testid="team-quota" aria-labelledby="quota-h">
      <h2 id="quota-h">Quota</h2>
      <ErrorNote error={quota.error} />
      {quota.loading && !q && <Loading />}
      {q && (
        <div class="quota-grid">
          <dl>
            <dt>Guaranteed</dt>
            <dd data-testid="quota-guaranteed">{fmtGpuMap(q.guaranteed)}</dd>
            <dt>Borrow limit</dt>
            <dd>{limit(q.borrow_limit)}</dd>
            <dt>Lend limit</dt>
            <dd>{q.lend_limit === null || q.lend_limit === undefined ? 'all' : q.lend_limit}</dd>
            <dt>Weight</dt>
            <dd>{q.weight}</dd>
            <dt>Lends dedicated</dt>
            <dd>{q.lend_dedicated ? 'yes' : 'no'}</dd>
            <dt>Contour limits</dt>
            <dd>{fmtGpuMap(q.contour_limits)}</dd>
          </dl>
          <div>
            <h3>Position (last scheduling pass)</h3>
            {q.status ? (
              <table class="position" data-testid="quota-status">
                <thead>
                  <tr>
                    <th class="num">Guaranteed</th>
                    <th class="num">Within</th>
                    <th class="num">Borrowed</th>
                    <th class="num">Lendable</th>
                    <th class="num">Share</th>
                  </tr>
                </thead>
                <tbody>
                  <tr>
                    <td class="num">{num(q.status.guaranteed)}</td>
                    <td class="num">{num(q.status.within)}</td>
                    <td class="num">{num(q.status.borrowed)}</td>
                    <td class="num">{num(q.status.lendable)}</td>
                    <td class="num">{num(q.status.share)}</td>
                  </tr>
                </tbody>
              </table>
            ) : (
              <Empty>No scheduling pass has looked at this team yet.</Empty>
            )}
          </div>
        </div>
      )}
      {q && isAdmin(me) && !editing && (
        <button type="button" class="secondary" onClick={() => setEditing(true)}>
          Change quota
        </button>
      )}
      {q && isAdmin(me) && editing && (
        <QuotaForm
          team={team}
          q={q}
          onClose={() => setEditing(false)}
          onDone={() => {
            setEditing(false);
            onDone();
          }}
        />
      )}
    </section>
  );
}

function num(v) {
  if (v === null || v === undefined) return '—';
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

// Blank number fields mean "no limit" (null), as the API has it.
function nullableNumber(text) {
  const s = text.trim();
  if (s === '') return null;
  const n = Number(s);
  return Number.isNaN(n) ? s : n;
}

function QuotaForm({ team, q, onClose, onDone }) {
  const [guaranteed, setGuaranteed] = useState(fmtGpuMap(q.guaranteed).replace('—', ''));
  const [borrow, setBorrow] = useState(q.borrow_limit ?? '');
  const [lend, setLend] = useState(q.lend_limit ?? '');
  const [weight, setWeight] = useState(q.weight ?? 1);
  const [lendDedicated, setLendDedicated] = useState(!!q.lend_dedicated);
  const act = useAction(onDone);
  const submit = (e) => {
    e.preventDefault();
    act.run(() =>
      api.put(`/teams/${encodeURIComponent(team)}/quota`, {
        guaranteed: parseGpuMap(guaranteed),
        borrow_limit: nullableNumber(String(borrow)),
        lend_limit: nullableNumber(String(lend)),
        weight: Number(weight),
        lend_dedicated: lendDedicated,
      }),
    );
  };
  return (
    <form class="quota-form" data-testid="quota-form" onSubmit={submit}>
      <div class="row">
        <Field label="Guaranteed" hint="GPU model=count, e.g. A100=4, any=2">
          <TextInput name="guaranteed" value={guaranteed} set={setGuaranteed} />
        </Field>
        <Field label="Borrow limit" hint="blank: no limit">
          <TextInput name="borrow_limit" inputMode="numeric" value={borrow} set={setBorrow} />
        </Field>
        <Field label="Lend limit" hint="blank: all">
          <TextInput name="lend_limit" inputMode="numeric" value={lend} set={setLend} />
        </Field>
        <Field label="Weight">
          <TextInput name="weight" inputMode="decimal" value={weight} set={setWeight} />
        </Field>
        <label class="check">
          <input
            type="checkbox"
            checked={lendDedicated}
            onChange={(e) => setLendDedicated(e.currentTarget.checked)}
          />
          Lend idle dedicated capacity
        </label>
      </div>
      <div class="row">
        <button type="submit" disabled={act.busy}>
          Save quota
        </button>
        <button type="button" class="secondary" onClick={onClose}>
          Cancel
        </button>
      </div>
      <ErrorNote error={act.error} />
    </form>
  );
}

function ProjectsPanel({ team, quota, projects, manage, onDone }) {
  // GET /projects names them all; the quota lists each project's split.
  const split = new Map((quota?.projects ?? []).map((p) => [p.name, p.guaranteed]));
  const list = (projects.data ?? []).filter((p) => p.team === team);
  for (const name of split.keys()) {
    if (!list.some((p) => p.name === name)) list.push({ name, team });
  }
  return (
    <section class="panel" data-testid="team-projects" aria-labelledby="projects-h">
      <h2 id="projects-h">Projects</h2>
      <ErrorNote error={projects.error} />
      {projects.loading && !projects.data && <Loading />}
      {projects.data && !list.length && <Empty>No projects yet.</Empty>}
      {list.length > 0 && (
        <table>
          <thead>
            <tr>
              <th>Project</th>
              <th>Share of the guarantee</th>
              <th>Created</th>
              {manage && <th>Change split</th>}
            </tr>
          </thead>
          <tbody>
            {list.map((p) => (
              <tr key={p.name} data-testid={`project-${p.name}`}>
                <td>{p.name}</td>
                <td>{fmtGpuMap(split.get(p.name) ?? p.guaranteed)}</td>
                <td>{fmtTime(p.created_at)}</td>
                {manage && (
                  <td>
                    <SplitForm
                      team={team}
                      project={p.name}
                      current={split.get(p.name) ?? p.guaranteed}
                      onDone={onDone}
                    />
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {manage && <CreateProject team={team} onDone={onDone} />}
    </section>
  );
}

function SplitForm({ team, project, current, onDone }) {
  const [text, setText] = useState(fmtGpuMap(current).replace('—', ''));
  const act = useAction(onDone);
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        act.run(() =>
          api.put(
            `/teams/${encodeURIComponent(team)}/projects/${encodeURIComponent(project)}/quota`,
            { guaranteed: parseGpuMap(text) },
          ),
        );
      }}
    >
      <TextInput
        aria-label={`Guaranteed GPUs for project ${project}`}
        placeholder="any=2"
        value={text}
        set={setText}
      />
      <button type="submit" class="secondary" disabled={act.busy}>
        Set
      </button>
      <ErrorNote error={act.error} />
    </form>
  );
}

function CreateProject({ team, onDone }) {
  return (
    <CreateByName
      label="New project"
      button="Create project"
      testid="create-project-form"
      cls="row"
      create={(name) => api.post('/projects', { name, team })}
      onDone={onDone}
    />
  );
}

function MembersPanel({ team, members, manage }) {
  const base = `/teams/${encodeURIComponent(team)}/members/`;
  const act = useAction(members.reload);
  return (
    <section class="panel" data-testid="team-members" aria-labelledby="members-h">
      <h2 id="members-h">Members</h2>
      <ErrorNote error={members.error} />
      {members.loading && !members.data && <Loading />}
      {members.data && !members.data.length && <Empty>No members.</Empty>}
      {members.data && members.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th>User</th>
              <th>Role</th>
              <th>Kind</th>
              <th>Source</th>
              {manage && <th>Actions</th>}
            </tr>
          </thead>
          <tbody>
            {members.data.map((m) => (
              <tr key={m.user} data-testid={`member-${m.user}`}>
                <td>{m.user}</td>
                <td>
                  {manage ? (
                    <select
                      aria-label={`Role of ${m.user}`}
                      value={m.role}
                      disabled={act.busy}
                      onChange={(e) => {
                        const role = e.currentTarget.value;
                        act.run(() => api.put(base + encodeURIComponent(m.user), { role }));
                      }}
                    >
                      {ROLES.map((r) => (
                        <option value={r}>{r}</option>
                      ))}
                    </select>
                  ) : (
                    m.role
                  )}
                </td>
                <td>{m.kind}</td>
                <td>{m.source}</td>
                {manage && (
                  <td>
                    <button
                      type="button"
                      class="danger"
                      disabled={act.busy}
                      onClick={() => {
                        if (confirm(`Remove ${m.user} from ${team}?`)) {
                          act.run(() => api.del(base + encodeURIComponent(m.user)));
                        }
                      }}
                    >
                      Remove
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ErrorNote error={act.error} />
      {manage && <AddMember base={base} onDone={members.reload} />}
    </section>
  );
}

function AddMember({ base, onDone }) {
  const [user, setUser] = useState('');
  const [role, setRole] = useState('member');
  const act = useAction(() => {
    setUser('');
    onDone();
  });
  return (
    <form
      class="row add-member"
      data-testid="add-member-form"
      onSubmit={(e) => {
        e.preventDefault();
        act.run(() => api.put(base + encodeURIComponent(user.trim()), { role }));
      }}
    >
      <Field label="User">
        <TextInput name="user" value={user} set={setUser} required />
      </Field>
      <Field label="Role">
        <select name="role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
          {ROLES.map((r) => (
            <option value={r}>{r}</option>
          ))}
        </select>
      </Field>
      <button type="submit" disabled={act.busy}>
        Add member
      </button>
      <ErrorNote error={act.error} />
    </form>
  );
}

function IdlePolicyPanel({ policy }) {
  const p = policy.data;
  return (
    <section class="panel" data-testid="team-idle-policy" aria-labelledby="idle-h">
      <h2 id="idle-h">Idle policy</h2>
      <ErrorNote error={policy.error} />
      {policy.loading && !p && <Loading />}
      {p && (
        <dl>
          <dt>In effect from</dt>
          <dd>{p.source}</dd>
          <dt>Idle below</dt>
          <dd>
            {p.threshold_percent}% for {p.after}
          </dd>
          <dt>Action</dt>
          <dd>
            {p.action}
            {p.action === 'reclaim' ? ` after a grace of ${p.grace}` : ''}
          </dd>
          <dt>Webhook</dt>
          <dd>{p.webhook ?? (p.webhook_set ? 'set (hidden)' : 'none')}</dd>
        </dl>
      )}
    </section>
  );
}
