// The audit log in words (src/components/audit-words.js): the sentences people read on the
// Admin page's audit tab, for the routes allotd has (src/api/openapi.json) and for ones it may
// add later.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { auditSentence, hasSentence, WORDED_ROUTES } from '../src/components/audit-words.js';

const openapi = JSON.parse(
  readFileSync(join(import.meta.dirname, '..', '..', 'src', 'api', 'openapi.json'), 'utf8'),
);
const MUTATIONS = Object.entries(openapi.paths).flatMap(([path, ops]) =>
  Object.keys(ops)
    .filter((m) => ['post', 'put', 'patch', 'delete'].includes(m))
    .map((m) => `${m.toUpperCase()} ${path}`),
);

const entry = (action, object, request = null, actor = 'admin', actorKind = 'user') => ({
  action,
  object,
  request,
  actor,
  actor_kind: actorKind,
  status: 200,
});

// The object allotd records for a route (src/api/audit_capture.cc): "kind:value" per path
// parameter, the kind the segment before it made singular.
function objectFor(path) {
  const segs = path.split('/').filter(Boolean);
  const parts = [];
  segs.forEach((s, i) => {
    if (!s.startsWith('{')) return;
    const before = segs[i - 1] ?? s.slice(1, -1);
    const kind = before.endsWith('ies') ? `${before.slice(0, -3)}y` : before.replace(/s$/, '');
    parts.push(`${kind}:x${i}`);
  });
  return parts.join('/') || `${segs.at(-1).replace(/s$/, '')}:7`;
}

test("the issue's examples read as it wrote them", () => {
  const say = (...args) => auditSentence(entry(...args));
  assert.equal(
    say('PUT /api/v1/teams/{team}/quota', 'team:vision', {}, 'alice'),
    "alice set team vision's quota",
  );
  assert.equal(say('POST /api/v1/jobs/{id}/cancel', 'job:12', null, 'bob'), 'bob cancelled job 12');
  assert.equal(
    say('POST /api/v1/hosts/{name}/drain', 'host:gpu-02', {}),
    'admin drained host gpu-02',
  );
});

test('the request adds what people want to know', () => {
  const say = (...args) => auditSentence(entry(...args));
  assert.equal(
    say('POST /api/v1/hosts/{name}/drain', 'host:gpu-02', { deadline: '30m', reason: 'kernel' }),
    'admin drained host gpu-02 with a deadline of 30m (reason: kernel)',
  );
  assert.equal(
    say('POST /api/v1/jobs', 'job:42', { name: 'train', command: ['x'] }, 'alice'),
    'alice submitted job 42 (train)',
  );
  assert.equal(
    say('POST /api/v1/users', 'user:bob', { name: 'bob', teams: { ml: 'member' } }),
    'admin created user bob in team ml as member',
  );
  assert.equal(
    say('PUT /api/v1/teams/{team}/members/{user}', 'team:ml/member:bob', { role: 'team-admin' }),
    'admin made bob a team-admin of team ml',
  );
  assert.equal(
    say('PATCH /api/v1/users/{name}', 'user:bob', { disabled: true }),
    'admin disabled user bob',
  );
  assert.equal(
    say('PUT /api/v1/hosts/{name}/dedication', 'host:a', { team: null }),
    'admin returned host a to the shared pool',
  );
  // A registry login's password arrives redacted and is never in the sentence.
  assert.equal(
    say(
      'PUT /api/v1/teams/{team}/registry-logins/{registry}',
      'team:ml/registry-login:registry:5000',
      { username: 'ml-puller', password: '[redacted]' },
      'carol',
    ),
    "carol set team ml's login to registry registry:5000 as ml-puller",
  );
  assert.equal(
    say('POST /api/v1/images/prepull', 'prepull:7', { image: 'r:5000/ml/x:1', pool: 'ml' }),
    'admin asked pool ml to prepull r:5000/ml/x:1',
  );
  assert.equal(
    say('POST /api/v1/images/prepull', 'prepull:8', {
      image: 'r:5000/ml/x:1',
      pool: 'shared',
      team: 'ml',
    }),
    "admin asked pool shared to prepull r:5000/ml/x:1 with team ml's login",
  );
  assert.equal(
    say('POST /api/v1/hosts/{name}/images/prune', 'host:gpu-02'),
    "admin pruned host gpu-02's image cache",
  );
  assert.equal(
    say('PUT /api/v1/users/{name}/password', 'user:alice', {}, 'alice'),
    'alice changed their password',
  );
  assert.equal(
    say(
      'POST /api/v1/login',
      '',
      { user: 'carol', password: '[redacted]', session: true },
      'anonymous',
      'anonymous',
    ),
    'carol logged in to the console',
  );
  assert.equal(
    say('POST /api/v1/hosts/join', 'host:gpu-03', { name: 'gpu-03' }, 'join:join-4', 'join'),
    'host gpu-03 joined the cluster with join token join-4',
  );
});

test('a route without a sentence, or an entry missing a part, still reads as one', () => {
  const say = (...args) => auditSentence(entry(...args));
  assert.equal(
    say('POST /api/v1/hosts/{name}/frobnicate', 'host:gpu-02'),
    'admin did frobnicate on host gpu-02',
  );
  assert.equal(say('DELETE /api/v1/widgets/{id}', 'widget:3'), 'admin deleted widget 3');
  assert.equal(say('POST /api/v1/widgets', 'widget:3'), 'admin created widget 3');
  assert.equal(
    say('PUT /api/v1/hosts/{name}/gpus/{index}/fan', 'host:a/gpu:3'),
    'admin changed GPU 3 of host a',
  );
  // No object where the sentence needs one: not "cancelled job undefined".
  assert.equal(say('POST /api/v1/jobs/{id}/cancel', ''), 'admin did cancel on the cluster');
});

test('every sentence names an existing route', () => {
  const known = new Set(MUTATIONS);
  assert.deepEqual(
    WORDED_ROUTES.filter((r) => !known.has(r)),
    [],
  );
});

test('every route allotd has reads as a sentence, with no gaps', (t) => {
  const generic = [];
  for (const action of MUTATIONS) {
    const path = action.split(' ')[1].replace('/api/v1', '');
    const text = auditSentence(entry(action, objectFor(path), {}));
    // A login's and a join's subject is who logged in or joined, not the request's actor.
    if (!/\/(login|hosts\/join)$/.test(action)) assert.match(text, /^admin [a-z]/, action);
    assert.doesNotMatch(text, /undefined|null|\[object/, `${action}: ${text}`);
    if (!hasSentence(action)) generic.push(`${action}: "${text}"`);
  }
  // New routes read generically until someone writes their sentence; say which.
  if (generic.length) t.diagnostic(`generic sentences: ${generic.join('; ')}`);
});
