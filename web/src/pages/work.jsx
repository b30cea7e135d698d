// My work: my jobs, the launch form, and one job's detail: its controls (cancel, hold, release,
// requeue), the utilisation of the GPUs it holds over its run, and its live log.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api, ApiError } from '../api.js';
import { useResource } from '../live.js';
import {
  useSession,
  useTeamChoices,
  submittableTeams,
  canSubmit,
  canManageTeam,
  isAdmin,
  preferredTeam,
  rememberTeam,
} from '../session.js';
import { fmtBytes, fmtTime, fmtDuration, fmtGpus, since } from '../format.js';
import {
  ErrorNote,
  Loading,
  StateBadge,
  Checkbox,
  InputField,
  SelectField,
} from '../components/ui.jsx';
import { useAction, ActionButton, ActionForm } from '../components/action.jsx';
import { GpuHistory } from '../components/gpu-history.jsx';
import { Table } from '../components/table.jsx';
import { fieldErrors, binder, scaled } from '../components/form-fields.jsx';
import { splitCommand } from '../components/shellwords.js';
import {
  GpuAmountFields,
  CpuField,
  NumberField,
  TeamField,
  ProjectField,
  gpuAmount,
} from '../components/work-fields.jsx';
import { SessionsPanel } from '../components/sessions-panel.jsx';
import './work.css';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'lost']);

export function WorkPage({ id }) {
  return id ? <JobDetail id={id} /> : <WorkList />;
}

// Cancel, hold, release and requeue are for the same people (the server's canCancelJob): the
// job's owner while they may submit in its team, its team's team-admins, platform admins.
function mayControl(me, job) {
  if (canManageTeam(me, job.team)) return true;
  return job.user === me.name && canSubmit(me, job.team);
}

function mayCancel(me, job) {
  if (TERMINAL.has(job.state) || job.cancel_requested) return false;
  return mayControl(me, job);
}

// Which of hold, release and requeue apply to the job as shown: hold and release to a queued job
// (held or not), requeue to a placed one that is not already stopping. A session is neither held
// nor requeued (stop it instead), and the server refuses the rest with a 409 that says why.
function jobControls(me, job) {
  if (!mayControl(me, job) || job.session || TERMINAL.has(job.state)) return [];
  if (job.state === 'queued') return [job.held_by ? 'release' : 'hold'];
  const stopping = job.cancel_requested || job.requeue_requested_by || job.evicting;
  const placed = ['scheduled', 'pulling', 'running'].includes(job.state);
  if (placed && !stopping) return ['requeue'];
  return [];
}

function WorkList() {
  const { me } = useSession();
  const [allTeam, setAllTeam] = useState(false);
  const jobs = useResource('/jobs?limit=1000', ['jobs']);
  const list = (jobs.data ?? []).filter((j) => allTeam || j.user === me.name);
  const submittable = submittableTeams(me);

  return (
    <section class="work">
      <h1>My work</h1>
      {submittable.length > 0 || isAdmin(me) ? (
        <LaunchForm />
      ) : (
        <p class="muted">Your role lets you read your team's work, not submit it.</p>
      )}
      <SessionsPanel />
      <div class="row work-head">
        <h2>{allTeam ? "My teams' jobs" : 'My jobs'}</h2>
        <Checkbox name="all_team" checked={allTeam} set={setAllTeam}>
          all my team's jobs
        </Checkbox>
      </div>
      <ErrorNote error={jobs.error} />
      {jobs.loading && !jobs.data ? (
        <Loading what="jobs" />
      ) : (
        <JobsTable jobs={list} showUser={allTeam} />
      )}
    </section>
  );
}

function JobsTable({ jobs, showUser }) {
  return (
    <Table
      testid="my-jobs"
      cols={[
        'Job',
        'Name',
        'Team',
        showUser && 'User',
        'State',
        'GPUs',
        'Host',
        'Submitted',
        'Ran',
        'Reason',
      ]}
      rows={jobs}
      empty="No jobs."
      row={(j) => (
        <tr key={j.id} data-testid={`job-${j.id}`}>
          <td>
            <a href={`/work/${j.id}`}>{j.id}</a>
          </td>
          <td>{j.name}</td>
          <td>
            {j.team}
            {j.project ? ` / ${j.project}` : ''}
          </td>
          {showUser && <td>{j.user}</td>}
          <td>
            <StateBadge state={j.state} />
          </td>
          <td>{fmtGpus(j)}</td>
          <td>{j.host ?? '—'}</td>
          <td title={fmtTime(j.submitted_at)}>{since(j.submitted_at)} ago</td>
          <td>{runTime(j)}</td>
          <td class="reason">{j.reason ?? ''}</td>
        </tr>
      )}
    />
  );
}

