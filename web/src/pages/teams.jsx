// Teams: the teams I belong to (every team for platform admins), and for one team its quota and
// position, projects and their split, members and roles, and idle policy. Edits are offered by
// role (session.js), but the server decides: its refusal is shown next to the form.
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { useResource } from '../live.js';
import { useSession, useTeamColors, teamNames, isAdmin, canManageTeam } from '../session.js';
import { fmtTime } from '../format.js';
import {
  ErrorNote,
  Loading,
  Empty,
  TextInput,
  Select,
  InputField,
  SelectField,
} from '../components/ui.jsx';
import { useAction, ActionButton, ActionForm } from '../components/action.jsx';
import { useFields } from '../components/form-fields.jsx';
import { ResourceTable, TableHead } from '../components/table.jsx';
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
  const colorOf = useTeamColors(me);

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
                  <span class="swatch" style={{ background: colorOf(t.name) }} />
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
            <TeamDetail team={shown} me={me} color={colorOf(shown)} key={shown} />
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
    <ActionForm act={act} run={() => create(name)} class={cls} data-testid={testid}>
      <InputField label={label} name="name" value={name} set={setName} required />
      <button type="submit" disabled={act.busy}>
        {button}
      </button>
      <ErrorNote error={act.error} />
    </ActionForm>
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

function TeamDetail({ team, me, color }) {
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
        <span class="swatch" style={{ background: color }} />
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
  return v === null || v === undefined ? 'unlimited' : String(v);
}

// The columns of the team's position, all numbers, with what each means on hover.
const POSITION_COLS = ['Guaranteed', 'Within', 'Borrowed', 'Lendable', 'Fair share'];

// The guarantee as set, all models together.
function configuredGuarantee(q) {
  return Object.values(q.guaranteed ?? {}).reduce((a, n) => a + (Number(n) || 0), 0);
}

// Said where the scheduler scales the guarantee down: the teams' guarantees add up to more than
// the pool has (hosts away, or set with "overcommit").
function ScaledNote({ q }) {
  const effective = q.status?.guaranteed;
  if (effective === undefined || effective + 0.0005 >= configuredGuarantee(q)) return null;
  return (
    <span class="note" data-testid="quota-scaled">
      {' '}
      (now {num(effective)}: the teams' guarantees add up to more than the pool has, so each is
      scaled down in proportion)
    </span>
  );
}

