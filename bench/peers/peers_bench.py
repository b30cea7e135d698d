#!/usr/bin/env python3
"""Allot side by side with its peers, in one run on this machine: the same job streams through a
real Allot (allotd on embedded SQLite, one agent with sim:8xH100) and then through Slurm 22.05
(Debian's, one node with 8 GPUs that are only counted, sched/backfill, no accounting:
slurm_peer.py), then Allot's sessions against JupyterHub 3.0. Prints one table, metric | Allot |
peer | ratio, and writes an SVG of the latency distributions (svg_plot.py).

The streams, the same on both sides and in this order:
1. interactive latency, in steady state: a burst of `--burst` one-GPU jobs from 16 submitters,
   drained, then `--n` of `allot run --wait --gpus 1 -- true` against `srun --gres=gpu:1 true`,
   each a fresh process timed from spawn to exit (as bench/cli_latency.py does);
2. CLI submission: `--submissions` sequential `allot run --gpus 1 -- true` (no wait) against
   `sbatch --gres=gpu:1 --wrap=true`, only the submissions timed, then drained;
3. end-to-end throughput: one-GPU `true` jobs submitted by 16 threads, each running the CLI
   (`allot run` / `sbatch`), until every one has ended, on the one 8-GPU host: `--allot-jobs`
   for Allot and fewer, `--slurm-jobs`, for Slurm, which runs about 3 a second; and for Allot
   the same over 16 keep-alive API connections (bench/job_throughput.py);
4. sessions: bench/session_start/session_bench.py (create to Jupyter answering through allotd)
   against jupyterhub_bench.py (server start to the first 200 through the hub's proxy).

Loopback only: the whole run moves itself into a network namespace of its own holding nothing
but lo (Slurm's daemons bind every address), and everything it started there is stopped, and
its scratch dirs removed, when it ends, however it ends (^C included). Every wait is bounded.
Needs root, the binaries of `make build`, Debian's Jupyter (scripts/install-deps.sh) and
bench/peers/install.sh (Slurm, MUNGE, JupyterHub); `make bench` runs it (scripts/run-bench.sh).

  sudo python3 bench/peers/peers_bench.py [--bin build/bin] [--n 50] [--burst 50]
      [--submissions 300] [--allot-jobs 2000] [--slurm-jobs 200] [--sessions 10]
      [--svg docs/benchmarks/peers-latency.svg] [--journaled-ext4]

--journaled-ext4 puts both peers' scratch dirs (allotd's data and the agent's work dir, Slurm's
state and spool) on a fresh journaled ext4 on a loop device, removed at the end, as a production
host's disk would be; without it they go in $TMPDIR (job_throughput.py says why it matters).
"""

import argparse
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "bench", "session_start"))
import cli_latency  # noqa: E402
import job_throughput  # noqa: E402
import slurm_peer  # noqa: E402
import svg_plot  # noqa: E402
from local_cluster import journaled_ext4, pct, scratch_cluster, wait_until  # noqa: E402

ALLOT_BINARIES = ["allotd", "allot-agent", "allot-job-shim", "allot"]
SRUN = ["srun", "--gres=gpu:1", "true"]
SBATCH = ["sbatch", "--gres=gpu:1", "--wrap=true"]


def allot_streams(args):
    config = job_throughput.burst_config(max(args.allot_jobs, args.submissions))
    with scratch_cluster(args.bin, "peers", gpus="sim:8xH100", config=config) as c:
        cli = [os.path.join(c.bin, "allot"), "--server", c.server, "--token", c.token]

        def drain(timeout):
            wait_until(lambda: not job_throughput.unfinished(c.port, c.token), timeout, 0.01)

        def none_failed(what):
            if job_throughput.any_in(c.port, c.token, "failed,lost,cancelled"):
                raise SystemExit(f"peers: some Allot jobs of the {what} did not succeed")

        r = {}
        cli_latency.submit_many(c, args.burst, args.connections)
        drain(120)
        r["wait"] = cli_latency.timed(cli + ["run", "--gpus", "1", "--wait", "--", "true"], args.n)
        t0 = time.perf_counter()
        r["submit"] = cli_latency.timed(cli + ["run", "--gpus", "1", "--", "true"],
                                        args.submissions)
        r["submit_total"] = time.perf_counter() - t0
        drain(args.max_seconds)
        none_failed("first two streams")
        t0 = time.perf_counter()
        cli_latency.submit_many(c, args.allot_jobs, args.connections)
        drain(args.max_seconds)
        r["cli_tp"] = args.allot_jobs / (time.perf_counter() - t0)
        none_failed("CLI throughput stream")
        _, total = job_throughput.run_to_end(c, args.allot_jobs, args.connections,
                                             args.max_seconds)
        r["api_tp"] = args.allot_jobs / total
        return r


