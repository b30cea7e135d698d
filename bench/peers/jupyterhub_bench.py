#!/usr/bin/env python3
"""JupyterHub side by side: how long Debian's JupyterHub 3.0 takes to start a single-user server.

The comparison for Allot's session start (docs/benchmarks.md, "Session start"): the hub as root
on 127.0.0.1, DummyAuthenticator, LocalProcessSpawner running jupyterhub-singleuser as a local
Unix user, the proxy (configurable-http-proxy) started by the hub, and a service token. Per run:
POST /hub/api/users/U/server (start), poll GET /hub/api/users/U until servers[""].ready, then
GET /user/U/api/status through the proxy until 200; then DELETE the server and wait until it is
gone. One warm-up run, then n measured. Prints the medians and the load average.

Needs root, Debian's jupyterhub and node-configurable-http-proxy (bench/peers/install.sh
installs them; scripts/install-deps.sh does not: only the benchmarks use them), and a local user
(created when missing). bench/peers/peers_bench.py runs it next to Allot's session benchmark;
`hub_start_times()` is what it calls.

  sudo python3 bench/peers/jupyterhub_bench.py [--n 10] [--user allotbench]
"""

import argparse
import json
import os
import pwd
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

TOKEN = "allot-bench-" + os.urandom(12).hex()


def request(method, url, token=TOKEN, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", "token " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
            return r.status, json.loads(text) if text.startswith(b"{") else text
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


def wait_until(pred, timeout=30.0, step=0.005):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hub_start_times(n, user="allotbench"):
    """One warm-up and `n` measured server starts: (version, start->ready ms, start->200 ms)."""
    if os.geteuid() != 0:
        raise SystemExit("run as root: the hub spawns servers as another user")
    if not shutil.which("jupyterhub") or not shutil.which("configurable-http-proxy"):
        raise SystemExit("jupyterhub or configurable-http-proxy missing; "
                         "run bench/peers/install.sh")
    try:
        pwd.getpwnam(user)
    except KeyError:
        subprocess.run(["useradd", "-m", user], check=True)
    version = subprocess.run(["jupyterhub", "--version"], capture_output=True,
                             text=True).stdout.strip()
    hub_port, api_port = free_port(), free_port()

    work = tempfile.mkdtemp(prefix="allot-hub-bench-")
    os.chmod(work, 0o755)
    cfg = os.path.join(work, "jupyterhub_config.py")
    with open(cfg, "w") as f:
        f.write(f"""
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {hub_port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {api_port}
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = ["/usr/bin/jupyterhub-singleuser"]
c.Spawner.default_url = "/tree"
c.JupyterHub.db_url = "sqlite:///{work}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{work}/cookie_secret"
c.ConfigurableHTTPProxy.pid_file = "{work}/proxy.pid"
c.JupyterHub.services = [{{"name": "bench", "api_token": "{TOKEN}"}}]
c.JupyterHub.load_roles = [{{"name": "bench", "services": ["bench"],
    "scopes": ["admin:users", "admin:servers", "access:servers", "read:users"]}}]
c.Authenticator.allowed_users = {{"{user}"}}
""")
    env = dict(os.environ)
    # Debian's configurable-http-proxy needs Debian's node modules; a Node from elsewhere does not
    # search /usr/share/nodejs (docs/design/sessions.md, 2.1).
    env["NODE_PATH"] = "/usr/share/nodejs"
    hub_log = open(os.path.join(work, "hub.log"), "w")
    hub = subprocess.Popen(["jupyterhub", "-f", cfg], cwd=work, env=env, stdout=hub_log,
                           stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{hub_port}"
    api = f"{base}/hub/api"
    try:
        if not wait_until(lambda: request("GET", api + "/")[0] == 200, timeout=60, step=0.1):
            raise SystemExit("the hub did not come up; see " + hub_log.name)
        request("POST", f"{api}/users/{user}")
        ready_ms, answer_ms = [], []
        for i in range(n + 1):
            t0 = time.monotonic()
            code, _ = request("POST", f"{api}/users/{user}/server")
            if code not in (201, 202):
                raise SystemExit(f"start refused: {code}")

            def ready():
                c, u = request("GET", f"{api}/users/{user}")
                return c == 200 and u.get("servers", {}).get("", {}).get("ready")

            if not wait_until(ready):
                raise SystemExit("the server did not become ready")
            t1 = time.monotonic()
            status = f"{base}/user/{user}/api/status"
            if not wait_until(lambda: request("GET", status)[0] == 200):
                raise SystemExit("the server did not answer through the proxy")
            t2 = time.monotonic()
            if i > 0:
                ready_ms.append((t1 - t0) * 1000)
                answer_ms.append((t2 - t0) * 1000)
            request("DELETE", f"{api}/users/{user}/server")

            def gone():
                c, u = request("GET", f"{api}/users/{user}")
                return c == 200 and "" not in u.get("servers", {})

            wait_until(gone)
        return version, ready_ms, answer_ms
    finally:
        hub.terminate()
        try:
            hub.wait(timeout=15)
        except subprocess.TimeoutExpired:
            hub.kill()
        hub_log.close()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--user", default="allotbench")
    args = ap.parse_args()
    version, ready_ms, answer_ms = hub_start_times(args.n, args.user)
    load = os.getloadavg()
    print(f"jupyterhub {version} LocalProcessSpawner, n={args.n}")
    print(f"  start -> ready:               p50 {statistics.median(ready_ms):7.1f} ms"
          f"  (min {min(ready_ms):.0f}, max {max(ready_ms):.0f})")
    print(f"  start -> 200 through proxy:   p50 {statistics.median(answer_ms):7.1f} ms"
          f"  (min {min(answer_ms):.0f}, max {max(answer_ms):.0f})")
    print(f"  load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
