// An audit entry (docs/audit.md) as a sentence: "alice set team vision's quota", "bob cancelled
// job 12", "admin drained host gpu-02". The entry names its route pattern (`action`: "POST
// /api/v1/hosts/{name}/drain"), the object by kind and value (`object`: "host:gpu-02",
// "team:ml/project:vision") and the request's body, which is all a sentence needs. A route this
// table does not know still reads as one: "alice did frobnicate on host gpu-02".

// "host:gpu-01/gpu:3" -> { host: "gpu-01", gpu: "3" }.
export function objectParts(object) {
  const out = {};
  for (const part of (object ?? '').split('/')) {
    const i = part.indexOf(':');
    if (i > 0) out[part.slice(0, i)] = part.slice(i + 1);
  }
  return out;
}

// The object in words: "host gpu-01", "GPU 3 of host gpu-01", "project ml/vision", "job 42".
export function objectWords(object) {
  const o = objectParts(object);
  if (o.project && o.team) return `project ${o.team}/${o.project}`;
  if (o.gpu && o.host) return `GPU ${o.gpu} of host ${o.host}`;
  if (o.member && o.team) return `${o.member}'s membership of team ${o.team}`;
  const parts = Object.entries(o).map(([k, v]) => `${k.replace(/-/g, ' ')} ${v}`);
  return parts.length ? parts.join(', ') : object || 'the cluster';
}

// The name possessive: "team ml's", "host gpu-02's".
const their = (words) => `${words}'s`;

// ` (reason: …)` where the request gave one.
function because(req) {
  return req?.reason ? ` (reason: ${req.reason})` : '';
}

