#!/usr/bin/env python3
"""How long allotd takes to list 1,000 jobs: `GET /api/v1/jobs?limit=1000`, the listing behind
`allot job list` and the console's job table.

For each build given (a bin dir holding allotd), starts allotd on 127.0.0.1 with a fresh data
dir, submits N jobs of one team (a four-word command and two variables each, queued: there are no
hosts), then lists them all `--listings` times on one keep-alive connection, and prints the
median. Alternates the builds `--rounds` times, so that two can be compared on a machine whose
speed drifts. Loopback only; every loop is bounded; the data dirs are removed.

  python3 bench/job_listing.py [--jobs 1000] [--listings 30] [--rounds 2] BIN_DIR [BIN_DIR...]
"""

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "session_start"))
from local_cluster import accepts, free_port, wait_until  # noqa: E402


def measure(bin_dir, jobs, listings):
    work = tempfile.mkdtemp(prefix="allot-listing-")
    port = free_port()
    allotd = subprocess.Popen(
        [os.path.join(bin_dir, "allotd"), "--listen", f"127.0.0.1:{port}", "--data-dir",
         os.path.join(work, "data")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        token_file = os.path.join(work, "data", "admin.token")
        # allotd writes the token before it listens: wait for both.
        wait_until(lambda: os.path.exists(token_file) and open(token_file).read().strip()
                   and accepts(port))
        token = open(token_file).read().strip()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def request(method, path, body=None):
            conn.request(method, path, json.dumps(body) if body is not None else None, headers)
            r = conn.getresponse()
            return r.status, r.read()

        request("POST", "/api/v1/teams", {"name": "ml"})
        for i in range(jobs):
            status, text = request("POST", "/api/v1/jobs", {
                "command": ["python", "train.py", "--epochs", str(i)], "gpus": 1, "team": "ml",
                "env": {"A": "1", "B": "two"}})
            if status != 201:
                raise SystemExit(f"submission failed: {status} {text[:200]!r}")
        times = []
        for _ in range(listings):
            start = time.perf_counter()
            status, text = request("GET", f"/api/v1/jobs?limit={jobs}")
            times.append(time.perf_counter() - start)
            if status != 200:
                raise SystemExit(f"listing failed: {status}")
        times.sort()
        return times[len(times) // 2] * 1e3, len(text)
    finally:
        allotd.terminate()
        allotd.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--listings", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("bins", nargs="+")
    args = ap.parse_args()
    for _ in range(args.rounds):
        for b in args.bins:
            ms, size = measure(b, args.jobs, args.listings)
            print(f"job_listing bin={b} jobs={args.jobs} median_ms={ms:.2f} bytes={size}")


if __name__ == "__main__":
    main()