// One bar of the team's position: in use within the guarantee, the idle rest of it (others may
// borrow what is lendable), and borrowed beyond it; the guarantee's end is marked.
function QuotaBar({ status }) {
  const { guaranteed = 0, within = 0, borrowed = 0, lendable = 0 } = status;
  const scale = Math.max(guaranteed, within + borrowed, 1);
  const pct = (v) => `${(100 * Math.max(0, v)) / scale}%`;
  const idle = Math.max(0, guaranteed - within);
  const parts = [
    ['within', within, `${num(within)} in use within the guarantee`],
    ['idle', idle, `${num(idle)} of the guarantee idle, ${num(lendable)} of it lendable`],
    ['borrowed', borrowed, `${num(borrowed)} borrowed beyond the guarantee`],
  ];
  return (
    <div class="quota-bar-wrap">
      <div
        class="quota-bar"
        role="img"
        data-testid="quota-bar"
        aria-label={parts.map((p) => p[2]).join('; ')}
      >
        {parts.map(([kind, v, title]) =>
          v > 0 ? <span class={`seg ${kind}`} style={{ width: pct(v) }} title={title} /> : null,
        )}
        {guaranteed > 0 && (
          <span class="limit" style={{ left: pct(guaranteed) }} title="the guarantee" />
        )}
      </div>
      <p class="legend">
        <span class="swatch within" /> within guarantee <span class="swatch idle" /> idle guarantee{' '}
        <span class="swatch borrowed" /> borrowed
      </p>
    </div>
  );
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
            <dd data-testid="quota-guaranteed">
              {Object.keys(q.guaranteed ?? {}).length ? fmtGpuMap(q.guaranteed) : '0 GPUs'}
              <ScaledNote q={q} />
            </dd>
            <dt>Borrow limit</dt>
            <dd>{limit(q.borrow_limit)}</dd>
            <dt>Lend limit</dt>
            <dd>
              {q.lend_limit === null || q.lend_limit === undefined
                ? 'all idle guarantee'
                : q.lend_limit}
            </dd>
            <dt>Weight</dt>
            <dd>{q.weight}</dd>
            <dt>Lends dedicated</dt>
            <dd>{q.lend_dedicated ? 'yes' : 'no'}</dd>
            <dt>Contour limits</dt>
            <dd>
              {Object.keys(q.contour_limits ?? {}).length
                ? fmtGpuMap(q.contour_limits)
                : 'unlimited'}
            </dd>
          </dl>
          <div>
            <h3>Position (last scheduling pass)</h3>
            {q.status && <QuotaBar status={q.status} />}
            {q.status ? (
              <table class="position" data-testid="quota-status">
                <TableHead cols={POSITION_COLS.map((c) => [c, 'num'])} />
                <tbody>
                  <tr>
                    <td class="num">{num(q.status.guaranteed)}</td>
                    <td class="num">{num(q.status.within)}</td>
                    <td class="num">{num(q.status.borrowed)}</td>
                    <td class="num">{num(q.status.lendable)}</td>
                    <td
                      class="num"
                      title="GPUs it holds now plus its recent average, per unit of weight; when teams borrow, the lowest goes first"
                    >
                      {num(q.status.share)}
                    </td>
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
  const { f, set, bind } = useFields({
    guaranteed: fmtGpuMap(q.guaranteed).replace('—', ''),
    borrow_limit: q.borrow_limit ?? '',
    lend_limit: q.lend_limit ?? '',
    weight: q.weight ?? 1,
    lend_dedicated: !!q.lend_dedicated,
    overcommit: false,
  });
  const act = useAction(onDone);
  const save = () =>
    api.put(`/teams/${encodeURIComponent(team)}/quota`, {
      guaranteed: parseGpuMap(f.guaranteed),
      borrow_limit: nullableNumber(String(f.borrow_limit)),
      lend_limit: nullableNumber(String(f.lend_limit)),
      weight: Number(f.weight),
      lend_dedicated: f.lend_dedicated,
      ...(f.overcommit ? { overcommit: true } : {}),
    });
  return (
    <ActionForm act={act} run={save} class="quota-form" data-testid="quota-form">
      <div class="row">
        <InputField
          {...bind('guaranteed')}
          label="Guaranteed"
          hint="GPU model=count, e.g. A100=4, any=2"
        />
        <InputField
          {...bind('borrow_limit')}
          label="Borrow limit"
          hint="blank: unlimited"
          inputMode="numeric"
        />
        <InputField
          {...bind('lend_limit')}
          label="Lend limit"
          hint="blank: all"
          inputMode="numeric"
        />
        <InputField {...bind('weight')} label="Weight" inputMode="decimal" />
        <label class="check">
          <input
            type="checkbox"
            checked={f.lend_dedicated}
            onChange={(e) => set('lend_dedicated')(e.currentTarget.checked)}
          />
          Lend idle dedicated capacity
        </label>
        <label class="check">
          <input
            type="checkbox"
            data-testid="quota-overcommit"
            checked={f.overcommit}
            onChange={(e) => set('overcommit')(e.currentTarget.checked)}
          />
          Allow more than the pool has (every team's guarantee is scaled down)
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
    </ActionForm>
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
      <ResourceTable
        res={projects}
        rows={list}
        loading
        empty="No projects yet."
        cols={['Project', 'Share of the guarantee', 'Created', manage && 'Change split']}
        row={(p) => (
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
        )}
      />
      {manage && <CreateProject team={team} onDone={onDone} />}
    </section>
  );
}

function SplitForm({ team, project, current, onDone }) {
  const [text, setText] = useState(fmtGpuMap(current).replace('—', ''));
  const act = useAction(onDone);
  return (
    <ActionForm
      act={act}
      run={() =>
        api.put(
          `/teams/${encodeURIComponent(team)}/projects/${encodeURIComponent(project)}/quota`,
          { guaranteed: parseGpuMap(text) },
        )
      }
      class="inline"
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
    </ActionForm>
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
      <ResourceTable
        res={members}
        loading
        empty="No members."
        cols={['User', 'Role', 'Kind', 'Source', manage && 'Actions']}
        row={(m) => (
          <tr key={m.user} data-testid={`member-${m.user}`}>
            <td>{m.user}</td>
            <td>
              {manage ? (
                <Select
                  aria-label={`Role of ${m.user}`}
                  value={m.role}
                  disabled={act.busy}
                  set={(role) =>
                    act.run(() => api.put(base + encodeURIComponent(m.user), { role }))
                  }
                  options={ROLES}
                />
              ) : (
                m.role
              )}
            </td>
            <td>{m.kind}</td>
            <td>{m.source}</td>
            {manage && (
              <td>
                <ActionButton
                  act={act}
                  class="danger"
                  confirm={`Remove ${m.user} from ${team}?`}
                  run={() => api.del(base + encodeURIComponent(m.user))}
                >
                  Remove
                </ActionButton>
              </td>
            )}
          </tr>
        )}
      />
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
    <ActionForm
      act={act}
      run={() => api.put(base + encodeURIComponent(user.trim()), { role })}
      class="row add-member"
      data-testid="add-member-form"
    >
      <InputField label="User" name="user" value={user} set={setUser} required />
      <SelectField label="Role" name="role" value={role} set={setRole} options={ROLES} />
      <button type="submit" disabled={act.busy}>
        Add member
      </button>
      <ErrorNote error={act.error} />
    </ActionForm>
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