// One line per route: (who, object parts, request, entry) -> the sentence after the actor.
// Keys are "METHOD /path" with /api/v1 left out, as in the entry's `action`.
const SENTENCES = {
  'POST /logout': () => 'logged out',
  'PUT /users/{name}/password': (o, r, e) =>
    o.user === e.actor ? 'changed their password' : `set ${their(o.user)} password`,
  'POST /teams': (o) => `created team ${o.team}`,
  'PUT /teams/{team}/quota': (o) => `set team ${their(o.team)} quota`,
  'PUT /teams/{team}/projects/{project}/quota': (o) =>
    `set project ${o.team}/${their(o.project)} quota`,
  'POST /users': (o, r) => {
    const teams = r?.teams ?? (r?.team ? { [r.team]: r.role } : {});
    const list = Object.entries(teams).map(([t, role]) => `${t}${role ? ` as ${role}` : ''}`);
    const team = list.length ? ` in team${list.length > 1 ? 's' : ''} ${list.join(', ')}` : '';
    const kind = r?.kind === 'service' ? 'service account' : 'user';
    return `created ${kind} ${o.user}${team}`;
  },
  'PATCH /users/{name}': (o, r) => {
    const said = [];
    if (r?.disabled === true) said.push(`disabled user ${o.user}`);
    if (r?.disabled === false) said.push(`enabled user ${o.user}`);
    if (r?.platform_admin === true) said.push(`made ${o.user} a platform admin`);
    if (r?.platform_admin === false) said.push(`took platform admin from ${o.user}`);
    return said.length ? said.join(' and ') : `changed user ${o.user}`;
  },
  // The object of a membership is "team:ml/member:bob".
  'PUT /teams/{team}/members/{user}': (o, r) =>
    `made ${o.member} ${r?.role ? `a ${r.role}` : 'a member'} of team ${o.team}`,
  'DELETE /teams/{team}/members/{user}': (o) => `removed ${o.member} from team ${o.team}`,
  'POST /tokens': (o, r) =>
    `created an API token${r?.name ? ` named ${r.name}` : ''}${r?.user ? ` for ${r.user}` : ''}`,
  'DELETE /tokens/{id}': (o) => `revoked token ${o.token}`,
  'POST /ssh-keys': () => 'added an SSH key',
  'DELETE /ssh-keys/{fingerprint}': () => 'removed an SSH key',
  'POST /projects': (o) => `created project ${o.team}/${o.project}`,
  'POST /hosts/join-tokens': (o, r) =>
    `made a host join token${r?.uses > 1 ? ` for ${r.uses} hosts` : ''}`,
  'DELETE /hosts/join-tokens/{id}': (o) => `revoked join token ${o['join-token']}`,
  'POST /hosts/{name}/reset-credential': (o) => `reset host ${their(o.host)} credential`,
  'PUT /hosts/{name}/contour': (o, r) => `put host ${o.host} in contour ${r?.contour ?? '(none)'}`,
  'PUT /hosts/{name}/dedication': (o, r) =>
    r?.team
      ? `dedicated host ${o.host} to team ${r.team}`
      : `returned host ${o.host} to the shared pool`,
  'PUT /hosts/{name}/gpus/{index}': (o, r) => {
    const gpu = `GPU ${o.gpu} of host ${o.host}`;
    if (r && 'dedicated_to' in r) {
      return r.dedicated_to
        ? `dedicated ${gpu} to team ${r.dedicated_to}`
        : `returned ${gpu} to the shared pool`;
    }
    if (r && 'shared' in r) return `${r.shared ? 'shared' : 'stopped sharing'} ${gpu}`;
    return `changed ${gpu}`;
  },
  'POST /hosts/{name}/drain': (o, r) =>
    `drained host ${o.host}${r?.deadline ? ` with a deadline of ${r.deadline}` : ''}${because(r)}`,
  'POST /hosts/{name}/resume': (o) => `resumed host ${o.host}`,
  'PUT /teams/{team}/image-allow': (o, r) =>
    r?.allow?.length === 0
      ? `allowed team ${o.team} no images`
      : `set the images team ${o.team} may use${r?.allow ? `: ${r.allow.join(', ')}` : ''}`,
  'PUT /teams/{team}/default-image': (o, r) =>
    r?.image
      ? `set team ${their(o.team)} default image to ${r.image}`
      : `cleared team ${their(o.team)} default image`,
  'PUT /teams/{team}/registry-logins/{registry}': (o, r) =>
    `set team ${their(o.team)} login to registry ${o['registry-login']}${
      r?.username ? ` as ${r.username}` : ''
    }`,
  'DELETE /teams/{team}/registry-logins/{registry}': (o) =>
    `removed team ${their(o.team)} login to registry ${o['registry-login']}`,
  'POST /hosts/{name}/images/prune': (o) => `pruned host ${their(o.host)} image cache`,
  'POST /images/prepull': (o, r) => {
    const where = r?.pool ? `pool ${r.pool}` : (r?.hosts ?? []).join(', ') || 'hosts';
    return `asked ${where} to prepull ${r?.image ?? 'an image'}${
      r?.team ? ` with team ${r.team}'s login` : ''
    }`;
  },
  'POST /hosts/{name}/admin-state': (o, r) =>
    `marked host ${o.host} ${r?.state ?? 'with a new admin state'}${because(r)}`,
  'POST /hosts/{name}/reprovision': (o, r) =>
    `reprovisioned host ${o.host}${r?.profile ? ` with profile ${r.profile}` : ''}`,
  'POST /hosts/{name}/assign': (o, r) =>
    `assigned host ${o.host} to team ${r?.team ?? '?'}${because(r)}`,
  'POST /hosts/{name}/unassign': (o, r) =>
    `returned host ${o.host} to the shared pool${because(r)}`,
  'POST /upgrades': (o, r) =>
    `started an upgrade${r?.pool ? ` of pool ${r.pool}` : ''}${r?.profile ? ` to ${r.profile}` : ''}`,
  'POST /jobs': (o, r) => `submitted job ${o.job}${r?.name ? ` (${r.name})` : ''}`,
  'POST /jobs/{id}/cancel': (o) => `cancelled job ${o.job}`,
  'POST /jobs/{id}/hold': (o) => `held job ${o.job}`,
  'POST /jobs/{id}/release': (o) => `released job ${o.job}`,
  'POST /jobs/{id}/requeue': (o) => `requeued job ${o.job}`,
  'PUT /teams/{team}/idle-policy': (o) => `set team ${their(o.team)} idle policy`,
  'PUT /teams/{team}/projects/{project}/idle-policy': (o) =>
    `set project ${o.team}/${their(o.project)} idle policy`,
  'DELETE /teams/{team}/projects/{project}/idle-policy': (o) =>
    `put project ${o.team}/${o.project} back on its team's idle policy`,
  'POST /leases': (o, r) => `asked for lease ${o.lease}${r?.team ? ` for team ${r.team}` : ''}`,
  'POST /leases/{id}/approve': (o) => `approved lease ${o.lease}`,
  'POST /leases/{id}/reject': (o, r) => `rejected lease ${o.lease}${because(r)}`,
  'POST /leases/{id}/extend': (o, r) => `extended lease ${o.lease}${r?.end ? ` to ${r.end}` : ''}`,
  'POST /leases/{id}/end': (o) => `ended lease ${o.lease}`,
  'POST /profiles': (o) => `defined session profile ${o.profile}`,
  'PUT /profiles/{name}': (o) => `changed session profile ${o.profile}`,
  'DELETE /profiles/{name}': (o) => `deleted session profile ${o.profile}`,
  'POST /sessions': (o, r) => `started session ${o.session}${r?.name ? ` (${r.name})` : ''}`,
  'POST /sessions/{id}/stop': (o) => `stopped session ${o.session}`,
  'PUT /sessions/{id}/shared-with': (o, r) =>
    r?.users?.length
      ? `shared session ${o.session} with ${r.users.join(', ')}`
      : `stopped sharing session ${o.session}`,
};