def slurm_streams(args):
    with slurm_peer.scratch_slurm(gpus=8) as s:
        r = {}
        slurm_peer.sbatch_many(s, args.burst, args.connections)
        slurm_peer.wait_drained(s, 120)
        r["wait"] = slurm_peer.timed(s, SRUN, args.n)
        t0 = time.perf_counter()
        r["submit"] = slurm_peer.timed(s, SBATCH, args.submissions)
        r["submit_total"] = time.perf_counter() - t0
        slurm_peer.wait_drained(s, args.max_seconds)
        t0 = time.perf_counter()
        r["retries"] = slurm_peer.sbatch_many(s, args.slurm_jobs, args.connections)
        slurm_peer.wait_drained(s, args.max_seconds)
        r["cli_tp"] = args.slurm_jobs / (time.perf_counter() - t0)
        r["failed"] = slurm_peer.failed_jobs(s)
        if r["failed"]:
            raise SystemExit(f"peers: {r['failed']} Slurm jobs ended badly (slurmctld's log)")
        return r


def session_streams(args):
    """(Allot's create->answering p50 ms, JupyterHub's start->200 p50 ms, hub version)."""
    import jupyterhub_bench
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "session_start",
                                                       "session_bench.py"),
                          "--bin", args.bin, "--n", str(args.sessions), "--requests", "300"],
                         capture_output=True, text=True, timeout=600)
    m = re.search(r"create -> Jupyter answering.*?: p50 ([0-9.]+) ms", out.stdout)
    if out.returncode != 0 or not m:
        raise SystemExit(f"peers: session_bench.py failed: {(out.stderr or out.stdout)[-300:]}")
    version, _, answer_ms = jupyterhub_bench.hub_start_times(args.sessions)
    return float(m.group(1)), statistics.median(answer_ms), version


def ratio(better_is_lower, allot, peer):
    if not allot or not peer:
        return "—"
    return f"{(peer / allot if better_is_lower else allot / peer):.1f}x"


