#!/usr/bin/env python3
"""Sessions end to end: create -> Jupyter answering through allotd, and what the proxy adds.

Starts a real allotd (embedded SQLite in a scratch dir) and one real allot-agent (simulated GPUs,
the Jupyter fork server next to it) on 127.0.0.1, a team and a member, then:

1. create-to-answering, n runs: POST /api/v1/sessions (default `jupyter` profile) with the
   member's token, then GET /sessions/{id}/api/status through allotd every 2 ms until it answers
   200; the time from before the POST to that 200. Each session is stopped before the next.
   One warm-up run first (the fork server imports Jupyter once, ~1 s after the agent starts).
   Then (--first N, default 5) the first session on a host: N times a fresh allotd and agent,
   whose first session is timed the same way (the agent up and its fork server ready, as
   `make run` leaves them), so that nothing a first session pays is hidden by the warm-up.
2. proxy overhead: one running session; one keep-alive client does `--warmup` then `--requests`
   GET /sessions/{id}/api/status through allotd, and the same directly on the session's Unix
   socket with its token (read as root from the agent's work dir). p50/p99 of each and their
   difference.

The clients are Python on the same cores as allotd, the agent and Jupyter: their own cost is in
every number. Needs root (the agent's work dir) and Debian's jupyter-server.

  sudo python3 bench/session_start/session_bench.py [--bin build/bin] [--n 20] [--requests 1000]
"""

import argparse
import http.client
import json
import os
import statistics
import time

from local_cluster import UnixHTTPConnection, pct, scratch_cluster, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def first_session(bin_dir, i):
    """Milliseconds from POST /api/v1/sessions to Jupyter answering for the first session of a
    fresh cluster."""
    with scratch_cluster(bin_dir, f"session-first-{i}") as cluster:
        api = http.client.HTTPConnection("127.0.0.1", cluster.port, timeout=10)
        poll = http.client.HTTPConnection("127.0.0.1", cluster.port, timeout=10)
        headers = {"Authorization": "Bearer " + cluster.token}
        t0 = time.monotonic()
        api.request("POST", "/api/v1/sessions", json.dumps({"name": "first"}),
                    {**headers, "Content-Type": "application/json"})
        r = api.getresponse()
        body = r.read()
        if r.status != 201:
            raise SystemExit(f"create: {r.status} {body[:200]}")
        sid = json.loads(body)["id"]

        def answers():
            poll.request("GET", f"/sessions/{sid}/api/status", headers=headers)
            resp = poll.getresponse()
            resp.read()
            return resp.status == 200
        wait_until(answers)
        took = (time.monotonic() - t0) * 1000
        # Stopped before the cluster is: jobs outlive their agent.
        api.request("POST", f"/api/v1/sessions/{sid}/stop", "{}",
                    {**headers, "Content-Type": "application/json"})
        api.getresponse().read()

        def stopped():
            api.request("GET", f"/api/v1/sessions/{sid}", headers=headers)
            return json.loads(api.getresponse().read())["state"] in ("stopped", "failed", "lost")
        wait_until(stopped, step=0.02)
        return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--first", type=int, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the direct side reads the session's token and socket")

    firsts = [first_session(args.bin, i) for i in range(args.first)]
    if firsts:
        print(f"first session on a fresh host, n={len(firsts)}: p50 "
              f"{statistics.median(firsts):.1f} ms, min {min(firsts):.1f}, max {max(firsts):.1f}")

    with scratch_cluster(args.bin, "session-bench") as cluster:
        port, token, agent_dir = cluster.port, cluster.token, cluster.agent_dir

        api = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

        def call(method, path, body=None, conn=api):
            headers = {"Authorization": "Bearer " + token}
            if body is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers=headers)
            r = conn.getresponse()
            return r.status, r.read()

        def create_to_answer(name):
            poll = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            t0 = time.monotonic()
            code, body = call("POST", "/api/v1/sessions", {"name": name})
            if code != 201:
                raise SystemExit(f"create: {code} {body[:200]}")
            sid = json.loads(body)["id"]
            wait_until(lambda: call("GET", f"/sessions/{sid}/api/status", conn=poll)[0] == 200)
            took = (time.monotonic() - t0) * 1000
            poll.close()
            return sid, took

        def stop(sid):
            call("POST", f"/api/v1/sessions/{sid}/stop", {})
            wait_until(lambda: json.loads(call("GET", f"/api/v1/sessions/{sid}")[1])["state"]
                       in ("stopped", "failed", "lost"), step=0.02)

        sid, _ = create_to_answer("warmup")
        stop(sid)
        times = []
        for i in range(args.n):
            sid, took = create_to_answer(f"s{i}")
            times.append(took)
            stop(sid)
        load = os.getloadavg()
        print(f"create -> Jupyter answering through allotd (fork server), n={args.n}: "
              f"p50 {statistics.median(times):.1f} ms, p90 {pct(times, 90):.1f} ms, "
              f"min {min(times):.1f}, max {max(times):.1f}; load {load[0]:.2f}")

        # Proxy overhead on one running session.
        sid, _ = create_to_answer("proxy")
        sock = os.path.join(agent_dir, "jobs", str(sid), "work", "jupyter.sock")
        jtoken = open(os.path.join(agent_dir, "sessions", f"{sid}.token")).read().strip()
        path = f"/sessions/{sid}/api/status"

        def timed(conn, headers):
            out = []
            for i in range(args.warmup + args.requests):
                t0 = time.perf_counter()
                conn.request("GET", path, headers=headers)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise SystemExit(f"GET {path}: {r.status}")
                if i >= args.warmup:
                    out.append((time.perf_counter() - t0) * 1e6)
            return out

        via = timed(http.client.HTTPConnection("127.0.0.1", port, timeout=10),
                    {"Authorization": "Bearer " + token})
        direct = timed(UnixHTTPConnection(sock), {"Authorization": "token " + jtoken})
        load = os.getloadavg()
        print(f"GET api/status, keep-alive, {args.requests} requests each:")
        print(f"  direct (Unix socket): p50 {statistics.median(direct):7.0f} us   "
              f"p99 {pct(direct, 99):7.0f} us")
        print(f"  through allotd:       p50 {statistics.median(via):7.0f} us   "
              f"p99 {pct(via, 99):7.0f} us")
        print(f"  added by the proxy:   p50 {statistics.median(via) - statistics.median(direct):7.0f}"
              f" us; load {load[0]:.2f}")
        stop(sid)


if __name__ == "__main__":
    main()
