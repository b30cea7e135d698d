"""A real allotd and one real allot-agent on 127.0.0.1, for the session benchmarks.

allotd keeps its embedded SQLite in a scratch dir; the agent has simulated GPUs and runs the
Jupyter fork server next to it, with workloads as its own user (--run-as-owner off). Loopback
only: nothing here reaches another address. Also the small pieces the benchmarks share: HTTP to
a Jupyter server's Unix socket, percentiles, and a journaled ext4 to hold scratch dirs.
"""

import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time


@contextlib.contextmanager
def journaled_ext4(size_bytes=4 << 30):
    """A fresh journaled ext4 on a loop device (needs root), as the temp dir (tempfile.tempdir) for
    what runs inside; unmounted and removed on the way out, however that is. For benchmarks of
    short jobs: on ext4 without a journal (this project's CI machines) every new inode skips those
    freed in the last seconds, so a stream of jobs slows itself down (docs/benchmarks.md, 2c)."""
    if os.geteuid() != 0:
        raise SystemExit("--journaled-ext4 needs root: it mounts a loop device")
    base = tempfile.mkdtemp(prefix="allot-ext4-")
    os.chmod(base, 0o755)  # as /tmp is to what runs inside: searchable (munged insists)
    image, mount = os.path.join(base, "fs.img"), os.path.join(base, "mnt")
    os.mkdir(mount)
    mounted = False
    saved = tempfile.tempdir
    try:
        with open(os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.truncate(size_bytes)  # sparse: only what is written takes disk
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
        subprocess.run(["mount", "-o", "loop", image, mount], check=True)
        mounted = True
        os.chmod(mount, 0o1777)
        tempfile.tempdir = mount
        yield mount
    finally:
        tempfile.tempdir = saved
        if mounted:
            _unmount(mount)
        subprocess.run(["rm", "-rf", base], check=False)


def _unmount(mount, tries=40):
    """Unmounts `mount`, waiting up to 2 s for processes that still hold files there (a stopped
    agent's standby shim exits once its socket closes, a moment later); then detaches it lazily.
    Quietly: umount's "target is busy" after a benchmark's result line reads like a failure."""
    for _ in range(tries):
        if subprocess.run(["umount", mount], capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.05)
    subprocess.run(["umount", "-l", mount], check=False)


def accepts(port):
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP to the server listening on the Unix socket `path` (a Jupyter server's, directly)."""

    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.unix_path)


def pct(xs, p):
    """The p-th percentile of xs, nearest rank."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def wait_until(pred, timeout=30.0, step=0.002):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise SystemExit("timed out")


class LocalCluster:
    """allotd on a free port and agent "bench" joined to it, a team "ml" and its member "alice".

    procs: the processes, stopped by stop(); cli(token, *args): `allot -o json`; token: alice's.
    """

    def __init__(self, bin_dir, work, cgroup_name, gpus="sim:4xA100", agents=1, config=None,
                 agent_flags=None):
        self.bin = bin_dir
        # Workloads run as the agent's user unless the caller asks otherwise (jobs in images
        # need --run-as-owner required).
        self.agent_flags = agent_flags if agent_flags is not None else ["--run-as-owner", "off"]
        self.work = work
        self.port = free_port()
        self.server = f"http://127.0.0.1:{self.port}"
        self.procs = []
        self.state_dirs = []
        try:
            self._start(cgroup_name, gpus, agents, config)
        except BaseException:
            # A set-up that fails half-way (a timeout, a CLI error) leaves nothing running.
            self.stop()
            raise

    def _start(self, cgroup_name, gpus, agents, config):
        bin_dir, work = self.bin, self.work
        extra = []
        if config:  # allotd.toml text
            with open(os.path.join(work, "allotd.toml"), "w") as f:
                f.write(config)
            extra = ["--config", os.path.join(work, "allotd.toml")]
        self.procs.append(subprocess.Popen(
            [os.path.join(bin_dir, "allotd"), "--listen", f"127.0.0.1:{self.port}", "--data-dir",
             os.path.join(work, "data"), "--heartbeat", "1s", *extra],
            stdout=open(os.path.join(work, "allotd.out"), "w"),
            stderr=open(os.path.join(work, "allotd.err"), "w")))
        token_file = os.path.join(work, "data", "admin.token")
        # allotd writes the token before it listens: wait for both.
        wait_until(lambda: os.path.exists(token_file) and open(token_file).read().strip()
                   and accepts(self.port))
        self.admin = open(token_file).read().strip()
        join = self.cli(self.admin, "host", "join-token", "--uses", str(max(10, agents)))
        self.agent_dir = os.path.join(work, "agent")
        env = dict(os.environ, ALLOT_JOIN_TOKEN=join["token"])
        # The first agent is "bench" (the sessions' host); more are bench-2, bench-3, ...
        names = ["bench"] + [f"bench-{i}" for i in range(2, agents + 1)]
        agent_dirs = []
        for name in names:
            suffix = "" if name == "bench" else name[len("bench"):]
            agent_dirs.append(self.agent_dir + suffix)
            # Job records on tmpfs, as deploy/systemd/allot-agent.service keeps them
            # (/run/allot-agent): /dev/shm here, where /run is not a tmpfs.
            self.state_dirs.append(tempfile.mkdtemp(prefix="allot-agent-state-", dir="/dev/shm"))
            self.procs.append(subprocess.Popen(
                [os.path.join(bin_dir, "allot-agent"), "--server", self.server, "--name", name,
                 "--gpus", gpus, "--work-dir", agent_dirs[-1], "--state-dir",
                 self.state_dirs[-1], "--cgroup-name", cgroup_name + suffix,
                 *self.agent_flags], env=env,
                stdout=open(os.path.join(work, f"agent{suffix}.out"), "w"),
                stderr=open(os.path.join(work, f"agent{suffix}.err"), "w")))
        wait_until(lambda: sum(h["name"] in names and h["admin_state"] == "available"
                               for h in self.cli(self.admin, "host", "list")) == len(names),
                   timeout=60, step=0.2)
        self.cli(self.admin, "team", "create", "ml")
        self.token = self.cli(self.admin, "user", "create", "alice", "--team", "ml")["token"]
        # Each agent's fork server imports Jupyter once after the agent starts: about a second
        # of CPU each. Wait for all of them, or a benchmark of the first seconds measures eight
        # Python imports as well (they took two thirds of both cores in an eight-host run).
        if "--jupyter-forkserver" not in self.agent_flags or \
                self.agent_flags[self.agent_flags.index("--jupyter-forkserver") + 1] != "off":
            sockets = [os.path.join(d, "forkserver", "jupyter.sock") for d in agent_dirs]
            wait_until(lambda: all(os.path.exists(s) for s in sockets), step=0.05)

    def cli(self, token, *args):
        r = subprocess.run([os.path.join(self.bin, "allot"), "--server", self.server, "--token",
                            token, "-o", "json", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"allot {' '.join(args)}: {r.stderr.strip()}")
        return json.loads(r.stdout) if r.stdout.strip() else None

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for d in self.state_dirs:
            shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def scratch_cluster(bin_dir, name, mode=None, gpus="sim:4xA100", agents=1, config=None,
                    agent_flags=None):
    """A LocalCluster in a fresh scratch dir (allot-NAME-*, chmod `mode` when given) with cgroup
    allot-NAME, `agents` agents of `gpus` each and allotd.toml `config`; stopped, and its dir removed, when the block ends, however
    it ends."""
    work = tempfile.mkdtemp(prefix=f"allot-{name}-")
    if mode is not None:
        os.chmod(work, mode)
    cluster = None
    try:
        cluster = LocalCluster(bin_dir, work, f"allot-{name}", gpus, agents, config, agent_flags)
        yield cluster
    finally:
        if cluster:
            cluster.stop()
        # ALLOT_BENCH_KEEP=1 keeps the directory (allotd.err, agent.err) to look at afterwards.
        if not os.environ.get("ALLOT_BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
