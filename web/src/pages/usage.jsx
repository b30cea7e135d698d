// Usage: GPU-hours over time (allocated vs used, and idle) by team, project or user, the totals
// of the window (GET /usage), the allocations idle right now, and a CSV of what is shown.
import { useMemo, useState } from 'preact/hooks';
import { query } from '../api.js';
import { useResource } from '../live.js';
import {
  isAdmin,
  preferredTeam,
  rememberTeam,
  teamNames,
  useSession,
  useTeamColors,
} from '../session.js';
import { fmtHours, fmtPercent, fmtTime, since, teamColor, teamSlots } from '../format.js';
import { ErrorNote, Loading, Empty, InputField, SelectField } from '../components/ui.jsx';
import { Table } from '../components/table.jsx';
import { UPlotChart } from '../components/uplot-chart.jsx';
import './usage.css';

const WINDOWS = [
  ['24h', 'Last 24 hours', 24 * 3600e3],
  ['7d', 'Last 7 days', 7 * 24 * 3600e3],
  ['30d', 'Last 30 days', 30 * 24 * 3600e3],
  ['custom', 'Custom', 0],
];

const GROUPINGS = [
  ['team', 'Team'],
  ['project', 'Project'],
  ['user', 'User'],
];

// The series endpoint buckets by `step`; about 24..720 buckets keeps the chart readable.
function stepFor(ms) {
  return ms <= 7 * 24 * 3600e3 ? '1h' : '1d';
}

// A relative window is fixed when chosen (not recomputed on every render, which would refetch
// forever); "Refresh" moves it to now.
function windowFor(kind) {
  const span = WINDOWS.find((w) => w[0] === kind)[2];
  const to = new Date();
  return { kind, from: new Date(to.getTime() - span).toISOString(), to: to.toISOString() };
}