def table(args, a, s, sessions):
    rows = [("interactive p50, run --wait vs srun (ms)", True, pct(a["wait"], 50),
             pct(s["wait"], 50), "{:.1f}"),
            ("interactive p99, run --wait vs srun (ms)", True, pct(a["wait"], 99),
             pct(s["wait"], 99), "{:.1f}"),
            ("CLI submission p50, run vs sbatch (ms)", True, pct(a["submit"], 50),
             pct(s["submit"], 50), "{:.1f}"),
            (f"{args.submissions} sequential submissions (s)", True, a["submit_total"],
             s["submit_total"], "{:.2f}"),
            ("submission rate, one CLI after another (/s)", False,
             args.submissions / a["submit_total"], args.submissions / s["submit_total"], "{:.0f}"),
            (f"end to end, 16 CLI submitters, {args.allot_jobs} vs {args.slurm_jobs} jobs (jobs/s)",
             False, a["cli_tp"], s["cli_tp"], "{:.1f}"),
            (f"end to end, 16 API connections, {args.allot_jobs} jobs (jobs/s)", False,
             a["api_tp"], None, "{:.1f}")]
    if sessions:
        rows.append((f"session start p50, allotd vs JupyterHub {sessions[2]} (ms)", True,
                     sessions[0], sessions[1], "{:.0f}"))
    lines = ["| metric | Allot | Slurm 22.05 / JupyterHub | ratio |", "|---|---|---|---|"]
    for name, lower, av, pv, fmt in rows:
        lines.append(f"| {name} | {fmt.format(av)} | {fmt.format(pv) if pv else '—'} | "
                     f"{ratio(lower, av, pv)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--n", type=int, default=50, help="run --wait and srun each")
    ap.add_argument("--burst", type=int, default=50, help="jobs through the host before them")
    ap.add_argument("--submissions", type=int, default=300)
    ap.add_argument("--allot-jobs", type=int, default=2000)
    ap.add_argument("--slurm-jobs", type=int, default=200)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--sessions", type=int, default=10, help="per side; 0 skips JupyterHub")
    ap.add_argument("--max-seconds", type=int, default=600, help="bound on each drain")
    ap.add_argument("--journaled-ext4", action="store_true",
                    help="both peers' scratch dirs on a fresh journaled ext4 (loop device)")
    ap.add_argument("--svg", default=os.path.join(ROOT, "docs", "benchmarks",
                                                  "peers-latency.svg"))
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    slurm_peer.require_root_and(slurm_peer.PROGRAMS + (
        ["jupyterhub", "configurable-http-proxy"] if args.sessions else []))
    missing = [b for b in ALLOT_BINARIES if not os.access(os.path.join(args.bin, b), os.X_OK)]
    if missing:
        raise SystemExit(f"peers: {', '.join(missing)} missing in {args.bin}; run `make build`")
    slurm_peer.isolate_network()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()
    print(f"peers_bench {when} cpus={os.cpu_count()} load={load0[0]:.2f} n={args.n} "
          f"burst={args.burst} submissions={args.submissions} allot_jobs={args.allot_jobs} "
          f"slurm_jobs={args.slurm_jobs} connections={args.connections} "
          f"sessions={args.sessions} scratch="
          f"{'journaled-ext4' if args.journaled_ext4 else tempfile.gettempdir()}", flush=True)
    failed = None
    # Processes still in the network namespace are swept before the file system under them goes.
    fs = journaled_ext4() if args.journaled_ext4 else contextlib.nullcontext()
    with fs:
        try:
            a = allot_streams(args)
            print(f"  allot done, load {os.getloadavg()[0]:.2f}", flush=True)
            s = slurm_streams(args)
            print(f"  slurm done ({s['retries']} sbatch retried), load {os.getloadavg()[0]:.2f}",
                  flush=True)
            sessions = None
            if args.sessions:
                try:
                    sessions = session_streams(args)
                except SystemExit as e:  # the job streams' table is still worth printing
                    failed = str(e)
        finally:
            slurm_peer.sweep_netns()
    load1 = os.getloadavg()
    print(table(args, a, s, sessions))
    print("ratio: the peer's time over Allot's, or Allot's rate over the peer's (above 1: Allot "
          "ahead).")
    verdict = "met" if pct(a["wait"], 50) * 2 <= pct(s["wait"], 50) else "NOT met"
    print(f"target: run --wait p50 at most half of srun's: {verdict}")
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if args.svg:
        os.makedirs(os.path.dirname(os.path.abspath(args.svg)), exist_ok=True)
        with open(args.svg, "w") as f:
            f.write(svg_plot.cdf_svg(
                [("allot run --wait --gpus 1 -- true", "#1f77b4", a["wait"]),
                 ("srun --gres=gpu:1 true", "#d62728", s["wait"]),
                 ("allot run --gpus 1 -- true (no wait)", "#6baed6", a["submit"]),
                 ("sbatch --gres=gpu:1 --wrap=true", "#ff9896", s["submit"])],
                "Allot and Slurm 22.05 from the shell: spawn to exit",
                f"{when}, {os.cpu_count()} CPUs, one host of 8 GPUs, load {load0[0]:.1f}-"
                f"{load1[0]:.1f}; bench/peers/peers_bench.py"))
        print(f"wrote {args.svg}")
    if failed:
        raise SystemExit(f"sessions side by side not measured: {failed}")


if __name__ == "__main__":
    main()