function runTime(j) {
  if (!j.started_at) return '—';
  const end = j.finished_at ? new Date(j.finished_at).getTime() : Date.now();
  return fmtDuration(end - new Date(j.started_at).getTime());
}

// The API's field names -> the form's inputs, so a 400 lands next to what the user typed.
const FIELD_OF = {
  command: 'command',
  name: 'name',
  team: 'team',
  project: 'project',
  gpus: 'gpus',
  gpu_milli: 'gpu_fraction',
  gpu_model: 'gpu_model',
  gpu_models: 'gpu_model',
  cpu_millis: 'cpus',
  memory_mib: 'memory_gib',
  max_runtime: 'max_runtime',
  priority: 'priority',
  preemptible: 'preemptible',
  contour: 'contour',
  image: 'image',
};

function LaunchForm() {
  const { me } = useSession();
  const { route } = useLocation();
  const admin = isAdmin(me);
  const myTeams = submittableTeams(me);
  // Platform admins may submit for any team; everyone else for their own.
  const teams = useTeamChoices(me, myTeams);
  const projects = useResource('/projects', ['teams']);
  const hosts = useResource('/hosts', ['hosts']);

  const [f, setF] = useState({
    team: preferredTeam(myTeams),
    project: '',
    command: '',
    name: '',
    gpus: '1',
    gpu_fraction: '',
    gpu_model: '',
    cpus: '',
    memory_gib: '',
    max_runtime: '',
    priority: '0',
    preemptible: false,
    queue_anyway: false,
    contour: '',
    image: '',
  });
  const act = useAction((job) => route(`/work/${job.id}`));
  const set = (k) => (v) => {
    if (k === 'team') rememberTeam(v);
    setF((prev) => ({ ...prev, [k]: v }));
  };
  const team = f.team || teams[0] || '';

  const models = useMemo(() => {
    const s = new Set();
    for (const h of hosts.data ?? []) for (const g of h.gpus ?? []) if (g.model) s.add(g.model);
    return [...s].sort();
  }, [hosts.data]);
  const contours = useMemo(() => {
    const s = new Set();
    for (const h of hosts.data ?? []) if (h.contour) s.add(h.contour);
    return [...s].sort();
  }, [hosts.data]);
  const teamProjects = (projects.data ?? []).filter((p) => p.team === team);

  // Where launch profiles (issue 8) will slot in: a profile will pre-fill `f` from the profiles
  // the user may use, before the user's own edits. There are none yet, so nothing is applied.

  // Refuses a command it cannot split as the server would a bad field; called inside the action,
  // so that the error shows on the field.
  function body() {
    let command;
    try {
      command = splitCommand(f.command);
    } catch (e) {
      throw new ApiError(400, { error: { message: e.message, field: 'command' } });
    }
    if (!command.length) {
      throw new ApiError(400, {
        error: { message: 'command: give a command to run', field: 'command' },
      });
    }
    const b = { command };
    if (f.name.trim()) b.name = f.name.trim();
    if (team) b.team = team;
    if (f.project) b.project = f.project;
    Object.assign(b, gpuAmount(f.gpus, f.gpu_fraction));
    if (f.gpu_model) b.gpu_model = f.gpu_model;
    if (f.cpus !== '') b.cpu_millis = scaled(f.cpus, 1000);
    if (f.memory_gib !== '') b.memory_mib = scaled(f.memory_gib, 1024);
    if (f.max_runtime.trim()) b.max_runtime = f.max_runtime.trim();
    if (f.priority !== '' && f.priority !== '0') {
      const n = Number(f.priority);
      b.priority = Number.isInteger(n) ? n : f.priority;
    }
    if (f.preemptible) b.preemptible = true;
    if (f.contour) b.contour = f.contour;
    if (f.image.trim()) b.image = f.image.trim();
    // A job no host could ever run is refused unless asked to queue for hosts about to join.
    if (f.queue_anyway) b.queue_anyway = true;
    return b;
  }

  const launch = () => api.post('/jobs', body());
  const errors = fieldErrors(act.error, FIELD_OF);
  const bind = binder(f, set, errors);

  return (
    <ActionForm act={act} run={launch} class="panel launch" data-testid="launch-form" noValidate>
      <h2>Launch a job</h2>
      <InputField
        {...bind('command')}
        label="Command"
        placeholder={'python train.py --lr 3e-4 --note "first run"'}
        required
        autoComplete="off"
        spellCheck={false}
      />
      <div class="row">
        <TeamField bind={bind} value={team} teams={teams} admin={admin} />
        <ProjectField bind={bind} projects={teamProjects} />
        <InputField {...bind('name')} label="Name" />
        <InputField
          {...bind('image')}
          label="Image"
          placeholder="on the host; or registry:5000/ml/pytorch:2.3"
        />
      </div>
      <div class="row">
        <GpuAmountFields bind={bind} />
        <SelectField {...bind('gpu_model')} label="GPU model" options={[['', 'any'], ...models]} />
        <CpuField {...bind('cpus')} placeholder="no limit" />
        <NumberField
          {...bind('memory_gib')}
          label="Memory (GiB)"
          step="0.5"
          placeholder="no limit"
        />
      </div>
      <div class="row">
        <InputField
          {...bind('max_runtime')}
          label="Max runtime"
          class="short"
          placeholder="e.g. 2h"
        />
        <NumberField {...bind('priority')} label="Priority" min="-1000" max="1000" />
        <SelectField
          {...bind('contour')}
          label="Contour"
          options={[['', 'default'], ...contours]}
        />
        <Checkbox
          cls="inline check"
          name="preemptible"
          checked={f.preemptible}
          set={set('preemptible')}
        >
          preemptible
        </Checkbox>
        <Checkbox
          cls="inline check"
          name="queue_anyway"
          checked={f.queue_anyway}
          set={set('queue_anyway')}
        >
          queue even if no host fits yet
        </Checkbox>
        <button type="submit" data-testid="launch-submit" disabled={act.busy}>
          {act.busy ? 'Launching…' : 'Launch'}
        </button>
      </div>
      {!errors.inForm && <ErrorNote error={act.error} />}
    </ActionForm>
  );
}

