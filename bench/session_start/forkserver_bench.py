#!/usr/bin/env python3
"""Session start: client start -> first 200 on <base>api/status, fork server vs plain exec.

Each run starts the session command the agent's job shim would exec, as an unprivileged uid, and
polls GET <base>api/status with the token over Jupyter's Unix socket every 2 ms until it answers
200, then stops the session (SIGTERM) and waits for it. Modes:
  forkserver  allot-jupyter-forkserver run --socket <server>   (pre-imported, forked)
  fallback    allot-jupyter-forkserver run --socket <absent>   (client, then exec jupyter-server)
  plain       jupyter-server                                   (what a session costs without it)
One warm-up run per mode, then n measured runs, modes interleaved so that load drifts hit all.
The poller is Python on the same cores, so the numbers include some of its own cost.

  sudo python3 bench/session_start/forkserver_bench.py [--n 20] [--app server|notebook]
       [--forkserver build/bin/allot-jupyter-forkserver] [--uid 4242]
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from local_cluster import UnixHTTPConnection, pct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def status(sock_path, url, token):
    c = UnixHTTPConnection(sock_path, timeout=5)
    try:
        c.request("GET", url, headers={"Authorization": "token " + token})
        r = c.getresponse()
        r.read()
        return r.status
    except OSError:
        return None
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--app", choices=["server", "notebook"], default="server")
    ap.add_argument("--forkserver", default=os.path.join(ROOT, "build/bin/allot-jupyter-forkserver"))
    ap.add_argument("--uid", type=int, default=4242)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the fork server is root and sessions run as --uid")
    cls = "ServerApp" if args.app == "server" else "NotebookApp"
    plain = "jupyter-server" if args.app == "server" else "jupyter-notebook"

    tmp = tempfile.mkdtemp(prefix="allot-forkserver-bench-")
    os.chmod(tmp, 0o755)
    home = os.path.join(tmp, "home")
    os.mkdir(home, 0o700)
    os.chown(home, args.uid, args.uid)
    fork_sock = os.path.join(tmp, "fork.sock")
    log = open(os.path.join(tmp, "server.log"), "w")
    t0 = time.monotonic()
    server = subprocess.Popen([args.forkserver, "serve", "--socket", fork_sock],
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                              env={"HOME": "/nonexistent", "PATH": "/usr/bin:/bin",
                                   "LANG": "C.UTF-8"})
    while "listening on" not in open(log.name).read():
        if server.poll() is not None:
            raise SystemExit(open(log.name).read())
        time.sleep(0.01)
    server_start = time.monotonic() - t0

    def drop():
        os.setgroups([])
        os.setgid(args.uid)
        os.setuid(args.uid)

    def one(mode, i):
        token = os.urandom(16).hex()
        jsock = os.path.join(home, f"{mode}-{i}.sock")
        base = f"/sessions/{mode}{i}/"
        jargs = [f"--{cls}.sock={jsock}", f"--{cls}.sock_mode=0600", f"--{cls}.base_url={base}",
                 "--no-browser"]
        if mode == "plain":
            cmd = [plain, *jargs]
        else:
            sock = fork_sock if mode == "forkserver" else os.path.join(tmp, "absent.sock")
            cmd = [args.forkserver, "run", "--socket", sock, "--app", args.app, "--", *jargs]
        env = {"HOME": home, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "USER": "bench",
               "JUPYTER_TOKEN": token}
        t = time.monotonic()
        p = subprocess.Popen(cmd, env=env, cwd=home, preexec_fn=drop, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while status(jsock, base + "api/status", token) != 200:
            if p.poll() is not None:
                raise SystemExit(f"{mode} run {i} exited {p.returncode}")
            time.sleep(0.002)
        dt = time.monotonic() - t
        p.send_signal(signal.SIGTERM)
        p.wait()
        return dt

    modes = ["forkserver", "fallback", "plain"]
    res = {m: [] for m in modes}
    load_before = open("/proc/loadavg").read().split()[:3]
    for m in modes:
        one(m, "warm")
    for i in range(args.n):
        for m in modes:
            res[m].append(one(m, i))
    load_after = open("/proc/loadavg").read().split()[:3]
    server.terminate()
    server.wait()
    log.close()
    shutil.rmtree(tmp, ignore_errors=True)

    print(f"app {args.app} ({cls}), n={args.n} per mode after 1 warm-up, {os.cpu_count()} CPUs, "
          f"uid {args.uid}; fork server start {server_start * 1000:.0f} ms")
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}")
    print(f"{'mode':<12}{'p50 ms':>9}{'p90 ms':>9}{'min ms':>9}{'max ms':>9}")
    for m in modes:
        xs = [x * 1000 for x in res[m]]
        print(f"{m:<12}{statistics.median(xs):>9.1f}{pct(xs, 90):>9.1f}{min(xs):>9.1f}"
              f"{max(xs):>9.1f}")


if __name__ == "__main__":
    main()
