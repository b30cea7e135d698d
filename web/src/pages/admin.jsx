// Admin, in tabs (components/tabs.jsx; the tab is in the address): for everyone, their own API
// tokens and the session profiles they may use (team-admins and platform admins define them);
// for platform admins also users, teams, pools and host join tokens, and the audit log, each
// entry a sentence (components/audit-words.js) with its route and bodies on demand. A secret
// (API or join token) is shown once, right after it is made: the server keeps only its hash.
import { useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { useResource } from '../live.js';
import { useSession, isAdmin } from '../session.js';
import { fmtTime } from '../format.js';
import { ErrorNote, StateBadge, InputField, SelectField, Checkbox } from '../components/ui.jsx';
import { useAction, ActionButton, ActionForm } from '../components/action.jsx';
import { useFields } from '../components/form-fields.jsx';
import { ResourceTable } from '../components/table.jsx';
import { Tabs } from '../components/tabs.jsx';
import { auditSentence } from '../components/audit-words.js';
import { ProfilesPanel } from './profiles-panel.jsx';
import './admin.css';

export function AdminPage() {
  const { me } = useSession();
  const admin = isAdmin(me);
  const tabs = [
    { id: 'tokens', label: 'My API tokens', render: () => <TokensPanel me={me} /> },
    { id: 'profiles', label: 'Session profiles', render: () => <ProfilesPanel /> },
  ];
  if (admin) {
    tabs.push(
      { id: 'users', label: 'Users', render: () => <UsersPanel /> },
      { id: 'teams', label: 'Teams', render: () => <TeamsPanel /> },
      {
        id: 'hosts',
        label: 'Pools and join tokens',
        render: () => (
          <>
            <PoolsPanel />
            <JoinTokensPanel />
          </>
        ),
      },
      { id: 'audit', label: 'Audit log', render: () => <AuditPanel /> },
    );
  }
  return (
    <section class="admin-page">
      <h1>{admin ? 'Administration' : 'My account'}</h1>
      <Tabs tabs={tabs} label={admin ? 'Administration' : 'My account'} testid="admin-tabs" />
    </section>
  );
}

// A secret just made (null: none), until the user is done with it.
function Secret({ label, value, testid, onDismiss }) {
  if (!value) return null;
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

// The form that makes a secret (an API or a join token), its error, and the secret once made.
function SecretForm({ testid, button, label, secretTestid, make, onDone, children }) {
  const [secret, setSecret] = useState(null);
  const create = useAction((out) => {
    setSecret(out?.token ?? null);
    onDone();
  });
  return (
    <>
      <ActionForm act={create} run={make} class="row token-form" data-testid={testid}>
        {children}
        <button type="submit" disabled={create.busy}>
          {button}
        </button>
      </ActionForm>
      <ErrorNote error={create.error} />
      <Secret
        label={label}
        value={secret}
        testid={secretTestid}
        onDismiss={() => setSecret(null)}
      />
    </>
  );
}

function revokeQuestion(t) {
  const what = t.kind === 'session' ? ' This is a console session: it may be this one.' : '';
  return `Revoke token ${t.name || t.id}?${what}`;
}

const EXPIRIES = [
  ['1d', '1 day'],
  ['7d', '7 days'],
  ['30d', '30 days'],
  ['90d', '90 days'],
  ['365d', '1 year'],
  ['never', 'never'],
];

function TokensPanel({ me }) {
  const tokens = useResource('/tokens', ['users']);
  const [name, setName] = useState('');
  const [expires, setExpires] = useState('30d');
  const revoke = useAction(tokens.reload);
  return (
    <section class="panel" aria-labelledby="tokens-h">
      <h2 id="tokens-h">My API tokens ({me.name})</h2>
      <ResourceTable
        res={tokens}
        loading
        empty="No tokens."
        testid="tokens-table"
        cols={['Name', 'Id', 'Kind', 'Created', 'Expires', 'Revoke']}
        row={(t) => (
          <tr key={t.id} data-testid={`token-${t.id}`}>
            <td>{t.name || '—'}</td>
            <td>
              <code>{t.id}</code>
            </td>
            <td>{t.kind}</td>
            <td>{fmtTime(t.created_at)}</td>
            <td>{t.expires_at ? fmtTime(t.expires_at) : 'never'}</td>
            <td>
              <ActionButton
                act={revoke}
                class="danger"
                confirm={revokeQuestion(t)}
                run={() => api.del(`/tokens/${encodeURIComponent(t.id)}`)}
              >
                Revoke
              </ActionButton>
            </td>
          </tr>
        )}
      />
      <ErrorNote error={revoke.error} />
      <SecretForm
        testid="token-create-form"
        button="Create token"
        label="New token:"
        secretTestid="new-token-secret"
        make={() => api.post('/tokens', { expires_in: expires, ...(name ? { name } : {}) })}
        onDone={() => {
          setName('');
          tokens.reload();
        }}
      >
        <InputField label="Token name" name="name" value={name} set={setName} placeholder="ci" />
        <SelectField
          label="Expires in"
          name="expires_in"
          value={expires}
          set={setExpires}
          options={EXPIRIES}
        />
      </SecretForm>
    </section>
  );
}

function UsersPanel() {
  const users = useResource('/users', ['users']);
  const teams = useResource('/teams', ['teams']);
  const act = useAction(users.reload);
  const patch = (u, body) => () => api.patch(`/users/${encodeURIComponent(u.name)}`, body);
  return (
    <section class="panel" aria-labelledby="users-h">
      <h2 id="users-h">Users</h2>
      <ResourceTable
        res={users}
        loading
        testid="users-table"
        cols={USER_COLS}
        row={(u) => (
          <tr key={u.name} data-testid={`user-${u.name}`}>
            <td>{u.name}</td>
            <td>
              {Object.entries(u.teams ?? {}).map(([t, r]) => (
                <div>
                  <a href={`/teams/${encodeURIComponent(t)}`}>{t}</a> <span class="muted">{r}</span>
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
              <ActionButton
                act={act}
                class={u.disabled ? 'secondary' : 'danger'}
                run={patch(u, { disabled: !u.disabled })}
              >
                {u.disabled ? 'Enable' : 'Disable'}
              </ActionButton>
              <ActionButton
                act={act}
                class="secondary"
                run={patch(u, { platform_admin: !u.platform_admin })}
              >
                {u.platform_admin ? 'Revoke admin' : 'Make admin'}
              </ActionButton>
            </td>
          </tr>
        )}
      />
      <ErrorNote error={act.error} />
      <CreateUser teams={teams.data ?? []} onDone={users.reload} />
    </section>
  );
}

const USER_COLS = [
  'Name',
  'Teams',
  'Kind',
  'Source',
  'Password',
  'Status',
  'Platform admin',
  'Created',
  'Actions',
];

const USER_ROLES = ['viewer', 'member', 'team-admin', 'platform-admin'];

function CreateUser({ teams, onDone }) {
  const { f, setF, bind } = useFields({
    name: '',
    team: '',
    role: 'member',
    password: '',
    kind: 'human',
  });
  const [secret, setSecret] = useState(null);
  const act = useAction((out) => {
    setSecret(out?.token ? { user: out.name, token: out.token } : null);
    setF((prev) => ({ ...prev, name: '', password: '' }));
    onDone();
  });
  const create = () => {
    const body = { name: f.name, kind: f.kind };
    if (f.role === 'platform-admin') body.platform_admin = true;
    if (f.team) {
      body.team = f.team;
      if (f.role !== 'platform-admin') body.role = f.role;
    }
    if (f.password && f.kind === 'human') body.password = f.password;
    return api.post('/users', body);
  };
  return (
    <ActionForm act={act} run={create} class="create-user" data-testid="user-create-form">
      <h3>New user</h3>
      <div class="row">
        <InputField {...bind('name')} label="Name" required />
        <SelectField
          {...bind('team')}
          label="Team"
          options={[['', 'none'], ...teams.map((t) => t.name)]}
        />
        <SelectField {...bind('role')} label="Role" options={USER_ROLES} />
        <SelectField {...bind('kind')} label="Kind" options={['human', 'service']} />
        {f.kind === 'human' && (
          <InputField
            {...bind('password')}
            label="Password"
            hint="10 characters at least; blank: none"
            type="password"
            autocomplete="new-password"
          />
        )}
        <button type="submit" disabled={act.busy}>
          Create user
        </button>
      </div>
      <ErrorNote error={act.error} />
      <Secret
        label={`Token of ${secret?.user}:`}
        value={secret?.token}
        testid="new-user-token"
        onDismiss={() => setSecret(null)}
      />
    </ActionForm>
  );
}

function TeamsPanel() {
  const teams = useResource('/teams', ['teams']);
  return (
    <section class="panel" aria-labelledby="ateams-h">
      <h2 id="ateams-h">Teams</h2>
      <ResourceTable
        res={teams}
        empty="No teams yet; create them on the Teams page."
        testid="admin-teams"
        cols={['Team', ['Unix gid', 'num'], 'Created']}
        row={(t) => (
          <tr key={t.name}>
            <td>
              <a href={`/teams/${encodeURIComponent(t.name)}`}>{t.name}</a>
            </td>
            <td class="num">{t.gid ?? '—'}</td>
            <td>{fmtTime(t.created_at)}</td>
          </tr>
        )}
      />
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
      <ResourceTable
        res={hosts}
        rows={hosts.data ? rows : []}
        testid="pools"
        cols={POOL_COLS}
        row={([k, p]) => (
          <tr key={k} data-testid={`pool-${k || 'shared'}`}>
            <td>{k ? `team ${k} (dedicated)` : 'shared pool'}</td>
            <td class="num">{p.hosts}</td>
            <td class="num">{p.gpus}</td>
            <td class="num">{k ? p.gpusOnShared : '—'}</td>
          </tr>
        )}
      />
    </section>
  );
}

const POOL_COLS = [
  'Pool',
  ['Hosts', 'num'],
  ['GPUs', 'num'],
  ['Dedicated GPUs on shared hosts', 'num'],
];

function JoinTokensPanel() {
  const tokens = useResource('/hosts/join-tokens', ['hosts']);
  const [ttl, setTtl] = useState('24h');
  const [uses, setUses] = useState('1');
  const revoke = useAction(tokens.reload);
  return (
    <section class="panel" aria-labelledby="join-h">
      <h2 id="join-h">Host join tokens</h2>
      <ResourceTable
        res={tokens}
        rows={[...(tokens.data ?? [])].reverse()}
        empty="No join tokens."
        testid="join-tokens"
        cols={['Id', 'State', 'Uses', 'By', 'Created', 'Expires', 'Revoke']}
        row={(t) => (
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
                <ActionButton
                  act={revoke}
                  class="danger"
                  run={() => api.del(`/hosts/join-tokens/${encodeURIComponent(t.id)}`)}
                >
                  Revoke
                </ActionButton>
              ) : (
                '—'
              )}
            </td>
          </tr>
        )}
      />
      <ErrorNote error={revoke.error} />
      <SecretForm
        testid="join-token-form"
        button="Create join token"
        label="New join token:"
        secretTestid="new-join-token"
        make={() => {
          const body = {};
          if (ttl) body.ttl = ttl;
          if (uses !== '') body.uses = Number(uses);
          return api.post('/hosts/join-tokens', body);
        }}
        onDone={tokens.reload}
      >
        <InputField
          label="Valid for"
          hint="e.g. 24h"
          name="ttl"
          size={6}
          value={ttl}
          set={setTtl}
        />
        <InputField
          label="Uses"
          name="uses"
          inputMode="numeric"
          size={5}
          value={uses}
          set={setUses}
        />
      </SecretForm>
    </section>
  );
}

// The newest 100 entries, each a sentence; "Show routes" adds what the server recorded (the
// method and route pattern, the object, the status), and an entry's details its bodies.
function AuditPanel() {
  const audit = useResource(`/audit${query({ limit: 100 })}`, ['audit']);
  const [raw, setRaw] = useState(false);
  return (
    <section class="panel" aria-labelledby="audit-h">
      <div class="row audit-head">
        <h2 id="audit-h">Audit log (last 100)</h2>
        <Checkbox name="audit-raw" checked={raw} set={setRaw} data-testid="audit-show-routes">
          Show routes
        </Checkbox>
      </div>
      <ResourceTable
        res={audit}
        loading
        empty="Nothing recorded yet."
        testid="audit-table"
        cols={[
          'When',
          'What',
          'From',
          raw && 'Route',
          raw && 'Object',
          raw && ['Status', 'num'],
          'Details',
        ]}
        row={(a) => (
          <tr key={a.id} data-testid={`audit-${a.id}`}>
            <td class="when">{fmtTime(a.at)}</td>
            <td class="sentence" data-testid="audit-sentence">
              {auditSentence(a)}
            </td>
            <td>{a.address}</td>
            {raw && (
              <td>
                <code data-testid="audit-route">{a.action}</code>
              </td>
            )}
            {raw && (
              <td>
                <code>{a.object}</code>
              </td>
            )}
            {raw && <td class="num">{a.status}</td>}
            <td>
              <details>
                <summary>show</summary>
                <p class="audit-raw">
                  <code>{a.action}</code> · <code>{a.object || '—'}</code> · {a.status} · {a.actor}{' '}
                  ({a.actor_kind})
                </p>
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
        )}
      />
    </section>
  );
}