function JobDetail({ id }) {
  const { me } = useSession();
  const job = useResource(`/jobs/${id}`, ['jobs']);
  const j = job.data;
  const explain = useResource(j && j.state === 'queued' ? `/jobs/${id}/explain` : null, ['jobs']);
  const cancel = useAction();
  // Hold, release, requeue; refused or not, the job may have moved meanwhile: it is fetched
  // again after each.
  const control = useAction();
  const runControl = (what) => api.post(`/jobs/${id}/${what}`).finally(() => job.reload());

  async function cancelJob() {
    if (!window.confirm(`Cancel job ${id}${j.name ? ` (${j.name})` : ''}?`)) return;
    await cancel.run(() => api.post(`/jobs/${id}/cancel`));
    // Refused or not, the job may have moved meanwhile.
    job.reload();
  }

  if (job.error && !j) {
    return (
      <section>
        <h1>Job {id}</h1>
        <ErrorNote error={job.error.status === 404 ? { message: `No job ${id}.` } : job.error} />
        <p>
          <a href="/work">Back to my work</a>
        </p>
      </section>
    );
  }
  if (!j) return <Loading what={`job ${id}`} />;

  return (
    <section class="job-detail" data-testid="job-detail">
      <p>
        <a href="/work">← My work</a>
      </p>
      <h1>
        Job {j.id}
        {j.name ? `: ${j.name}` : ''}{' '}
        <span data-testid="job-state">
          <StateBadge state={j.state} />
        </span>
      </h1>
      <ErrorNote error={job.error} />
      {j.reason && <p class="reason">{j.reason}</p>}
      <JobActions
        job={j}
        controls={jobControls(me, j)}
        control={control}
        onControl={runControl}
        cancel={mayCancel(me, j) && { busy: cancel.busy, run: cancelJob }}
      />
      {j.cancel_requested && !TERMINAL.has(j.state) && <p class="note">Cancel requested.</p>}
      {j.held_by && j.state === 'queued' && (
        <p class="note" data-testid="job-held">
          Held by {j.held_by}: it stays queued, and is not scheduled until released.
        </p>
      )}
      {j.requeue_requested_by && !TERMINAL.has(j.state) && (
        <p class="note" data-testid="job-requeue-requested">
          Requeue asked by {j.requeue_requested_by}: the run stops, and the job goes back to the
          queue under the same id.
        </p>
      )}
      <ErrorNote error={cancel.error} />
      <ErrorNote error={control.error} testid="job-control-error" />
      <dl class="job-fields">
        <Row k="Team" v={j.team} />
        <Row k="Project" v={j.project} />
        <Row k="User" v={j.user} />
        <Row k="Command" v={<code>{j.command?.map(quoteArg).join(' ')}</code>} />
        <Row k="Image" v={j.image && <code>{j.image}</code>} />
        <Row k="Image digest" v={j.image_digest && <code>{j.image_digest}</code>} />
        <Row
          k="Image needs"
          v={j.image_min_cuda && `CUDA ${j.image_min_cuda} (its NVIDIA_REQUIRE_CUDA)`}
        />
        {j.pull && (
          <Row
            k="Pulled"
            v={
              j.pull.total
                ? `${fmtBytes(j.pull.bytes)} of ${fmtBytes(j.pull.total)}`
                : `${fmtBytes(j.pull.bytes)} so far`
            }
          />
        )}
        <Row k="GPUs" v={fmtGpus(j)} />
        <Row k="GPU models" v={j.gpu_models?.length ? j.gpu_models.join(', ') : 'any'} />
        <Row k="CPU" v={j.cpu_millis ? `${j.cpu_millis / 1000} cores` : 'no limit'} />
        <Row k="Memory" v={j.memory_mib ? `${(j.memory_mib / 1024).toFixed(1)} GiB` : 'no limit'} />
        <Row k="Priority" v={String(j.priority)} />
        <Row k="Preemptible" v={j.preemptible ? 'yes' : 'no'} />
        <Row k="Max runtime" v={j.max_runtime} />
        <Row k="Contour" v={j.contour} />
        {j.state === 'queued' && <Row k="Position" v={j.position} />}
        <Row
          k="Host"
          v={
            j.ranks?.length
              ? j.ranks.map((r) => `${r.host} [${r.gpu_indices.join(',')}]`).join(', ')
              : j.host
                ? `${j.host} [${(j.gpu_indices ?? []).join(',')}]`
                : null
          }
        />
        <Row k="Submitted" v={fmtTime(j.submitted_at)} />
        <Row k="Started" v={j.started_at && fmtTime(j.started_at)} />
        <Row k="Finished" v={j.finished_at && fmtTime(j.finished_at)} />
        <Row k="Exit code" v={j.exit_code} />
        <Row k="Signal" v={j.signal} />
        <Row k="Preemptions" v={j.preemptions || null} />
        {j.idle && <Row k="Idle since" v={fmtTime(j.idle.since)} />}
        {j.idle?.reclaim_at && <Row k="Reclaimed at" v={fmtTime(j.idle.reclaim_at)} />}
      </dl>
      {j.state === 'queued' && <Explain data={explain.data} error={explain.error} />}
      <JobUtilisation job={j} />
      <h2>Output</h2>
      <JobLog id={j.id} shownState={j.state} onState={job.reload} />
    </section>
  );
}

