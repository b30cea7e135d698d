#!/usr/bin/env python3
"""Login timing: does a failed login take as long for a name that does not exist?

Starts a real allotd (embedded SQLite, the default Argon2id cost) on 127.0.0.1 with one local
user that has a password, then alternates n failed logins of three kinds: that user with a wrong
password, a name nobody has, and a service account (no password). Prints the median and spread
of each; an attacker who could tell them apart would learn which accounts exist. Each login is
one request on a fresh connection, so the failure limiter is kept out of the way by giving each
attempt its own name (the limiter's account counter) except for the real user, whose limit is
raised in the config.

  python3 bench/login_timing.py [--bin build/bin] [--n 20]
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="allot-login-timing-")
    port = free_port()
    config = os.path.join(work, "allotd.toml")
    with open(config, "w") as f:
        f.write("[login]\nmax_failures_per_account = 1000\nmax_failures_per_address = 100000\n")
    proc = subprocess.Popen(
        [os.path.join(args.bin, "allotd"), "--listen", f"127.0.0.1:{port}", "--data-dir",
         os.path.join(work, "data"), "--config", config],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "allotd.err"), "w"))
    try:
        token_file = os.path.join(work, "data", "admin.token")
        for _ in range(3000):
            if os.path.exists(token_file) and open(token_file).read().strip():
                break
            time.sleep(0.01)
        admin = open(token_file).read().strip()

        def post(path, body, token=None):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            headers = {"Content-Type": "application/json"}
            if token:
                headers["Authorization"] = "Bearer " + token
            t0 = time.perf_counter()
            c.request("POST", path, json.dumps(body), headers)
            r = c.getresponse()
            r.read()
            took = (time.perf_counter() - t0) * 1000
            c.close()
            return r.status, took

        post("/api/v1/teams", {"name": "ml"}, admin)
        post("/api/v1/users", {"name": "alice", "team": "ml", "password": "correct horse battery"},
             admin)
        post("/api/v1/users", {"name": "ci-bot", "team": "ml", "kind": "service"}, admin)
        kinds = {"wrong password": [], "no such user": [], "service account": []}
        for i in range(args.n):
            for kind, user in (("wrong password", "alice"), ("no such user", f"nobody{i}"),
                               ("service account", "ci-bot")):
                status, took = post("/api/v1/login", {"user": user, "password": "not it at all"})
                if status != 401:
                    raise SystemExit(f"{kind}: expected 401, got {status}")
                kinds[kind].append(took)
        for kind, xs in kinds.items():
            print(f"failed login, {kind:16}: n={len(xs)} median {statistics.median(xs):6.1f} ms, "
                  f"min {min(xs):6.1f}, max {max(xs):6.1f}")
        print(f"load {os.getloadavg()[0]:.2f}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