// The object's parts, where reading one that is not there throws: a sentence is only used when
// the entry has every part it names (no "cancelled job undefined").
function strict(parts) {
  return new Proxy(parts, {
    get(target, key) {
      if (typeof key === 'string' && !(key in target)) throw new Error(`no ${key}`);
      return target[key];
    },
  });
}

// "POST /api/v1/hosts/{name}/drain" -> ["POST", "/hosts/{name}/drain"].
export function splitAction(action) {
  const [method = '', path = ''] = (action ?? '').split(' ');
  return [method.toUpperCase(), path.replace(/^\/api\/v1(?=\/)/, '')];
}

// Whether the route ("POST /api/v1/jobs/{id}/hold") has a sentence of its own.
export function hasSentence(action) {
  const [method, path] = splitAction(action);
  return !!SENTENCES[`${method} ${path}`] || path === '/login' || path === '/hosts/join';
}

// The routes with a sentence of their own, as the entry's `action` names them.
export const WORDED_ROUTES = [...Object.keys(SENTENCES), 'POST /login', 'POST /hosts/join'].map(
  (k) => k.replace(' ', ' /api/v1'),
);

// A route nobody wrote a sentence for: its method and last word, and the object.
function generic(method, path, object) {
  const what = objectWords(object);
  const last = path
    .split('/')
    .filter((s) => s && !s.startsWith('{'))
    .pop();
  const hasParam = path.includes('{');
  if (method === 'DELETE') return `deleted ${what}`;
  if (method === 'POST' && !hasParam) return `created ${what}`;
  if (method === 'POST' && last) return `did ${last.replace(/-/g, ' ')} on ${what}`;
  return `changed ${what}`;
}

// Who did it, as the sentence's subject: a user's name, or the host a join token let in.
function actorWords(e) {
  if (e.actor_kind === 'join') return `a join token (${e.actor.replace(/^join:/, '')})`;
  if (e.actor_kind === 'host') return `host ${e.actor.replace(/^host:/, '')}`;
  return e.actor || 'someone';
}

// The entry as one sentence, without a full stop.
export function auditSentence(entry) {
  const [method, path] = splitAction(entry.action);
  // Kinds as `object` names them: a path's {name} is a host, user or profile by the segment
  // before it ("host:gpu-02", "user:bob").
  const o = objectParts(entry.object);
  const request = entry.request ?? null;
  // A login is recorded before there is a user behind the request: the name is in its body.
  if (path === '/login') {
    const who = request?.user ?? actorWords(entry);
    return `${who} logged in${request?.session ? ' to the console' : ''}`;
  }
  // A join is the host's doing, by way of its join token: the host is the subject.
  if (path === '/hosts/join') {
    const host = o.host ?? request?.name;
    const token = entry.actor.replace(/^join:/, '');
    return `${host ? `host ${host}` : 'a host'} joined the cluster with join token ${token}`;
  }
  const say = SENTENCES[`${method} ${path}`];
  let rest = null;
  try {
    rest = say ? say(strict(o), request, entry) : null;
  } catch {
    rest = null; // an object without a part its sentence names: the generic sentence then
  }
  return `${actorWords(entry)} ${rest ?? generic(method, path, entry.object)}`;
}
