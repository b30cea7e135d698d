#!/usr/bin/env python3
"""End-to-end throughput of trivial jobs: N one-GPU `true` jobs submitted through the API over C
keep-alive connections to allotd, run on simulated hosts, until every one has succeeded.

Reports jobs/s from the first submission to the last job's end, how long the submissions alone
took, and the busy CPU time of the whole machine per job over that span (cpu_ms_per_job). One
real allotd (embedded SQLite) and H agents of `--gpus` each, on 127.0.0.1 only; the submissions
come from build/bin/submit_load.

  python3 bench/job_throughput.py [--jobs 2000] [--connections 16] [--hosts 1] [--gpus sim:8xH100]
      [--journaled-ext4] [--bin DIR] [--agent-flags "--shim-server off"]

ALLOT_BENCH_VERBOSE=1 prints submit_load's own report (latency, rate by fifth) as well.

--journaled-ext4 (root) puts the run's scratch dirs (allotd's data, the agents' work dirs) on a
file system of its own: a fresh ext4 with a journal, as Debian creates by default, on a loop
device over a sparse file, unmounted and removed at the end. Without it they go in $TMPDIR;
where that is ext4 without a journal (this project's CI machines), every new inode skips those
freed in the last seconds, so a stream of short jobs slows itself down, and more with each run
(docs/benchmarks.md, section 2c).
"""

import argparse
import contextlib
import http.client
import json
import os
import sys
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "session_start"))
from local_cluster import journaled_ext4, scratch_cluster  # noqa: E402


# The submissions come from submit_load (bench/submit_load.cc): one C++ thread with a
# keep-alive connection each. Python threads doing the same took 13% of this 2-CPU machine's
# time during an eight-host run, CPU the cluster under test then did not have. It is always the
# one built from this tree, also with --bin: it is the load, not what is measured.
SUBMIT_LOAD = os.path.join(ROOT, "build", "bin", "submit_load")


def submit_all(port, token, jobs, connections):
    body = json.dumps({"command": ["true"], "gpus": 1, "team": "ml"})
    run = subprocess.run(
        [SUBMIT_LOAD, "--port", str(port), "--token", token, "--connections", str(connections),
         "--requests", str(jobs), "--max-seconds", "600", "--body", body],
        capture_output=True, text=True, check=False)
    line = next((l for l in run.stdout.splitlines() if l.startswith("submit_load ")), "")
    fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
    if os.environ.get("ALLOT_BENCH_VERBOSE"):
        print(run.stdout, file=sys.stderr)
    if run.returncode != 0 or fields.get("created") != str(jobs):
        raise SystemExit(f"submissions failed: {line or run.stderr.strip()}\n{run.stdout}")


def unfinished(port, token):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/api/v1/jobs?state=queued,scheduled,running&limit=1",
                 headers={"Authorization": f"Bearer {token}"})
    return json.loads(conn.getresponse().read())


def any_in(port, token, states):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", f"/api/v1/jobs?state={states}&limit=1",
                 headers={"Authorization": f"Bearer {token}"})
    return bool(json.loads(conn.getresponse().read()))


def burst_config(jobs):
    """allotd.toml for a burst of `jobs` queued at once by one user of one team: above the
    default 1,000 active jobs a user and 5,000 a team may have."""
    return (f"[limits]\nmax_active_jobs_per_user = {max(1000, jobs)}\n"
            f"max_active_jobs_per_team = {max(5000, jobs)}\n")


def run_to_end(c, jobs, connections, timeout=600):
    """Submits `jobs` jobs on cluster `c` over `connections` connections and waits until none is
    left; (seconds the submissions took, seconds to the last job's end). Refuses unless every
    job of the cluster succeeded (one with no earlier failures: bench/peers/ runs it after other
    streams)."""
    t0 = time.perf_counter()
    submit_all(c.port, c.token, jobs, connections)
    submitted = time.perf_counter() - t0
    deadline = time.monotonic() + timeout
    while unfinished(c.port, c.token):
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs still unfinished after {timeout} s")
        time.sleep(0.01)
    total = time.perf_counter() - t0
    if any_in(c.port, c.token, "failed,lost,cancelled"):
        raise SystemExit("some jobs did not succeed")
    return submitted, total


def busy_cpu_seconds():
    """CPU time the whole machine has spent busy since boot (/proc/stat: user, nice, system,
    irq, softirq, steal), in seconds."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    ticks = sum(int(fields[i]) for i in (0, 1, 2, 5, 6, 7))
    return ticks / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument("--gpus", default="sim:8xH100")
    ap.add_argument("--agent-flags", default="",
                    help="more flags for every allot-agent, e.g. '--shim-server off'")
    ap.add_argument("--journaled-ext4", action="store_true",
                    help="scratch dirs on a fresh journaled ext4 (loop device; needs root)")
    args = ap.parse_args()
    fs = journaled_ext4() if args.journaled_ext4 else contextlib.nullcontext()
    with fs, scratch_cluster(args.bin, "throughput", gpus=args.gpus, agents=args.hosts,
                             config=burst_config(args.jobs),
                             agent_flags=["--run-as-owner", "off", *args.agent_flags.split()]) as c:
        busy0 = busy_cpu_seconds()
        submitted, total = run_to_end(c, args.jobs, args.connections)
        # What each job cost the machine, everything on it included (allotd, agents, shims, the
        # jobs, the load): the figure that does not depend on how many CPUs there are.
        cpu_ms_per_job = (busy_cpu_seconds() - busy0) * 1000 / args.jobs
        print(f"job_throughput jobs={args.jobs} connections={args.connections} hosts={args.hosts}"
              f" gpus={args.gpus} all_succeeded=yes submit_s={submitted:.2f} total_s={total:.2f}"
              f" jobs_per_s={args.jobs / total:.0f} cpu_ms_per_job={cpu_ms_per_job:.2f}"
              f" cpus={os.cpu_count()}"
              f"{' agent_flags=' + repr(args.agent_flags) if args.agent_flags else ''}"
              f" scratch={'journaled-ext4' if args.journaled_ext4 else tempfile.gettempdir()}")


if __name__ == "__main__":
    main()
