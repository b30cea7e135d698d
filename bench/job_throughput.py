#!/usr/bin/env python3
"""End-to-end throughput of trivial jobs: N one-GPU `true` jobs submitted through the API over C
keep-alive connections to allotd, run on simulated hosts, until every one has succeeded.

Reports jobs/s from the first submission to the last job's end, and how long the submissions
alone took. One real allotd (embedded SQLite) and H agents of `--gpus` each, on 127.0.0.1 only.

  python3 bench/job_throughput.py [--jobs 2000] [--connections 16] [--hosts 1] [--gpus sim:8xH100]
      [--journaled-ext4]

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
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "session_start"))
from local_cluster import journaled_ext4, scratch_cluster  # noqa: E402


def submit_all(port, token, jobs, connections):
    left = [jobs]
    lock = threading.Lock()
    body = json.dumps({"command": ["true"], "gpus": 1, "team": "ml"})
    errors = []

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            while True:
                conn.request("POST", "/api/v1/jobs", body, headers)
                r = conn.getresponse()
                text = r.read()
                if r.status == 201:
                    break
                # A user's active-jobs limit ([limits] max_active_jobs_per_user): wait for room.
                if r.status == 429 or b"active" in text:
                    time.sleep(0.02)
                    continue
                errors.append(f"{r.status} {text[:200]!r}")
                return

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"submissions failed: {errors[0]}")


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
    """allotd.toml for a burst of `jobs` queued at once by one user: above the default 1,000
    active jobs."""
    return f"[limits]\nmax_active_jobs_per_user = {max(1000, jobs)}\n"


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument("--gpus", default="sim:8xH100")
    ap.add_argument("--journaled-ext4", action="store_true",
                    help="scratch dirs on a fresh journaled ext4 (loop device; needs root)")
    args = ap.parse_args()
    fs = journaled_ext4() if args.journaled_ext4 else contextlib.nullcontext()
    with fs, scratch_cluster(args.bin, "throughput", gpus=args.gpus, agents=args.hosts,
                             config=burst_config(args.jobs)) as c:
        submitted, total = run_to_end(c, args.jobs, args.connections)
        print(f"job_throughput jobs={args.jobs} connections={args.connections} hosts={args.hosts}"
              f" gpus={args.gpus} all_succeeded=yes submit_s={submitted:.2f} total_s={total:.2f}"
              f" jobs_per_s={args.jobs / total:.0f} cpus={os.cpu_count()}"
              f" scratch={'journaled-ext4' if args.journaled_ext4 else tempfile.gettempdir()}")


if __name__ == "__main__":
    main()
