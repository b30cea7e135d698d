#!/usr/bin/env python3
"""What a user waits for at the prompt, on a cluster in use: `allot run --wait -- true` on a fresh
allotd, right after a burst of one-GPU jobs through the host, quiet 10 s later, and after N
finished jobs; and a CLI process's own cost (`--version`, `whoami`, `run -- true` without
--wait, 300 submissions in a row).

One real allotd (embedded SQLite) and one agent with simulated GPUs (sim:8xH100), on 127.0.0.1
only; each command is a fresh `allot` process, timed from spawn to exit, as a shell runs it.

  python3 bench/cli_latency.py [--bin build/bin] [--n 50] [--burst 50] [--history 2000]
"""

import argparse
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "session_start"))
from local_cluster import pct, scratch_cluster, wait_until  # noqa: E402


def timed(argv, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append((time.perf_counter() - t0) * 1000)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {r.returncode}")
    return out


def row(name, ms):
    print(f"  {name:<34} n={len(ms):<5} p50_ms={pct(ms, 50):7.2f} p99_ms={pct(ms, 99):7.2f} "
          f"max_ms={max(ms):7.2f}")


def all_ended(c):
    jobs = c.cli(c.token, "job", "list", "--state", "queued,scheduled,running", "--limit", "1")
    return not jobs


def submit_many(c, count, connections=16):
    """`count` one-GPU `true` jobs through the API's client, over `connections` threads."""
    base = [os.path.join(c.bin, "allot"), "--server", c.server, "--token", c.token]
    left = [count]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            # A user may have 1,000 jobs active ([limits] max_active_jobs_per_user): past that
            # the submission is refused, and tried again once some have ended.
            for _ in range(1000):
                r = subprocess.run(base + ["run", "--gpus", "1", "--", "true"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if r.returncode == 0:
                    break
                if "active" not in r.stderr:
                    raise SystemExit(f"allot run: {r.stderr.strip()}")
                time.sleep(0.05)

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--history", type=int, default=2000)
    args = ap.parse_args()
    with scratch_cluster(args.bin, "cli-latency", gpus="sim:8xH100") as c:
        cli = [os.path.join(c.bin, "allot"), "--server", c.server, "--token", c.token]
        wait_ = cli + ["run", "--gpus", "1", "--wait", "--", "true"]
        print(f"cli_latency n={args.n} burst={args.burst} history={args.history} host=sim:8xH100"
              f" cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f}")
        row("allot --version", timed(cli + ["--version"], args.n))
        row("allot whoami", timed(cli + ["whoami"], args.n))
        row("allot run -- true (no wait)", timed(cli + ["run", "--", "true"], args.n))
        wait_until(lambda: all_ended(c), timeout=120, step=0.1)
        t0 = time.perf_counter()
        timed(cli + ["run", "--", "true"], 300)
        print(f"  300 sequential submissions         total_s={time.perf_counter() - t0:.2f}")
        wait_until(lambda: all_ended(c), timeout=120, step=0.1)
        row("run --wait, fresh", timed(wait_, args.n))
        submit_many(c, args.burst)
        wait_until(lambda: all_ended(c), timeout=120, step=0.05)
        row(f"run --wait, after a burst of {args.burst}", timed(wait_, args.n))
        time.sleep(10)
        row("run --wait, quiet 10 s later", timed(wait_, args.n))
        submit_many(c, args.history)
        wait_until(lambda: all_ended(c), timeout=600, step=0.1)
        row(f"run --wait, after {args.history} more jobs", timed(wait_, args.n))


if __name__ == "__main__":
    main()