const CONTROL_LABELS = { hold: 'Hold', release: 'Release', requeue: 'Requeue' };

// The job's buttons: the controls that apply to it, then Cancel.
function JobActions({ job, controls, control, onControl, cancel }) {
  if (!controls.length && !cancel) return null;
  const requeueQuestion =
    `Requeue job ${job.id}${job.name ? ` (${job.name})` : ''}? Its run is stopped and it goes ` +
    'back to the queue under the same id; its log goes on.';
  return (
    <p class="row job-actions" data-testid="job-actions">
      {controls.map((what) => (
        <ActionButton
          act={control}
          class="secondary"
          data-testid={`job-${what}`}
          confirm={what === 'requeue' ? requeueQuestion : undefined}
          run={() => onControl(what)}
        >
          {CONTROL_LABELS[what]}
        </ActionButton>
      ))}
      {cancel && (
        <button
          type="button"
          class="danger"
          data-testid="job-cancel"
          onClick={cancel.run}
          disabled={cancel.busy}
        >
          {cancel.busy ? 'Cancelling…' : 'Cancel job'}
        </button>
      )}
    </p>
  );
}

// The GPUs the job holds (or held): rank 0's in the flat fields, every rank's in `ranks`.
function jobGpus(j) {
  const slices = j.ranks?.length
    ? j.ranks.map((r) => ({ host: r.host, indices: r.gpu_indices ?? [] }))
    : j.host
      ? [{ host: j.host, indices: j.gpu_indices ?? [] }]
      : [];
  const many = slices.length > 1;
  return slices.flatMap((s) =>
    s.indices.map((index) => ({
      host: s.host,
      index,
      label: many ? `${s.host} GPU ${index}` : `GPU ${index}`,
    })),
  );
}

