#!/usr/bin/env python3
"""Request to process started, for a job in an image against a process job: the time from just
before POST /api/v1/jobs is written to the moment the job's own process runs (start_stamp writes
CLOCK_REALTIME into the team's directory), jobs one at a time on an idle system, the image
already on the host, the two kinds alternated in rounds so that the machine's drift falls on both
alike; then `allot run --wait -- true` for each kind through the CLI, and the first job of an
image the host does not hold yet (its pull from a registry on loopback included).

Side by side, when podman is installed (bench/peers/install.sh): `podman run --rm` of the same
image (with crun, as Debian sets it up), from its spawn to the container's process running (the
wrapper that hides the hybrid host's cgroup2 mount from crun, about 4 ms, included).

One real allotd (embedded SQLite), one root agent with simulated GPUs whose workloads run as
their owners (as jobs in images need), and a docker-registry on 127.0.0.1 holding a busybox image
with start_stamp built here; nothing leaves the machine. Needs root. See bench/start_latency.cc
for the same figure of process jobs alone.

  sudo python3 bench/image_job_start.py [--bin build/bin] [--n 40]
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
sys.path.insert(0, os.path.join(ROOT, "bench"))
from cli_latency import row, timed  # noqa: E402
from local_cluster import free_port, pct, scratch_cluster, wait_until  # noqa: E402


def push_stamp_image(bin_dir, registry, work):
    """registry/bench/stamp:1: busybox and start_stamp, built with umoci, pushed with skopeo."""
    layout, bundle = os.path.join(work, "layout"), os.path.join(work, "bundle")
    image = f"{registry}/bench/stamp:1"
    script = f"""set -e
