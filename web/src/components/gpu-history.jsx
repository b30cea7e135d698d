// Utilisation and memory over time of some GPUs, one line per GPU, from
// GET /hosts/{name}/gpus/{index}/history: a host's GPUs on its page, the GPUs a job holds on the
// job's. Fetched again when the live stream says telemetry changed (allotd says so at most every
// 5 s), so a chart of now keeps moving. A GPU's line keeps its colour slot (--team-N) by its
// place in the list: the palette's colours are the ones checked to be far apart.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, query } from '../api.js';
import { useLive } from '../live.js';
import { TEAM_SLOTS } from '../format.js';
import { ErrorNote, Loading, Empty } from './ui.jsx';
import { UPlotChart } from './uplot-chart.jsx';

const HOUR = 3600e3;

// Raw samples for a short window (an agent samples every few seconds; 10,000 points are the most
// one answer holds, and past them the newest are the ones left out), minute rollups up to a
// week, hour rollups beyond.
export function resolutionFor(spanMs) {
  if (spanMs <= 2 * HOUR) return 'raw';
  if (spanMs <= 7 * 24 * HOUR) return 'minute';
  return 'hour';
}

// Every GPU's history for the window; { data: [answer per GPU] | null, error, loading }.
// `from`/`to` are as the API takes them (ISO 8601, or relative like "-1h"; no `to`: now). One
// round of requests at a time; a change meanwhile (a new window, a live nudge) asks again after.
function useHistories(gpus, from, to, resolution) {
  const paths = gpus.map(
    (g) =>
      `/hosts/${encodeURIComponent(g.host)}/gpus/${g.index}/history` +
      query({ from, to, resolution }),
  );
  const key = paths.join(' ');
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const busy = useRef(false);
  const again = useRef(false);
  const current = useRef(key);
  current.current = key;
  const latest = useRef(null);
  latest.current = async () => {
    if (!paths.length) return;
    if (busy.current) {
      again.current = true;
      return;
    }
    busy.current = true;
    const asked = key;
    try {
      const data = await Promise.all(paths.map((p) => api.get(p)));
      if (current.current === asked) setState({ data, error: null, loading: false });
    } catch (error) {
      if (current.current === asked) setState((s) => ({ ...s, error, loading: false }));
    } finally {
      busy.current = false;
      if (again.current || current.current !== asked) {
        again.current = false;
        latest.current();
      }
    }
  };
  useEffect(() => {
    setState({ data: null, error: null, loading: paths.length > 0 });
    latest.current();
  }, [key]);
  // A window that ends at a given time is history: nothing new will come into it.
  useLive(to ? [] : ['telemetry'], () => latest.current());
  return state;
}

// uPlot wants one x array for all series: the union of the GPUs' sample times, each series null
// where its GPU has no point (spanGaps draws across those).
function aligned(answers, pick) {
  const times = new Set();
  for (const a of answers) for (const p of a.points) times.add(Date.parse(p.at) / 1000);
  const xs = [...times].sort((x, y) => x - y);
  const at = new Map(xs.map((t, i) => [t, i]));
  const ys = answers.map((a) => {
    const col = new Array(xs.length).fill(null);
    for (const p of a.points) col[at.get(Date.parse(p.at) / 1000)] = pick(p);
    return col;
  });
  return [xs, ...ys];
}

// Tick labels with as many decimals as the step between ticks needs ("0.5", not "0.5, 0.5").
function ticksOf(scale) {
  return (u, ticks, axis, space, incr) => {
    const digits = Math.min(3, Math.max(0, -Math.floor(Math.log10((incr || 1) / scale))));
    return ticks.map((v) => (v / scale).toFixed(digits));
  };
}

// `range`: the y scale's [min, max] or a function of the data's (uPlot's own when null).
function chartOptions(labels, yLabel, range, scale, fmt) {
  return {
    scales: { x: { time: true }, y: range ? { range } : {} },
    axes: [{}, { label: yLabel, size: 56, values: ticksOf(scale) }],
    legend: { live: true },
    series: [
      {},
      ...labels.map((label, i) => ({
        label,
        stroke: `var(--team-${i % TEAM_SLOTS})`,
        width: 2,
        spanGaps: true,
        points: { show: false },
        value: (u, v) => (v == null ? '—' : fmt(v)),
      })),
    ],
  };
}

// `gpus`: [{ host, index, label }]. `empty`: the sentence to show while there are no samples.
export function GpuHistory({ gpus, from, to, spanMs, testid, empty }) {
  const resolution = resolutionFor(spanMs);
  const res = useHistories(gpus, from, to, resolution);
  const labels = gpus.map((g) => g.label);
  // Options change with the GPUs only, so a refresh gives the charts new data in place.
  const options = useMemo(
    () => ({
      util: chartOptions(labels, 'utilisation %', [0, 100], 1, (v) => `${Math.round(v)}%`),
      // From zero, and at least 1 GiB tall: an idle GPU's few MiB are not a cliff.
      memory: chartOptions(
        labels,
        'memory GiB',
        (u, min, max) => [0, Math.max(max ?? 0, 1024) * 1.05],
        1024,
        (v) => `${(v / 1024).toFixed(1)} GiB`,
      ),
    }),
    [labels.join(',')],
  );
  const charts = useMemo(() => {
    if (!res.data) return null;
    return {
      samples: res.data.reduce((n, a) => n + a.points.length, 0),
      truncated: res.data.some((a) => a.truncated),
      util: { options: options.util, data: aligned(res.data, (p) => p.utilization_pct) },
      memory: { options: options.memory, data: aligned(res.data, (p) => p.memory_max_mib) },
    };
  }, [res.data, options]);

  if (!gpus.length) return null;
  return (
    <div class="gpu-history" data-testid={testid}>
      <ErrorNote error={res.error} />
      {res.loading && !res.data && <Loading what="utilisation" />}
      {charts && charts.samples === 0 && <Empty>{empty}</Empty>}
      {charts && charts.samples > 0 && (
        <>
          {charts.truncated && (
            <p class="note">More samples than one chart holds: the newest are left out.</p>
          )}
          <UPlotChart
            testid={`${testid}-util`}
            label={`GPU utilisation over time: ${gpus.map((g) => g.label).join(', ')}`}
            height={220}
            options={charts.util.options}
            data={charts.util.data}
          />
          <h3 class="chart-title">
            Memory used (peak per {resolution === 'raw' ? 'sample' : resolution})
          </h3>
          <UPlotChart
            testid={`${testid}-memory`}
            label="GPU memory used over time"
            height={150}
            options={charts.memory.options}
            data={charts.memory.data}
          />
        </>
      )}
    </div>
  );
}
