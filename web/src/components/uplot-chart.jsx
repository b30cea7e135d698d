// A uPlot chart that follows its container's width (ResizeObserver) and is rebuilt when its
// options or data change. Only pages that chart import it, so uPlot stays out of the first load.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export function UPlotChart({ options, data, height = 280, testid, label }) {
  const box = useRef(null);
  const plot = useRef(null);

  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const width = Math.max(300, el.clientWidth);
    plot.current = new uPlot({ ...options, width, height }, data, el);
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
  }, [options, data, height]);

  return <div class="uplot-box" ref={box} data-testid={testid} role="img" aria-label={label} />;
}