umoci init --layout {layout}
umoci new --image {layout}:stamp
umoci unpack --rootless --image {layout}:stamp {bundle} >/dev/null
mkdir -p {bundle}/rootfs/bin
cp /bin/busybox {os.path.join(bin_dir, 'start_stamp')} {bundle}/rootfs/bin/
ln -s busybox {bundle}/rootfs/bin/sh
umoci repack --image {layout}:stamp {bundle}
skopeo --insecure-policy copy --quiet --dest-tls-verify=false oci:{layout}:stamp docker://{image}
"""
    subprocess.run(["sh", "-c", script], check=True)
    return image


def podman_start(image, stamp_dir, n):
    """ms from spawning `podman run --rm` to the container's process running, n times; [] when
    podman is not installed."""
    if not shutil.which("podman"):
        return []
    # Its own storage and registry settings, in a scratch dir: nothing of the host's podman.
    root = tempfile.mkdtemp(prefix="allot-podman-")
    base = ["podman", "--root", os.path.join(root, "storage"), "--runroot",
            os.path.join(root, "run"), "--cgroup-manager", "cgroupfs", "--events-backend",
            "none"]
    subprocess.run(base + ["pull", "--quiet", "--tls-verify=false", image], check=True,
                   stdout=subprocess.DEVNULL)
    # podman's default limits (1048576 open files) are above what this sandbox allows; and
    # crun 1.8 refuses this hybrid host's cgroup2 mount (docs/environments.md), which the
    # executor hides in the job's mount namespace and this run hides the same way.
    limits = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
    wrapper = ["unshare", "-m", "sh", "-c",
               'umount /sys/fs/cgroup/unified 2>/dev/null; exec "$@"', "podman-wrapper"]
    out = []
    try:
        for i in range(n):
            stamp = os.path.join(stamp_dir, f"podman-{i}")
            t0 = time.time_ns()
            subprocess.run(wrapper + base + ["run", "--rm", "--network", "none", *limits, "-v",
                                   f"{stamp_dir}:{stamp_dir}", image, "start_stamp", stamp],
                           check=True, stdout=subprocess.DEVNULL)
            out.append((int(open(stamp).read().strip()) - t0) / 1e6)
            os.unlink(stamp)
    finally:
        subprocess.run(base + ["system", "reset", "--force"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)
    return out


def request_to_start(c, body, stamp_dir):
    """ms from just before the POST to the job's process running; waits for the job's end."""
    host, port = "127.0.0.1", c.port
    conn = http.client.HTTPConnection(host, port, timeout=30)
    t0 = time.time_ns()
    conn.request("POST", "/api/v1/jobs", json.dumps(body),
                 {"Authorization": f"Bearer {c.token}", "Content-Type": "application/json"})
    r = conn.getresponse()
    job = json.loads(r.read())
    if r.status != 201:
        raise SystemExit(f"POST /jobs: {r.status} {job}")
    stamp = os.path.join(stamp_dir, f"stamp-{job['id']}")

    def ended():
        conn.request("GET", f"/api/v1/jobs/{job['id']}", headers={"Authorization":
                                                                  f"Bearer {c.token}"})
        j = json.loads(conn.getresponse().read())
        if j["state"] in ("failed", "cancelled", "lost"):
            raise SystemExit(f"job {job['id']} {j['state']}: {j.get('reason')}")
        return j["state"] == "succeeded"
    wait_until(ended, step=0.002)
    conn.close()
    started = int(open(stamp).read().strip())
    os.unlink(stamp)
    return (started - t0) / 1e6


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
    subprocess.run([script, "start"], env=env, check=True, capture_output=True)
    try:
        image = push_stamp_image(a.bin, registry, state)
        teams = os.path.join(state, "teams")
        os.makedirs(teams)
        os.chmod(state, 0o711)
        flags = ["--run-as-owner", "required", "--insecure-registry", registry, "--team-dir",
                 teams]
        with scratch_cluster(a.bin, "image-bench", mode=0o711, gpus="sim:8xH100",
                             agent_flags=flags) as c:
            c.cli(c.admin, "team", "image-allow", "set", "ml", registry + "/bench/")
            stamp_dir = os.path.join(teams, "ml")
            command = ["sh", "-c", 'exec start_stamp "$ALLOT_TEAM_DIR/stamp-$ALLOT_JOB_ID"']
            process_cmd = ["sh", "-c", f'exec {os.path.join(a.bin, "start_stamp")} '
                                       '"$ALLOT_TEAM_DIR/stamp-$ALLOT_JOB_ID"']
            t0 = time.perf_counter()
            request_to_start(c, {"command": command, "gpus": 1, "image": image}, stamp_dir)
            first = (time.perf_counter() - t0) * 1000
            processes, containers = [], []
            for _ in range(a.n):
                processes.append(request_to_start(c, {"command": process_cmd, "gpus": 1},
                                                  stamp_dir))
                containers.append(request_to_start(c, {"command": command, "gpus": 1,
                                                       "image": image}, stamp_dir))
            cli = [os.path.join(c.bin, "allot"), "--server", c.server, "--token", c.token, "run",
                   "--gpus", "1", "--wait"]
            wait_processes, wait_containers = [], []
            for _ in range(a.n // 2):
                wait_processes += timed(cli + ["--", "sh", "-c", ":"], 1)
                wait_containers += timed(cli + ["--image", image, "--", "sh", "-c", ":"], 1)
            print(f"image {image}; agent with simulated 8xH100 GPUs, workloads as their owners")
            print("request to process started (POST to the job's process running):")
            row("process job", processes)
            row("job in an image (cached)", containers)
            print("allot run --gpus 1 --wait -- sh -c :, whole (CLI start to exit):")
            row("process job", wait_processes)
            row("job in an image (cached)", wait_containers)
            print(f"  {'first job, its image pulled (POST to end)':<34} ms={first:7.2f}")
            podman = podman_start(image, stamp_dir, max(10, a.n // 4))
            if podman:
                print("podman run --rm, spawn to the container's process running:")
                row("podman (same image, crun)", podman)
                print(f"  podman / job in an image at p50: "
                      f"{pct(podman, 50) / pct(containers, 50):.1f}x")
            else:
                print("podman: not installed (bench/peers/install.sh installs it)")
    finally:
        subprocess.run([script, "stop"], env=env)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
