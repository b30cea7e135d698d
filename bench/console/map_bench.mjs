// How the console's cluster map holds up at fleet size: starts bench/console_fleet (allotd with
// --hosts fake hosts of 8 GPUs, jobs on 70% of them, telemetry every second), logs in as the
// admin in Debian's Chromium (1280x800) and measures
//   - the first load: from navigation to every host card on the map;
//   - live updates for --seconds: the map refetches /cluster/map on the event stream's changes;
//     frame intervals (requestAnimationFrame), long tasks (over 50 ms, the browser's own
//     PerformanceObserver), and how long each /cluster/map fetch took and how big it was.
// Only 127.0.0.1 is contacted.
//
//   ninja -C build console_fleet allotd && node bench/console/map_bench.mjs --hosts 1000
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import {
  launchBrowser,
  logIn,
  newPage,
  screenshot,
} from "../../web/test/browser.mjs";

const repo = resolve(import.meta.dirname, "..", "..");
const { values: opts } = parseArgs({
  options: {
    hosts: { type: "string", default: "1000" },
    seconds: { type: "string", default: "20" },
    bin: { type: "string", default: resolve(repo, "build", "bin") },
  },
});
const hosts = Number(opts.hosts);

function pct(sorted, p) {
  if (!sorted.length) return 0;
  return sorted[
    Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)
  ];
}
const ms = (x) => `${x.toFixed(1)} ms`;

const fleet = spawn(
  resolve(opts.bin, "console_fleet"),
  ["--hosts", String(hosts), "--web-dir", resolve(repo, "web", "dist")],
  { stdio: ["pipe", "pipe", "inherit"] },
);
const ready = await new Promise((ok, fail) => {
  const lines = createInterface({ input: fleet.stdout });
  lines.on("line", (l) => l.startsWith("ready ") && ok(l.split(" ")));
  fleet.on("exit", (code) =>
    fail(new Error(`console_fleet exited with ${code}`)),
  );
});
const [, url, user, password] = ready;
console.log(`fleet ready: ${hosts} hosts x 8 GPUs at ${url}`);

const browser = await launchBrowser();
try {
  const page = await newPage(browser);
  page.setDefaultTimeout(120000);
  await logIn(page, url, user, password);
  // The first load, measured again from a fresh navigation now that the session exists.
  const started = Date.now();
  await page.goto(url);
  await page.waitForFunction(
    (n) =>
      document.querySelectorAll(
        "[data-testid=cluster-map] [data-testid^=host-]",
      ).length >= n,
    hosts,
  );
  const firstLoad = Date.now() - started;
  await screenshot(page, `map-${hosts}-hosts`);

  // Live updates: record every frame interval and long task for the window.
  await page.evaluate(() => {
    window.__bench = { frames: [], longTasks: [], last: performance.now() };
    const tick = (t) => {
      window.__bench.frames.push(t - window.__bench.last);
      window.__bench.last = t;
      window.__bench.raf = requestAnimationFrame(tick);
    };
    window.__bench.raf = requestAnimationFrame(tick);
    new PerformanceObserver((list) => {
      for (const e of list.getEntries())
        window.__bench.longTasks.push(e.duration);
    }).observe({ type: "longtask" });
    performance.clearResourceTimings();
    performance.setResourceTimingBufferSize(10000);
  });
  await new Promise((ok) => setTimeout(ok, Number(opts.seconds) * 1000));
  const r = await page.evaluate(() => {
    cancelAnimationFrame(window.__bench.raf);
    const fetches = performance
      .getEntriesByType("resource")
      .filter((e) => /\/api\/v1\/(cluster\/map|usage)(\?|$)/.test(e.name))
      .map((e) => ({
        name: new URL(e.name).pathname,
        ms: e.duration,
        kb: e.encodedBodySize / 1024,
      }));
    return {
      frames: window.__bench.frames,
      longTasks: window.__bench.longTasks,
      fetches,
    };
  });
  const frames = r.frames.slice(1).sort((a, b) => a - b);
  const long = r.longTasks.sort((a, b) => a - b);
  console.log(`first load to a full map: ${firstLoad} ms`);
  console.log(
    `frames over ${opts.seconds} s: ${frames.length}; interval p50 ${ms(pct(frames, 50))}, ` +
      `p95 ${ms(pct(frames, 95))}, p99 ${ms(pct(frames, 99))}, max ${ms(frames.at(-1) ?? 0)}`,
  );
  console.log(
    `long tasks: ${long.length}, total ${ms(long.reduce((a, b) => a + b, 0))}, ` +
      `p50 ${ms(pct(long, 50))}, max ${ms(long.at(-1) ?? 0)}`,
  );
  for (const name of ["/api/v1/cluster/map", "/api/v1/usage"]) {
    const f = r.fetches.filter((x) => x.name === name);
    const d = f.map((x) => x.ms).sort((a, b) => a - b);
    if (f.length) {
      console.log(
        `${name}: ${f.length} refetches, p50 ${ms(pct(d, 50))}, max ${ms(d.at(-1))}, ` +
          `${f[0].kb.toFixed(0)} KB each (compressed size as sent)`,
      );
    }
  }
} finally {
  await browser.close();
  fleet.stdin.end();
  await new Promise((ok) => fleet.once("exit", ok));
}
