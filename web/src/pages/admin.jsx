// Admin: for everyone, their own API tokens and the session profiles they may use (team-admins
// and platform admins define them); for platform admins also users, teams, pools, host join
// tokens and the audit log. A secret (API or join token) is shown once, right after it is
// made: the server keeps only its hash.
import { useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { useResource } from '../live.js';
import { useSession, isAdmin } from '../session.js';
import { fmtTime } from '../format.js';
import { ErrorNote, Loading, Empty, StateBadge, Field, TextInput } from '../components/ui.jsx';
import { useAction } from '../components/action.js';
import { ProfilesPanel } from './profiles-panel.jsx';
import './admin.css';

export function AdminPage() {
  const { me } = useSession();
  const admin = isAdmin(me);
  return (
    <section class="admin-page">
      <h1>{admin ? 'Administration' : 'My account'}</h1>
      <TokensPanel me={me} />
      <ProfilesPanel />
      {admin && (
        <>
          <UsersPanel />
          <TeamsPanel />
          <PoolsPanel />
          <JoinTokensPanel />
          <AuditPanel />
        </>
      )}
    </section>
  );
}

function Secret({ label, value, testid, onDismiss }) {
  return (
    <div class="secret" role="status">
      <p>
        <strong>{label}</strong> It is shown once only: copy it now.
      </p>
      <code data-testid={testid}>{value}</code>
      <div class="row">
        <button
          type="button"
          class="secondary"
          onClick={() => navigator.clipboard?.writeText(value)}
        >
          Copy
        </button>
        <button type="button" class="secondary" onClick={onDismiss}>
          Done
        </button>
      </div>
    </div>
  );
}

function TokensPanel({ me }) {
  const tokens = useResource('/tokens', ['users']);
  const [name, setName] = useState('');
  const [expires, setExpires] = useState('30d');
  const [secret, setSecret] = useState(null);
  const create = useAction((out) => {
    setSecret(out?.token ?? null);
    setName('');
    tokens.reload();
  });
  const revoke = useAction(tokens.reload);
  const list = tokens.data ?? [];
  return (
    <section class="panel" aria-labelledby="tokens-h">
      <h2 id="tokens-h">My API tokens ({me.name})</h2>
      <ErrorNote error={tokens.error} />
      {tokens.loading && !tokens.data && <Loading />}
      {tokens.data && !list.length && <Empty>No tokens.</Empty>}
      {list.length > 0 && (
        <table data-testid="tokens-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Id</th>
              <th>Kind</th>
              <th>Created</th>
              <th>Expires</th>
              <th>Revoke</th>
            </tr>
          </thead>
          <tbody>
            {list.map((t) => (
              <tr key={t.id} data-testid={`token-${t.id}`}>
                <td>{t.name || '—'}</td>
                <td>
                  <code>{t.id}</code>
                </td>
                <td>{t.kind}</td>
                <td>{fmtTime(t.created_at)}</td>
                <td>{t.expires_at ? fmtTime(t.expires_at) : 'never'}</td>
                <td>
                  <button
                    type="button"
                    class="danger"
                    disabled={revoke.busy}
                    onClick={() => {
                      const what =
                        t.kind === 'session'
                          ? ' This is a console session: it may be this one.'
                          : '';
                      if (confirm(`Revoke token ${t.name || t.id}?${what}`)) {
                        revoke.run(() => api.del(`/tokens/${encodeURIComponent(t.id)}`));
                      }
                    }}
                  >
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ErrorNote error={revoke.error} />
      <form
        class="row token-form"
        data-testid="token-create-form"
        onSubmit={(e) => {
          e.preventDefault();
          const body = { expires_in: expires };
          if (name) body.name = name;
          create.run(() => api.post('/tokens', body));
        }}
      >
        <Field label="Token name">
          <TextInput name="name" value={name} set={setName} placeholder="ci" />
        </Field>
        <Field label="Expires in">
          <select
            name="expires_in"
            value={expires}
            onChange={(e) => setExpires(e.currentTarget.value)}
          >
            <option value="1d">1 day</option>
            <option value="7d">7 days</option>
            <option value="30d">30 days</option>
            <option value="90d">90 days</option>
            <option value="365d">1 year</option>
            <option value="never">never</option>
          </select>
        </Field>
        <button type="submit" disabled={create.busy}>
          Create token
        </button>
      </form>
      <ErrorNote error={create.error} />
      {secret && (
        <Secret
          label="New token:"
          value={secret}
          testid="new-token-secret"
          onDismiss={() => setSecret(null)}
        />
      )}
    </section>
  );
}

function UsersPanel() {
  const users = useResource('/users', ['users']);
  const teams = useResource('/teams', ['teams']);
  const act = useAction(users.reload);
  const list = users.data ?? [];
  const patch = (u, body) => act.run(() => api.patch(`/users/${encodeURIComponent(u.name)}`, body));
  return (
    <section class="panel" aria-labelledby="users-h">
      <h2 id="users-h">Users</h2>
      <ErrorNote error={users.error} />
      {users.loading && !users.data && <Loading />}
      {list.length > 0 && (
        <table data-testid="users-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Teams</th>
              <th>Kind</th>
              <th>Source</th>
              <th>Password</th>
              <th>Status</th>
              <th>Platform admin</th>
              <th>Created</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.map((u) => (
              <tr key={u.name} data-testid={`user-${u.name}`}>
                <td>{u.name}</td>
                <td>
                  {Object.entries(u.teams ?? {}).map(([t, r]) => (
                    <div>
                      <a href={`/teams/${encodeURIComponent(t)}`}>{t}</a>{' '}
                      <span class="muted">{r}</span>
                    </div>
                  ))}
                </td>
                <td>{u.kind}</td>
                <td>{u.source}</td>
                <td>{u.has_password ? 'set' : '—'}</td>
                <td>{u.disabled ? <StateBadge state="disabled" /> : 'active'}</td>
                <td>{u.platform_admin ? 'yes' : 'no'}</td>
                <td>{fmtTime(u.created_at)}</td>
                <td class="actions">
                  <button
                    type="button"
                    class={u.disabled ? 'secondary' : 'danger'}
                    disabled={act.busy}
                    onClick={() => patch(u, { disabled: !u.disabled })}
                  >
                    {u.disabled ? 'Enable' : 'Disable'}
                  </button>
                  <button
                    type="button"
                    class="secondary"
                    disabled={act.busy}
                    onClick={() => patch(u, { platform_admin: !u.platform_admin })}
                  >
                    {u.platform_admin ? 'Revoke admin' : 'Make admin'}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ErrorNote error={act.error} />
      <CreateUser teams={teams.data ?? []} onDone={users.reload} />
    </section>
  );
}

function CreateUser({ teams, onDone }) {
  const [name, setName] = useState('');
  const [team, setTeam] = useState('');
  const [role, setRole] = useState('member');
  const [password, setPassword] = useState('');
  const [kind, setKind] = useState('human');
  const [secret, setSecret] = useState(null);
  const act = useAction((out) => {
    setSecret(out?.token ? { user: out.name, token: out.token } : null);
    setName('');
    setPassword('');
    onDone();
  });
  const submit = (e) => {
    e.preventDefault();
    const body = { name, kind };
    if (role === 'platform-admin') body.platform_admin = true;
    if (team) {
      body.team = team;
      if (role !== 'platform-admin') body.role = role;
    }
    if (password && kind === 'human') body.password = password;
    act.run(() => api.post('/users', body));
  };
  return (
    <form class="create-user" data-testid="user-create-form" onSubmit={submit}>
      <h3>New user</h3>
      <div class="row">
        <Field label="Name">
          <TextInput name="name" value={name} set={setName} required />
        </Field>
        <Field label="Team">
          <select name="team" value={team} onChange={(e) => setTeam(e.currentTarget.value)}>
            <option value="">none</option>
            {teams.map((t) => (
              <option value={t.name}>{t.name}</option>
            ))}
          </select>
        </Field>
        <Field label="Role">
          <select name="role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
            <option value="viewer">viewer</option>
            <option value="member">member</option>
            <option value="team-admin">team-admin</option>
            <option value="platform-admin">platform-admin</option>
          </select>
        </Field>
        <Field label="Kind">
          <select name="kind" value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
            <option value="human">human</option>
            <option value="service">service</option>
          </select>
        </Field>
        {kind === 'human' && (
          <Field label="Password" hint="10 characters at least; blank: none">
            <TextInput
              type="password"
              name="password"
              autocomplete="new-password"
              value={password}
              set={setPassword}
            />
          </Field>
        )}
        <button type="submit" disabled={act.busy}>
          Create user
        </button>
      </div>
      <ErrorNote error={act.error} />
      {secret && (
        <Secret
          label={`Token of ${secret.user}:`}
          value={secret.token}
          testid="new-user-token"
          onDismiss={() => setSecret(null)}
        />
      )}
    </form>
  );
}

function TeamsPanel() {
  const teams = useResource('/teams', ['teams']);
  const list = teams.data ?? [];
  return (
    <section class="panel" aria-labelledby="ateams-h">
      <h2 id="ateams-h">Teams</h2>
      <ErrorNote error={teams.error} />
      {teams.data && !list.length && <Empty>No teams yet; create them on the Teams page.</Empty>}
      {list.length > 0 && (
        <table data-testid="admin-teams">
          <thead>
            <tr>
              <th>Team</th>
              <th class="num">Unix gid</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {list.map((t) => (
              <tr key={t.name}>
                <td>
                  <a href={`/teams/${encodeURIComponent(t.name)}`}>{t.name}</a>
                </td>
                <td class="num">{t.gid ?? '—'}</td>
                <td>{fmtTime(t.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

// The shared pool against each team's dedicated capacity: whole hosts by `dedicated_to`, and
// GPUs of shared hosts dedicated one by one.
function PoolsPanel() {
  const hosts = useResource('/hosts', ['hosts']);
  const pools = new Map();
  const get = (k) => {
    if (!pools.has(k)) pools.set(k, { hosts: 0, gpus: 0, gpusOnShared: 0 });
    return pools.get(k);
  };
  for (const h of hosts.data ?? []) {
    const owner = h.dedicated_to ?? null;
    const p = get(owner ?? '');
    p.hosts += 1;
    for (const g of h.gpus ?? []) {
      if (!owner && g.dedicated_to) get(g.dedicated_to).gpusOnShared += 1;
      else p.gpus += 1;
    }
  }
  get('');
  const rows = [...pools].sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b)));
  return (
    <section class="panel" aria-labelledby="pools-h">
      <h2 id="pools-h">Pools</h2>
      <ErrorNote error={hosts.error} />
      {hosts.data && (
        <table data-testid="pools">
          <thead>
            <tr>
              <th>Pool</th>
              <th class="num">Hosts</th>
              <th class="num">GPUs</th>
              <th class="num">Dedicated GPUs on shared hosts</th>
            </tr>
          </thead>
          <tbody>
            {rows.map(([k, p]) => (
              <tr key={k} data-testid={`pool-${k || 'shared'}`}>
                <td>{k ? `team ${k} (dedicated)` : 'shared pool'}</td>
                <td class="num">{p.hosts}</td>
                <td class="num">{p.gpus}</td>
                <td class="num">{k ? p.gpusOnShared : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function JoinTokensPanel() {
  const tokens = useResource('/hosts/join-tokens', ['hosts']);
  const [ttl, setTtl] = useState('24h');
  const [uses, setUses] = useState('1');
  const [secret, setSecret] = useState(null);
  const create = useAction((out) => {
    setSecret(out?.token ?? null);
    tokens.reload();
  });
  const revoke = useAction(tokens.reload);
  const list = [...(tokens.data ?? [])].reverse();
  return (
    <section class="panel" aria-labelledby="join-h">
      <h2 id="join-h">Host join tokens</h2>
      <ErrorNote error={tokens.error} />
      {tokens.data && !list.length && <Empty>No join tokens.</Empty>}
      {list.length > 0 && (
        <table data-testid="join-tokens">
          <thead>
            <tr>
              <th>Id</th>
              <th>State</th>
              <th>Uses</th>
              <th>By</th>
              <th>Created</th>
              <th>Expires</th>
              <th>Revoke</th>
            </tr>
          </thead>
          <tbody>
            {list.map((t) => (
              <tr key={t.id}>
                <td>
                  <code>{t.id}</code>
                </td>
                <td>
                  <StateBadge state={t.state} />
                </td>
                <td>
                  {t.used} of {t.uses} used
                </td>
                <td>{t.created_by}</td>
                <td>{fmtTime(t.created_at)}</td>
                <td>{fmtTime(t.expires_at)}</td>
                <td>
                  {t.state === 'active' ? (
                    <button
                      type="button"
                      class="danger"
                      disabled={revoke.busy}
                      onClick={() =>
                        revoke.run(() => api.del(`/hosts/join-tokens/${encodeURIComponent(t.id)}`))
                      }
                    >
                      Revoke
                    </button>
                  ) : (
                    '—'
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ErrorNote error={revoke.error} />
      <form
        class="row token-form"
        data-testid="join-token-form"
        onSubmit={(e) => {
          e.preventDefault();
          const body = {};
          if (ttl) body.ttl = ttl;
          if (uses !== '') body.uses = Number(uses);
          create.run(() => api.post('/hosts/join-tokens', body));
        }}
      >
        <Field label="Valid for" hint="e.g. 24h">
          <TextInput name="ttl" size={6} value={ttl} set={setTtl} />
        </Field>
        <Field label="Uses">
          <TextInput name="uses" inputMode="numeric" size={5} value={uses} set={setUses} />
        </Field>
        <button type="submit" disabled={create.busy}>
          Create join token
        </button>
      </form>
      <ErrorNote error={create.error} />
      {secret && (
        <Secret
          label="New join token:"
          value={secret}
          testid="new-join-token"
          onDismiss={() => setSecret(null)}
        />
      )}
    </section>
  );
}

function AuditPanel() {
  const audit = useResource(`/audit${query({ limit: 100 })}`, ['audit']);
  const list = audit.data ?? [];
  return (
    <section class="panel" aria-labelledby="audit-h">
      <h2 id="audit-h">Audit log (last 100)</h2>
      <ErrorNote error={audit.error} />
      {audit.loading && !audit.data && <Loading />}
      {audit.data && !list.length && <Empty>Nothing recorded yet.</Empty>}
      {list.length > 0 && (
        <table data-testid="audit-table">
          <thead>
            <tr>
              <th>When</th>
              <th>Actor</th>
              <th>From</th>
              <th>Action</th>
              <th>Object</th>
              <th class="num">Status</th>
              <th>Details</th>
            </tr>
          </thead>
          <tbody>
            {list.map((a) => (
              <tr key={a.id}>
                <td>{fmtTime(a.at)}</td>
                <td>
                  {a.actor} <small class="muted">{a.actor_kind}</small>
                </td>
                <td>{a.address}</td>
                <td>{a.action}</td>
                <td>
                  <code>{a.object}</code>
                </td>
                <td class="num">{a.status}</td>
                <td>
                  <details>
                    <summary>show</summary>
                    <pre class="audit-json">
                      {JSON.stringify(
                        { request: a.request, before: a.before, after: a.after },
                        null,
                        2,
                      )}
                    </pre>
                  </details>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