// <input type="datetime-local"> speaks local time without a zone.
function toLocalInput(iso) {
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function fromLocalInput(value) {
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

// Each group's colour: a team keeps its colour across the console; projects and users take
// slots among the groups charted, so that no two lines share one.
function groupColors(by, names, teamColorOf) {
  if (by === 'team') return teamColorOf;
  const slots = teamSlots(names);
  return (name) => teamColor(name, slots);
}

export function UsagePage() {
  const { me } = useSession();
  // A member of several teams sees one team's usage at a time (the server asks which); platform
  // admins see every team's.
  const mine = teamNames(me);
  const pickTeam = !isAdmin(me) && mine.length > 1;
  const [team, setTeamState] = useState(() => (pickTeam ? preferredTeam(mine) : ''));
  const setTeam = (t) => {
    rememberTeam(t);
    setTeamState(t);
  };
  const [by, setBy] = useState('team');
  const teamColorOf = useTeamColors(me);
  const [win, setWin] = useState(() => windowFor('7d'));
  const step = stepFor(new Date(win.to) - new Date(win.from));
  const params = { by, from: win.from, to: win.to, ...(team ? { team } : {}) };
  const series = useResource(`/usage/series${query({ ...params, step })}`, ['usage']);
  const totals = useResource(`/usage${query(params)}`, ['usage', 'jobs']);

  return (
    <section class="usage-page">
      <h1>Usage</h1>
      <div class="panel row usage-controls">
        {pickTeam && (
          <SelectField
            label="Team"
            data-testid="usage-team"
            name="team"
            value={team}
            set={setTeam}
            options={mine}
          />
        )}
        <SelectField
          label="Group by"
          data-testid="usage-by"
          name="by"
          value={by}
          set={setBy}
          options={GROUPINGS}
        />
        <SelectField
          label="Window"
          data-testid="usage-window"
          name="window"
          value={win.kind}
          set={(kind) => setWin(kind === 'custom' ? { ...win, kind } : windowFor(kind))}
          options={WINDOWS.map(([k, label]) => [k, label])}
        />
        {win.kind === 'custom' && <CustomWindow win={win} onChange={setWin} />}
        {win.kind !== 'custom' && (
          <button type="button" class="secondary" onClick={() => setWin(windowFor(win.kind))}>
            Refresh
          </button>
        )}
        <span class="spacer" />
        <button
          type="button"
          data-testid="usage-csv"
          disabled={!totals.data && !series.data}
          onClick={() => downloadCsv(by, win, totals.data, series.data)}
        >
          Export CSV
        </button>
      </div>
      <p class="muted window-note">
        {fmtTime(win.from)} – {fmtTime(win.to)}, buckets of {step}
      </p>

      <section class="panel" aria-labelledby="chart-h">
        <h2 id="chart-h">
          GPU-hours per {step === '1h' ? 'hour' : 'day'}: allocated (solid) and used (dashed)
        </h2>
        <ErrorNote error={series.error} />
        {series.loading && !series.data && <Loading what="the series" />}
        <SeriesCharts by={by} data={series.error ? null : series.data} teamColorOf={teamColorOf} />
      </section>

      <section class="panel" aria-labelledby="totals-h">
        <h2 id="totals-h">Totals of the window</h2>
        <ErrorNote error={totals.error} />
        {totals.loading && !totals.data && <Loading />}
        {totals.data && <TotalsTable report={totals.data} />}
      </section>

      <section class="panel" aria-labelledby="idle-h">
        <h2 id="idle-h">Idle allocations now</h2>
        {totals.data && <IdleTable rows={totals.data.idle_allocations ?? []} />}
      </section>
    </section>
  );
}

function CustomWindow({ win, onChange }) {
  const [from, setFrom] = useState(toLocalInput(win.from));
  const [to, setTo] = useState(toLocalInput(win.to));
  const [error, setError] = useState(null);
  return (
    <form
      class="row"
      onSubmit={(e) => {
        e.preventDefault();
        const f = fromLocalInput(from);
        const t = fromLocalInput(to);
        if (!f || !t)
          return setError({ message: 'both times are needed', field: f ? 'to' : 'from' });
        setError(null);
        onChange({ kind: 'custom', from: f, to: t });
      }}
    >
      <InputField label="From" type="datetime-local" name="from" value={from} set={setFrom} />
      <InputField label="To" type="datetime-local" name="to" value={to} set={setTo} />
      <button type="submit">Show</button>
      <ErrorNote error={error} />
    </form>
  );
}

function SeriesCharts({ by, data, teamColorOf }) {
  const built = useMemo(() => {
    if (!data || !Array.isArray(data.times) || !Array.isArray(data.series)) return null;
    const sw = data.series;
    const seriesColor = groupColors(
      by,
      sw.map((s) => s.name),
      teamColorOf,
    );
    // uPlot's default tick labels round small values to "0"; show enough digits for the step
    // between ticks (a short window of one GPU is thousandths of a GPU-hour per bucket).
    const gpuHours = (u, ticks, axis, space, incr) => {
      const digits = Math.min(6, Math.max(0, -Math.floor(Math.log10(incr || 1))));
      return ticks.map((v) => v.toFixed(digits));
    };
    const axes = [{}, { label: 'GPU-hours', size: 60, values: gpuHours }];
    const main = {
      options: {
        scales: { x: { time: true } },
        axes,
        legend: { live: true },
        series: [
          {},
          ...sw.flatMap((s) => [
            { label: `${s.name} allocated`, stroke: seriesColor(s.name), width: 2 },
            { label: `${s.name} used`, stroke: seriesColor(s.name), width: 2, dash: [6, 4] },
          ]),
        ],
      },
      data: [data.times, ...sw.flatMap((s) => [s.gpu_hours_allocated, s.gpu_hours_used])],
    };
    const idle = {
      options: {
        scales: { x: { time: true } },
        axes,
        series: [
          {},
          ...sw.map((s) => ({ label: `${s.name} idle`, stroke: seriesColor(s.name), width: 2 })),
        ],
      },
      data: [data.times, ...sw.map((s) => s.idle_gpu_hours)],
    };
    return { main, idle, empty: !sw.length || !data.times.length };
  }, [data, by, teamColorOf]);

  if (!built) return <div data-testid="usage-chart" class="uplot-box" />;
  return (
    <div>
      {built.empty && <Empty>No GPU time in this window.</Empty>}
      <UPlotChart
        testid="usage-chart"
        label="Allocated and used GPU-hours over time"
        options={built.main.options}
        data={built.main.data}
      />
      <h3 class="idle-title">Idle GPU-hours per bucket</h3>
      <UPlotChart
        testid="usage-idle-chart"
        label="Idle GPU-hours over time"
        height={180}
        options={built.idle.options}
        data={built.idle.data}
      />
    </div>
  );
}

function TotalsTable({ report }) {
  const rows = report.rows ?? [];
  if (!rows.length) return <Empty>No GPU time in this window.</Empty>;
  return (
    <Table
      testid="usage-table"
      cols={[
        report.by,
        ...[
          'Allocated GPU-h',
          'Measured GPU-h',
          'Used GPU-h',
          'Efficiency',
          `Idle GPU-h (<${report.idle_below_percent}%)`,
          'Peak GPUs',
          'Cost',
        ].map((c) => [c, 'num']),
      ]}
      rows={rows}
      row={(r) => (
        <tr key={r.name}>
          <td>{r.name}</td>
          <td class="num">{fmtHours(r.gpu_hours_allocated)}</td>
          <td class="num">{fmtHours(r.gpu_hours_measured)}</td>
          <td class="num">{fmtHours(r.gpu_hours_used)}</td>
          <td class="num">{fmtPercent(r.efficiency)}</td>
          <td class="num">{fmtHours(r.idle_gpu_hours)}</td>
          <td class="num">{r.peak_gpus ?? '—'}</td>
          <td class="num">{r.cost === null || r.cost === undefined ? '—' : r.cost.toFixed(2)}</td>
        </tr>
      )}
    />
  );
}

function IdleTable({ rows }) {
  if (!rows.length) return <Empty>No allocation is idle now.</Empty>;
  return (
    <Table
      testid="usage-idle"
      cols={['Job', 'Team', 'Project', 'User', 'Host', ['GPUs', 'num'], 'Idle for', 'Reclaimed at']}
      rows={rows}
      row={(a) => (
        <tr key={a.job}>
          <td>
            <a href={`/work/${a.job}`}>{a.job}</a>
          </td>
          <td>{a.team}</td>
          <td>{a.project ?? '—'}</td>
          <td>{a.user}</td>
          <td>{a.host}</td>
          <td class="num">{a.gpus}</td>
          <td title={fmtTime(a.idle_since)}>{since(a.idle_since)}</td>
          <td>{a.reclaim_at ? fmtTime(a.reclaim_at) : 'not reclaimed (notify)'}</td>
        </tr>
      )}
    />
  );
}

function csvCell(v) {
  if (v === null || v === undefined) return '';
  const s = String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

// The CSV is made here from what the page shows: the totals, then the series (one line per
// bucket and group), so no extra server endpoint is needed.
function downloadCsv(by, win, totals, series) {
  const lines = [];
  const push = (cells) => lines.push(cells.map(csvCell).join(','));
  if (totals) {
    push([
      by,
      'gpu_hours_allocated',
      'gpu_hours_measured',
      'gpu_hours_used',
      'efficiency',
      'idle_gpu_hours',
      'peak_gpus',
      'cost',
    ]);
    for (const r of totals.rows ?? []) {
      push([
        r.name,
        r.gpu_hours_allocated,
        r.gpu_hours_measured,
        r.gpu_hours_used,
        r.efficiency,
        r.idle_gpu_hours,
        r.peak_gpus,
        r.cost,
      ]);
    }
  }
  if (series && Array.isArray(series.times)) {
    if (lines.length) lines.push('');
    push(['bucket_start', by, 'gpu_hours_allocated', 'gpu_hours_used', 'idle_gpu_hours']);
    series.times.forEach((t, i) => {
      const at = new Date(t * 1000).toISOString();
      for (const s of series.series ?? []) {
        push([
          at,
          s.name,
          s.gpu_hours_allocated?.[i],
          s.gpu_hours_used?.[i],
          s.idle_gpu_hours?.[i],
        ]);
      }
    });
  }
  const blob = new Blob([lines.join('\n') + '\n'], { type: 'text/csv' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = `allot-usage-${by}-${win.from.slice(0, 10)}_${win.to.slice(0, 10)}.csv`;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