// Utilisation and memory of the job's GPUs over its run: from its start to its end (or now).
function JobUtilisation({ job }) {
  const gpus = jobGpus(job);
  if (!job.started_at || !gpus.length) return null;
  const end = job.finished_at ? Date.parse(job.finished_at) : Date.now();
  const shared = job.gpu_milli && job.gpu_milli < 1000;
  return (
    <section class="panel" aria-labelledby="job-util-h" data-testid="job-utilisation">
      <h2 id="job-util-h">Utilisation over the run</h2>
      {shared && (
        <p class="muted">
          Readings are of the whole GPU: on a shared GPU they include its other holders.
        </p>
      )}
      <GpuHistory
        gpus={gpus}
        from={job.started_at}
        to={job.finished_at ?? undefined}
        spanMs={end - Date.parse(job.started_at)}
        testid="job-history"
        empty={
          job.finished_at
            ? 'No GPU samples were recorded while this job ran.'
            : 'No samples yet: the first GPU readings come a few seconds after the job starts.'
        }
      />
    </section>
  );
}

function Row({ k, v }) {
  if (v === null || v === undefined || v === '') return null;
  return (
    <>
      <dt>{k}</dt>
      <dd>{v}</dd>
    </>
  );
}

function quoteArg(a) {
  return /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`;
}

// The scheduler's word on a queued job: why it waits, and the numbers it gives.
function Explain({ data, error }) {
  if (error) return <ErrorNote error={error} />;
  if (!data?.wait) return null;
  const { kind, reason, position, ...rest } = data.wait;
  const q = data.team_quota;
  return (
    <div class="panel explain" data-testid="job-explain">
      <h2>Why it waits</h2>
      <p>
        <strong>{kind}</strong>: {reason} {position != null && <>(position {position})</>}
      </p>
      {Object.keys(rest).length > 0 && (
        <p class="muted">
          {Object.entries(rest)
            .map(
              ([k, v]) =>
                `${k.replace(/_/g, ' ')}: ${typeof v === 'object' ? JSON.stringify(v) : v}`,
            )
            .join(' · ')}
        </p>
      )}
      {q && (
        <p class="muted">
          Team {q.team}: guaranteed {q.guaranteed_gpus}, within {q.within_guarantee_gpus}, borrowed{' '}
          {q.borrowed_gpus}, lendable {q.lendable_gpus} GPUs
        </p>
      )}
    </div>
  );
}

const LOG_KEEP = 1 << 20; // characters shown; older output is dropped from the page, not the server

// Follows the job's output: long-polls GET /jobs/{id}/logs from the next byte offset, appending,
// until the job is over and no bytes are left.
function JobLog({ id, shownState, onState }) {
  const [text, setText] = useState('');
  const [status, setStatus] = useState('loading');
  const pre = useRef(null);
  // The log reply names the job's state: when it moved, the job above is refetched (this works
  // without the live stream too).
  const seen = useRef({ shownState, onState });
  seen.current = { shownState, onState };

  useEffect(() => {
    const ctl = new AbortController();
    const decoder = new TextDecoder();
    let offset = 0;
    let stopped = false;
    setText('');
    setStatus('loading');
    (async () => {
      while (!stopped) {
        try {
          const res = await api.raw(`/jobs/${id}/logs?offset=${offset}&wait=20`, {
            signal: ctl.signal,
          });
          const buf = await res.arrayBuffer();
          const state = res.headers.get('X-Allot-Job-State');
          if (state && state !== seen.current.shownState) seen.current.onState();
          if (buf.byteLength) {
            offset += buf.byteLength;
            const chunk = decoder.decode(buf, { stream: true });
            const el = pre.current;
            const atBottom = !el || el.scrollHeight - el.scrollTop - el.clientHeight < 24;
            setText((t) => {
              const all = t + chunk;
              return all.length > LOG_KEEP ? all.slice(all.length - LOG_KEEP) : all;
            });
            if (atBottom) requestAnimationFrame(() => el && (el.scrollTop = el.scrollHeight));
          }
          if (TERMINAL.has(state) && !buf.byteLength) {
            setStatus('ended');
            return;
          }
          setStatus('following');
          // A queued job has no output yet and the server may answer at once: do not spin.
          if (!buf.byteLength && state === 'queued') await sleep(3000);
        } catch (e) {
          if (stopped || e.name === 'AbortError') return;
          if (e.status === 404 || e.status === 403) {
            setStatus(e.message);
            return;
          }
          setStatus(`reconnecting (${e.message})`);
          await sleep(3000);
        }
      }
    })();
    return () => {
      stopped = true;
      ctl.abort();
    };
  }, [id]);

  return (
    <>
      <p class="muted log-status" aria-live="polite">
        {status === 'following' ? 'following…' : status === 'ended' ? 'end of output' : status}
      </p>
      <pre class="log" data-testid="job-log" ref={pre} tabIndex={0} aria-label="Job output">
        {text}
      </pre>
    </>
  );
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}
