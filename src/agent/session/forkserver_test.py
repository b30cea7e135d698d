#!/usr/bin/env python3
"""End-to-end test of allot-jupyter-forkserver: a real root server, real clients as an
unprivileged uid inside a test cgroup, real Jupyter answering over its Unix socket.

Needs root (setuid, cgroups) and jupyter_server for the script's interpreter; exits 77 (ctest
SKIP_RETURN_CODE) otherwise. Waits on conditions with generous deadlines, asserts no timings.

  FORKSERVER=build/bin/allot-jupyter-forkserver python3 src/agent/session/forkserver_test.py
"""

import datetime
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FORKSERVER = os.environ.get("FORKSERVER", os.path.join(HERE, "allot-jupyter-forkserver"))
UID = GID = 4242
TOKEN = "t0ken-" + os.urandom(8).hex()
V1_MEMORY = "/sys/fs/cgroup/memory"
DEADLINE_S = 60  # how long to wait for a condition before failing (never a timing assertion)


def interpreter():
    with open(FORKSERVER) as f:
        return f.readline()[2:].strip()


def why_skip():
    if os.geteuid() != 0:
        return "not root"
    if subprocess.run([interpreter(), "-c", "import jupyter_server.serverapp"],
                      capture_output=True).returncode != 0:
        return f"jupyter_server is not importable by {interpreter()}"
    return ""


def cgroup2_root():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split(" ", 1)[0] == "cgroup2":
                return left.split(" ")[4]
    return ""


def wait_for(cond, what):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(self.unix_path)


def get_status(sock_path, base, token):
    """HTTP status of GET <base>api/status, or None while nothing listens yet."""
    c = UnixHTTPConnection(sock_path)
    try:
        headers = {"Authorization": "token " + token} if token else {}
        c.request("GET", base + "api/status", headers=headers)
        r = c.getresponse()
        r.read()
        return r.status
    except OSError:
        return None
    finally:
        c.close()


def memory_holds(pid, needle):
    """Whether any writable mapping of process `pid` holds the bytes `needle` (read as root)."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
            except (OSError, ValueError, OverflowError):
                continue
    return False


def api(sock_path, method, target, token=TOKEN):
    """(status, parsed JSON body) of one request to Jupyter's REST API."""
    c = UnixHTTPConnection(sock_path)
    try:
        c.request(method, target, body=b"{}" if method == "POST" else None,
                  headers={"Authorization": "token " + token})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


# Run by the fork server's interpreter (jupyter_client), as the kernel's second client: starts a
# long cell, then asks kernel_info on the control channel, as Jupyter's own nudge does, and
# prints "answered" and the date of the kernel's "idle" for that request once it has it, mid-cell.
CONTROL_WHILE_BUSY = """
import sys
from jupyter_client import BlockingKernelClient
c = BlockingKernelClient(connection_file=sys.argv[1])
c.load_connection_file()
# No heartbeat channel: it calls a kernel dead after one beat missed by more than a second,
# which a loaded 2-core CI machine produces ("Kernel died before replying to kernel_info").
# The 60 s deadline still catches a kernel that really died.
c.start_channels(hb=False)
c.wait_for_ready(timeout=60)
cell = c.execute("import time; time.sleep(60)")
def until(parent, state):
    while True:
        m = c.get_iopub_msg(timeout=60)
        if (m["msg_type"] == "status" and m["parent_header"].get("msg_id") == parent
                and m["content"]["execution_state"] == state):
            return m
until(cell, "busy")
info = c.session.msg("kernel_info_request")
c.control_channel.send(info)
idle = until(info["header"]["msg_id"], "idle")
print("answered", idle["header"]["date"].isoformat(), flush=True)
sys.stdin.read()
"""


def proc_field(pid, name):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split()[1:]
    except (FileNotFoundError, ProcessLookupError):
        # ProcessLookupError: it went away between open() and read().
        return None


def gone(pid):
    state = proc_field(pid, "State")
    return state is None or state[0] == "Z"


class ForkServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="allot-forkserver-test-")
        os.chmod(cls.tmp, 0o755)  # root-owned socket directory the unprivileged client can enter
        cls.home = os.path.join(cls.tmp, "home")
        os.mkdir(cls.home, 0o700)
        os.chown(cls.home, UID, GID)
        # The user's own configuration imports a module from the user's site-packages, as a
        # pip --user server extension would: both must work in a forked child as in a plain exec.
        ver = subprocess.run(
            [interpreter(), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
        user_site = os.path.join(cls.home, ".local", "lib", f"python{ver}", "site-packages")
        os.makedirs(user_site)
        with open(os.path.join(user_site, "allot_usersite_probe.py"), "w") as f:
            f.write("import os\nwith open(os.path.join(os.environ['HOME'], 'probe'), 'w') as f:\n"
                    "    f.write(str(os.getuid()))\n")
        os.makedirs(os.path.join(cls.home, ".jupyter"))
        with open(os.path.join(cls.home, ".jupyter", "jupyter_server_config.py"), "w") as f:
            f.write("import allot_usersite_probe  # noqa\n")
        for d, _, files in os.walk(cls.home):
            for n in [d, *(os.path.join(d, f) for f in files)]:
                os.chown(n, UID, GID)
        cls.sock = os.path.join(cls.tmp, "fork.sock")
        cls.cgroup = ""
        root = cgroup2_root()
        if root:
            cls.cgroup = os.path.join(root, f"allot-forkserver-test-{os.getpid()}")
            os.mkdir(cls.cgroup)
        # On a v1 or hybrid host, a memory group of the clients' own as well: the sessions must
        # land in it, not in the server's (which is the agent's on a real host).
        cls.memory_cgroup = ""
        if os.path.isdir(V1_MEMORY):
            cls.memory_cgroup = os.path.join(V1_MEMORY, f"allot-forkserver-test-{os.getpid()}")
            os.mkdir(cls.memory_cgroup)
        # What the agent records of a session job: its shim (here this test process, the clients'
        # parent) and its command. The server serves only peers whose parent is such a shim.
        cls.jobs = os.path.join(cls.tmp, "jobs")
        os.makedirs(os.path.join(cls.jobs, "1"))
        with open(f"/proc/{os.getpid()}/stat") as f:
            ticks = int(f.read().rpartition(")")[2].split()[19])
        with open(os.path.join(cls.jobs, "1", "shim.json"), "w") as f:
            json.dump({"pid": os.getpid(), "start_ticks": ticks}, f)
        with open(os.path.join(cls.jobs, "1", "spec.json"), "w") as f:
            json.dump({"command": [FORKSERVER, "run", "--socket", cls.sock], "session": True}, f)
        cls.log_path = os.path.join(cls.tmp, "server.log")
        cls.log = open(cls.log_path, "w")
        # A neutral environment: a value captured at import must not point into /root.
        cls.server = subprocess.Popen(
            [FORKSERVER, "serve", "--socket", cls.sock, "--jobs-dir", cls.jobs, "--kill-grace",
             "1", "--request-timeout", "1"], stdin=subprocess.DEVNULL,
            stdout=cls.log, stderr=cls.log,
            env={"HOME": "/nonexistent", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        cls.clients = []
        cls.client_names = {}  # pid: the name its stderr file has
        try:
            wait_for(lambda: "listening on" in cls.server_log() or cls.server.poll() is not None,
                     "the fork server to listen")
            assert cls.server.poll() is None, cls.server_log()
        except BaseException:
            cls.tearDownClass()  # unittest skips it when setUpClass fails
            raise

    @classmethod
    def tearDownClass(cls):
        for p in cls.clients:
            if p.poll() is None:
                p.kill()
                p.wait()
        if cls.cgroup:
            # The server stops (and reaps) the sessions of killed clients; only then stop it, so
            # that nothing is left to be reparented.
            try:
                wait_for(lambda: not cls.cgroup_pids(), "the sessions to end")
            except AssertionError:
                for pid in cls.cgroup_pids():
                    os.kill(pid, signal.SIGKILL)  # this test's own processes
                wait_for(lambda: not cls.cgroup_pids(), "the test cgroup to empty")
        cls.server.terminate()
        cls.server.wait()
        cls.log.close()
        if cls.cgroup:
            os.rmdir(cls.cgroup)
        if cls.memory_cgroup:
            os.rmdir(cls.memory_cgroup)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def cgroup_pids(cls):
        with open(os.path.join(cls.cgroup, "cgroup.procs")) as f:
            return [int(p) for p in f.read().split()]

    @classmethod
    def server_log(cls):
        with open(cls.log_path) as f:
            return f.read()

    def start_client(self, name, socket_path=None, extra=(), wrapper=()):
        """Starts a client as UID:GID in the test cgroups; returns (Popen, jupyter socket, base).
        wrapper: a command that runs the client as its child (not a session job's main
        process)."""
        jsock = os.path.join(self.home, f"{name}.sock")
        base = f"/sessions/{name}/"
        groups = [g for g in (self.cgroup, self.memory_cgroup) if g]

        def become_owner():
            # What the agent's job shim does: join the job's cgroups, then drop to the owner.
            for g in groups:
                with open(os.path.join(g, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            os.setgroups([])
            os.setgid(GID)
            os.setuid(UID)

        with open(os.path.join(self.tmp, f"{name}.err"), "w") as err:
            p = subprocess.Popen(
                [*wrapper, FORKSERVER, "run", "--socket", socket_path or self.sock, *extra, "--",
                 f"--ServerApp.sock={jsock}", "--ServerApp.sock_mode=0600",
                 f"--ServerApp.base_url={base}", "--no-browser"],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=self.home,
                preexec_fn=become_owner, start_new_session=bool(wrapper),
                env={"HOME": self.home, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                     "JUPYTER_TOKEN": TOKEN})
        self.clients.append(p)
        self.client_names[p.pid] = name
        return p, jsock, base

    def client_err(self, name):
        with open(os.path.join(self.tmp, f"{name}.err")) as f:
            return f.read()

    def child_of(self, client):
        """The session child's pid, from the server's log line for this client."""
        def find():
            m = re.search(rf"session pid (\d+) .*\(client pid {client.pid}\)", self.server_log())
            return int(m.group(1)) if m else None
        return wait_for(find, f"the server to fork for client {client.pid}")

    def wait_ready(self, client, jsock, base, name):
        def ready():
            if client.poll() is not None:
                raise AssertionError(f"client exited {client.returncode}: "
                                     f"{self.client_err(name)}")
            return get_status(jsock, base, TOKEN) == 200
        wait_for(ready, f"{base}api/status to answer 200")

    def stop(self, client, child):
        client.send_signal(signal.SIGTERM)
        try:
            code = client.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"client {client.pid} still runs {DEADLINE_S} s after SIGTERM; "
                                 f"its stderr:\n{self.client_err(self.client_names[client.pid])}")
        # jupyter_server stops cleanly on SIGTERM (0); 143 if the child died of it.
        self.assertIn(code, (0, 143))
        if child:
            wait_for(lambda: gone(child), f"session child {child} to end")

    def test_session_runs_as_owner_in_its_cgroup(self):
        probe = os.path.join(self.home, "probe")
        if os.path.exists(probe):
            os.unlink(probe)  # other sessions share this home
        client, jsock, base = self.start_client("7")
        self.wait_ready(client, jsock, base, "7")
        self.assertEqual(get_status(jsock, base, ""), 403)
        child = self.child_of(client)
        self.assertEqual(proc_field(child, "Uid"), [str(UID)] * 4)
        self.assertEqual(proc_field(child, "Gid"), [str(GID)] * 4)
        self.assertEqual(proc_field(child, "Groups"), [])
        self.assertEqual(proc_field(child, "NoNewPrivs"), ["1"])
        if self.cgroup:
            with open(f"/proc/{child}/cgroup") as f:
                self.assertIn("0::/" + os.path.basename(self.cgroup) + "\n", f.read())
        # Every hierarchy, v1 ones included (memory, cpu, devices: where a job's limits and GPU
        # filter live on a v1 or hybrid host), is the client's, not the server's.
        with open(f"/proc/{child}/cgroup") as f, open(f"/proc/{client.pid}/cgroup") as g:
            self.assertEqual(sorted(f.read().splitlines()), sorted(g.read().splitlines()))
        if self.memory_cgroup:
            with open(os.path.join(self.memory_cgroup, "cgroup.procs")) as f:
                self.assertIn(str(child), f.read().split())
        st = os.stat(jsock)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (UID, 0o600))
        # The token reaches Jupyter through the environment only: not in ps, not in the log.
        with open(f"/proc/{child}/cmdline", "rb") as f:
            self.assertNotIn(TOKEN.encode(), f.read())
        self.assertNotIn(TOKEN, self.server_log())
        # Nor in the server's memory, of which every later child (another user's session,
        # running their code) is a copy: the environment went to this child alone.
        self.assertFalse(memory_holds(self.server.pid, TOKEN.encode()))
        # Single-threaded server: nothing it forks can inherit a lock held by another thread.
        self.assertEqual(len(os.listdir(f"/proc/{self.server.pid}/task")), 1)
        with open(probe) as f:
            self.assertEqual(f.read(), str(UID))  # user config and user site-packages loaded
        self.stop(client, child)

    def test_two_sessions_side_by_side(self):
        a, asock, abase = self.start_client("a")
        b, bsock, bbase = self.start_client("b")
        self.wait_ready(a, asock, abase, "a")
        self.wait_ready(b, bsock, bbase, "b")
        ca, cb = self.child_of(a), self.child_of(b)
        self.assertNotEqual(ca, cb)
        self.stop(a, ca)
        self.assertEqual(get_status(bsock, bbase, TOKEN), 200)  # b is unaffected
        self.stop(b, cb)

    def test_killed_client_ends_its_session(self):
        client, jsock, base = self.start_client("k")
        self.wait_ready(client, jsock, base, "k")
        child = self.child_of(client)
        client.kill()  # no chance to forward anything: the server sees the connection close
        client.wait()
        wait_for(lambda: gone(child), "the server to stop the orphaned session")

    def test_session_that_ignores_sigterm_is_killed(self):
        client, jsock, base = self.start_client("s")
        self.wait_ready(client, jsock, base, "s")
        child = self.child_of(client)
        os.kill(child, signal.SIGSTOP)  # a stopped process cannot act on SIGTERM; SIGKILL works
        client.kill()
        client.wait()
        wait_for(lambda: gone(child), "SIGKILL after the grace period (1 s in this test)")

    def test_connection_without_request_is_closed(self):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        s.settimeout(DEADLINE_S)
        self.assertIn(b"no complete request", s.recv(4096))  # and the server still serves
        s.close()

    def test_falls_back_to_plain_jupyter_without_server(self):
        client, jsock, base = self.start_client(
            "f", socket_path=os.path.join(self.tmp, "absent.sock"))
        self.wait_ready(client, jsock, base, "f")
        self.assertIn("starting plain jupyter-server", self.client_err("f"))
        self.stop(client, None)

    def check_kernel_stays_busy_through_a_control_request(self, name, socket_path=None):
        """ipykernel answers control requests mid-cell with a "busy" and an "idle" status of
        their own; Debian's jupyter_server 1.x took that "idle" as the kernel's state, so a
        session looked idle (and was culled) while a cell ran."""
        client, jsock, base = self.start_client(name, socket_path=socket_path)
        self.wait_ready(client, jsock, base, name)
        status, kernel = api(jsock, "POST", base + "api/kernels")
        self.assertEqual(status, 201, kernel)
        conn = os.path.join(self.home, ".local", "share", "jupyter", "runtime",
                            f"kernel-{kernel['id']}.json")
        wait_for(lambda: os.path.exists(conn), "the kernel's connection file")
        other = subprocess.Popen([interpreter(), "-c", CONTROL_WHILE_BUSY, conn],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            word, _, date = other.stdout.readline().strip().partition(" ")
            self.assertEqual(word, "answered")
            sent = datetime.datetime.fromisoformat(date)

            # The server reads IOPub on a socket of its own and may still be behind this
            # client. It stamps each message with the time it takes it in, which for the
            # "idle" is later than the kernel's date on it: once its stamp is that late, it has
            # taken in that "idle" or is one message short of it.
            def kernel_after_idle():
                k = api(jsock, "GET", base + f"api/kernels/{kernel['id']}")[1]
                return k if datetime.datetime.fromisoformat(k["last_activity"]) >= sent else None
            k = wait_for(kernel_after_idle, "the server to take in the kernel's idle status")
            self.assertEqual(k["execution_state"], "busy")
        finally:
            other.kill()
            other.wait()
            other.stdin.close()
            other.stdout.close()
        self.stop(client, None)

    def test_kernel_stays_busy_through_a_control_request(self):
        self.check_kernel_stays_busy_through_a_control_request("busy")

    def test_kernel_stays_busy_through_a_control_request_without_server(self):
        self.check_kernel_stays_busy_through_a_control_request(
            "busy-plain", socket_path=os.path.join(self.tmp, "absent.sock"))

    def test_process_that_is_not_a_session_job_is_refused(self):
        # A job's other processes (here: a child of the session's main process) get no Jupyter
        # from the fork server; the client falls back to a plain exec in its own cgroups.
        client, jsock, base = self.start_client(
            "n", wrapper=["/bin/sh", "-c", '"$0" "$@"; exit $?'])
        wait_for(lambda: "refused: the peer is not the main process" in self.client_err("n"),
                 "the client to be refused")
        self.assertIn("refused a request: the peer is not the main process", self.server_log())
        # The wrapper, the client and the plain Jupyter it fell back to: all of its group.
        os.killpg(client.pid, signal.SIGKILL)
        client.wait()

    def send_raw(self, pieces):
        """Sends each (bytes, descriptor count) piece as a client of our own making would, with
        /dev/null as every descriptor; the server's first answer."""
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        s.settimeout(DEADLINE_S)
        devnull = os.open("/dev/null", os.O_RDWR)
        try:
            for data, fds in pieces:
                socket.send_fds(s, [data], [devnull] * fds)
            return s.recv(4096)
        finally:
            os.close(devnull)
            s.close()

    def test_deeply_nested_request_is_refused_and_the_server_lives(self):
        self.assertIn(b"nested too deeply", self.send_raw([(b"[" * 200000 + b"\n", 4)]))
        self.assertIsNone(self.server.poll())
        client, jsock, base = self.start_client("after-deep")  # and it still serves
        self.wait_ready(client, jsock, base, "after-deep")
        self.stop(client, self.child_of(client))

    def test_descriptors_past_four_are_refused_before_a_newline(self):
        # Attack: any local user may connect (the socket is 0666) and send descriptors a byte at
        # a time, never a newline, to run the server out of them.
        self.assertIn(b"more than 4 file descriptors", self.send_raw([(b"{", 3), (b" ", 3)]))
        self.assertIsNone(self.server.poll())

    def test_token_on_the_command_line_is_refused(self):
        err = subprocess.run([FORKSERVER, "run", "--socket", self.sock, "--",
                              "--ServerApp.token=x"], capture_output=True, text=True)
        self.assertNotEqual(err.returncode, 0)
        self.assertIn("JUPYTER_TOKEN", err.stderr)

    def serve_until_listening(self, socket_path, tmpdir):
        """A second fork server on `socket_path` with TMPDIR=`tmpdir`, stopped (SIGTERM) once it
        listens; its log."""
        log_path = socket_path + ".log"
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                [FORKSERVER, "serve", "--socket", socket_path, "--jobs-dir", self.jobs],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env={"HOME": "/nonexistent", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                     "TMPDIR": tmpdir})

            def listening():
                with open(log_path) as f:
                    return "listening on" in f.read() or server.poll() is not None
            try:
                wait_for(listening, "the fork server to listen")
            finally:
                server.terminate()
                server.wait()
        with open(log_path) as f:
            return f.read()

    def test_discovery_stays_in_the_socket_directory_and_is_removed(self):
        # Discovery runs each app's initialize() in a throw-away directory; it lives next to the
        # socket (the agent's, cleaned by it), never in /tmp, and a fork server starting where a
        # killed one left such a directory removes it.
        work = tempfile.mkdtemp(prefix="allot-fs-work-", dir=self.tmp)
        os.chmod(work, 0o755)
        stale = os.path.join(work, "allot-forkserver-discover-stale")
        os.mkdir(stale)
        scratch = tempfile.mkdtemp(prefix="allot-fs-tmp-", dir=self.tmp)
        log = self.serve_until_listening(os.path.join(work, "fork.sock"), scratch)
        self.assertIn("listening on", log)
        self.assertEqual(os.listdir(scratch), [], "nothing in TMPDIR")
        self.assertFalse(os.path.exists(stale), "a killed predecessor's directory is removed")
        self.assertFalse([n for n in os.listdir(work) if n.startswith("allot-forkserver-")])

    def test_discovery_under_a_private_directory_still_preloads(self):
        # A scratch agent's directory may be 0700: nobody (the discovery child) cannot reach it,
        # so discovery goes to TMPDIR instead, and still finds modules to preload.
        private = tempfile.mkdtemp(prefix="allot-fs-private-", dir=self.tmp)  # 0700
        scratch = tempfile.mkdtemp(prefix="allot-fs-tmp-", dir=self.tmp)
        os.chmod(scratch, 0o755)
        log = self.serve_until_listening(os.path.join(private, "fork.sock"), scratch)
        found = re.search(r"\((\d+) preloaded from initialize\(\)", log)
        self.assertTrue(found and int(found.group(1)) > 0, log)
        self.assertEqual(os.listdir(scratch), [])

if __name__ == "__main__":
    reason = why_skip()
    if reason:
        print(f"SKIP: {reason}")
        sys.exit(77)
    unittest.main()
