#!/usr/bin/env python3
"""A 1 GiB image pulled by the agent against `skopeo copy` of the same image alone, and a second
image sharing 90% of its bytes with a cached one (issue 22's pull figures).

Two images built here with umoci from busybox and random (incompressible) data, pushed to a
docker-registry on 127.0.0.1 (scripts/local-registry.sh), nothing fetched from outside:

  bench/big:1   busybox, a 920 MiB layer, a 104 MiB layer of its own
  bench/big:2   busybox, the same 920 MiB layer, another 104 MiB layer

Each round, on an idle system:
  skopeo       `skopeo copy docker://.../big:1 oci:DIR` into an empty directory (what the agent's
               pull runs, with nothing to unpack)
  allot        POST /api/v1/jobs of `true` in big:1 on a host whose cache was just pruned
               (`allot image prune`), to the job's end: the pull, each layer unpacked, the start
  shared       then a job in big:2: only its own layer should come (blob bytes the store gained)

One real allotd (embedded SQLite) and one root agent whose workloads run as their owners. Needs
root, umoci, skopeo and docker-registry (scripts/install-deps.sh); about 3 GiB of disk.

  sudo python3 bench/image_pull.py [--bin build/bin] [--rounds 3]
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
from local_cluster import free_port, scratch_cluster, wait_until  # noqa: E402

MIB = 1 << 20


def build_images(registry, work):
    """Pushes registry/bench/big:1 and big:2; seconds it took."""
    layout, bundle = os.path.join(work, "layout"), os.path.join(work, "bundle")
    t0 = time.perf_counter()
    script = f"""set -e
umoci init --layout {layout}
umoci new --image {layout}:base
umoci unpack --rootless --image {layout}:base {bundle} >/dev/null
mkdir -p {bundle}/rootfs/bin {bundle}/rootfs/data
cp /bin/busybox {bundle}/rootfs/bin/ && ln -s busybox {bundle}/rootfs/bin/sh
ln -s busybox {bundle}/rootfs/bin/true
umoci repack --image {layout}:base {bundle}
rm -rf {bundle}
umoci unpack --rootless --image {layout}:base {bundle} >/dev/null
head -c {920 * MIB} /dev/urandom > {bundle}/rootfs/data/shared
umoci repack --image {layout}:base {bundle}
rm -rf {bundle}
for n in 1 2; do
  umoci unpack --rootless --image {layout}:base {bundle} >/dev/null
  head -c {104 * MIB} /dev/urandom > {bundle}/rootfs/data/own-$n
  umoci repack --image {layout}:big$n {bundle}
  rm -rf {bundle}
  skopeo --insecure-policy copy --quiet --dest-tls-verify=false oci:{layout}:big$n \\
    docker://{registry}/bench/big:$n
done
"""
    subprocess.run(["sh", "-c", script], check=True)
    shutil.rmtree(layout)
    return time.perf_counter() - t0


def request_to_end(c, body):
    """Seconds from just before POST /api/v1/jobs to the job's success."""
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=30)
    auth = {"Authorization": f"Bearer {c.token}", "Content-Type": "application/json"}
    t0 = time.perf_counter()
    conn.request("POST", "/api/v1/jobs", json.dumps(body), auth)
    r = conn.getresponse()
    job = json.loads(r.read())
    if r.status != 201:
        raise SystemExit(f"POST /jobs: {r.status} {job}")

    def ended():
        conn.request("GET", f"/api/v1/jobs/{job['id']}", headers=auth)
        j = json.loads(conn.getresponse().read())
        if j["state"] in ("failed", "cancelled", "lost"):
            raise SystemExit(f"job {job['id']} {j['state']}: {j.get('reason')}")
        return j["state"] == "succeeded"
    wait_until(ended, timeout=600, step=0.01)
    conn.close()
    return time.perf_counter() - t0


def skopeo_copy(image, work):
    """Seconds of `skopeo copy` of `image` into an empty OCI layout."""
    dest = tempfile.mkdtemp(prefix="skopeo-", dir=work)
    t0 = time.perf_counter()
    subprocess.run(["skopeo", "--insecure-policy", "copy", "--quiet", "--src-tls-verify=false",
                    f"docker://{image}", f"oci:{dest}:x"], check=True)
    took = time.perf_counter() - t0
    shutil.rmtree(dest)
    return took


def blob_bytes(store):
    blobs = os.path.join(store, "oci", "blobs", "sha256")
    if not os.path.isdir(blobs):
        return 0
    return sum(os.path.getsize(os.path.join(blobs, b)) for b in os.listdir(blobs))


def prune(c, store):
    """Empties the host's cache through `allot image prune`, and waits until it is."""
    c.cli(c.admin, "image", "prune", "--host", "bench")
    wait_until(lambda: not c.cli(c.admin, "image", "list", "--host", "bench")["images"] and
               blob_bytes(store) == 0, timeout=120, step=0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("jobs in images need a root agent: run as root")
    state = tempfile.mkdtemp(prefix="allot-pull-bench-", dir="/var/tmp")
    registry = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, ALLOT_STATE_DIR=state, ALLOT_REGISTRY_LISTEN=registry)
    script = os.path.join(ROOT, "scripts", "local-registry.sh")
    subprocess.run([script, "start"], env=env, check=True, capture_output=True)
    try:
        built = build_images(registry, state)
        big1, big2 = f"{registry}/bench/big:1", f"{registry}/bench/big:2"
        print(f"images built and pushed in {built:.1f} s")
        flags = ["--run-as-owner", "required", "--insecure-registry", registry]
        with scratch_cluster(a.bin, "pull-bench", mode=0o711, gpus="sim:8xH100",
                             agent_flags=flags) as c:
            c.cli(c.admin, "team", "image-allow", "set", "ml", registry + "/bench/")
            store = os.path.join(c.agent_dir, "images")
            job = {"command": ["true"], "gpus": 1}
            rows = []
            for r in range(a.rounds):
                prune(c, store)
                skopeo = skopeo_copy(big1, state)
                allot = request_to_end(c, dict(job, image=big1))
                whole = blob_bytes(store)
                shared = request_to_end(c, dict(job, image=big2))
                fetched = blob_bytes(store) - whole
                rows.append((skopeo, allot, whole, shared, fetched))
                print(f"round {r + 1}: skopeo copy {skopeo:.2f} s; allot pull+unpack+run "
                      f"{allot:.2f} s ({allot / skopeo:.2f}x), {whole / MIB:.0f} MiB of blobs; "
                      f"second image {shared:.2f} s, fetched {fetched / MIB:.1f} MiB")
            mid = sorted(rows, key=lambda x: x[1] / x[0])[len(rows) // 2]
            print(f"median round: allot / skopeo = {mid[1] / mid[0]:.2f}x "
                  f"({mid[1]:.2f} s against {mid[0]:.2f} s); the image sharing 90% fetched "
                  f"{mid[4] / MIB:.1f} MiB of its {mid[2] / MIB:.0f} MiB in {mid[3]:.2f} s")
    finally:
        subprocess.run([script, "stop"], env=env)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
