#!/usr/bin/env python3
"""Jobs in images against process jobs, end to end through the CLI: `allot run --wait -- true`
and `allot run --image REF --wait -- true` with the image already on the host, alternated in
rounds so that the machine's drift falls on both alike; then the first job of an image a fresh
host does not hold (its pull from a registry on loopback included).

One real allotd (embedded SQLite), one root agent with simulated GPUs whose workloads run as
their owners (as jobs in images need), and a docker-registry on 127.0.0.1 holding a busybox
image built here (scripts/local-registry.sh); nothing leaves the machine. Needs root.

  sudo python3 bench/image_job_start.py [--bin build/bin] [--n 40]
"""

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "session_start"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from cli_latency import row  # noqa: E402
from cli_latency import timed as timed_n  # noqa: E402
from local_cluster import free_port, pct, scratch_cluster  # noqa: E402


def timed(argv):
    return timed_n(argv, 1)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--n", type=int, default=40)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("jobs in images need a root agent: run as root")
    state = tempfile.mkdtemp(prefix="allot-image-bench-")
    registry = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, ALLOT_STATE_DIR=state, ALLOT_REGISTRY_LISTEN=registry)
    script = os.path.join(ROOT, "scripts", "local-registry.sh")
    image = subprocess.run([script, "start"], env=env, check=True, capture_output=True,
                           text=True).stdout.strip().splitlines()[-1]
    try:
        flags = ["--run-as-owner", "required", "--insecure-registry", registry]
        with scratch_cluster(a.bin, "image-bench", mode=0o711, gpus="sim:8xH100",
                             agent_flags=flags) as c:
            c.cli(c.admin, "team", "image-allow", "set", "ml", registry + "/demo/")
            base = [os.path.join(c.bin, "allot"), "--server", c.server, "--token", c.token,
                    "run", "--gpus", "1"]
            first = timed(base + ["--image", image, "--wait", "--", "true"])
            processes, containers = [], []
            for _ in range(a.n):
                processes.append(timed(base + ["--wait", "--", "true"]))
                containers.append(timed(base + ["--image", image, "--wait", "--", "true"]))
            print(f"image {image}; agent with simulated 8xH100 GPUs, workloads as their owners")
            row("process: run --wait -- true", processes)
            row("image (cached): run --image --wait", containers)
            print(f"  {'first job, image pulled on the host':<34} ms={first:7.2f}")
            print(f"  container - process at p50: {pct(containers, 50) - pct(processes, 50):.2f} ms")
    finally:
        subprocess.run([script, "stop"], env=env)
        subprocess.run(["rm", "-rf", state])


if __name__ == "__main__":
    main()
