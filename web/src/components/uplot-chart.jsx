// A uPlot chart that follows its container's width (ResizeObserver), is rebuilt when its options
// change and given new data in place when only the data does (a live chart does not flicker).
// Only pages that chart import it, so uPlot stays out of the first load.
// uPlot draws on a canvas, which knows no CSS custom properties: colours given as var(--x) are
// looked up when the chart is built, axes and grid take the theme's muted text and line colours,
// and the chart is built again when the theme changes (prefers-color-scheme), so it reads in
// light and dark alike.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { resolveColor } from '../format.js';

const DARK = '(prefers-color-scheme: dark)';

// 'dark' or 'light', following the system's setting as it changes.
function useColorScheme() {
  const query = typeof matchMedia === 'function' ? matchMedia(DARK) : null;
  const [dark, setDark] = useState(!!query?.matches);
  useEffect(() => {
    if (!query) return undefined;
    const on = (e) => setDark(e.matches);
    query.addEventListener('change', on);
    return () => query.removeEventListener('change', on);
  }, []);
  return dark ? 'dark' : 'light';
}

// `stroke` and `fill` of the object resolved to colours (left out where not given).
function resolved(o) {
  const out = { ...o };
  for (const k of ['stroke', 'fill']) if (typeof o[k] === 'string') out[k] = resolveColor(o[k]);
  return out;
}

function themed(options) {
  const text = resolveColor('var(--muted)');
  const line = resolveColor('var(--line)');
  return {
    ...options,
    series: (options.series ?? []).map(resolved),
    axes: (options.axes ?? [{}, {}]).map((a) => ({
      stroke: text,
      ...a,
      grid: { stroke: line, width: 1, ...a.grid },
      ticks: { stroke: line, width: 1, ...a.ticks },
    })),
  };
}

export function UPlotChart({ options, data, height = 280, testid, label }) {
  const box = useRef(null);
  const plot = useRef(null);
  const shown = useRef(null); // the data the chart has
  const scheme = useColorScheme();

  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const width = Math.max(300, el.clientWidth);
    plot.current = new uPlot({ ...themed(options), width, height }, data, el);
    shown.current = data;
    const ro = new ResizeObserver(() => {
      const w = Math.max(300, el.clientWidth);
      if (plot.current && w !== plot.current.width) plot.current.setSize({ width: w, height });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [options, height, scheme]);

  useEffect(() => {
    if (plot.current && shown.current !== data) {
      plot.current.setData(data);
      shown.current = data;
    }
  }, [data]);

  return (
    <div
      class="uplot-box"
      ref={box}
      data-testid={testid}
      data-scheme={scheme}
      role="img"
      aria-label={label}
    />
  );
}
