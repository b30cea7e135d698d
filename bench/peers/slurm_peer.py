#!/usr/bin/env python3
"""A one-node Slurm 22.05 cluster in a scratch dir, for the side-by-side benchmarks.

`scratch_slurm()` starts Debian's munged with a key, socket and logs of its own, writes a
slurm.conf and gres.conf next to them (one node "localhost" with 8 GPUs that are only counted:
Slurm 22.05 drops a GPU without `File=`, so each is a null device made in the scratch dir and
nothing constrains devices; select/cons_tres, sched/backfill, proctrack/linuxproc, task/none, no
accounting, MinJobAge=2 so finished jobs leave the controller), starts slurmctld -D and
slurmd -D, waits until `sinfo` shows the node idle, and on leaving the block, however it is left
(an exception, ^C, SIGTERM turned into SystemExit by the caller), cancels what is left, stops the
daemons and any job step they left behind, and removes the dir. /etc/slurm and the system's
munge are never read for the cluster's config nor changed.

Slurm's daemons and srun bind every address (slurm.conf has no bind address), so the caller
first moves itself into a network namespace of its own with only loopback in it
(`isolate_network()`: re-executes the program under `unshare --net`); the cluster's ports are
picked free on 127.0.0.1 there. Every wait is bounded in time.

Needs root and bench/peers/install.sh (slurmctld, slurmd, slurm-client, munge). On its own it is
a smoke test: it starts the cluster, runs three `srun --gres=gpu:1 true` and 20 sbatch jobs, and
stops. `timed`, `sbatch_many`, `wait_drained` and `failed_jobs` are the streams peers_bench.py
runs through it.

  sudo python3 bench/peers/slurm_peer.py [--gpus 8] [--jobs 20] [--keep]
"""

import argparse
import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

PROGRAMS = ["munged", "mungekey", "slurmctld", "slurmd", "srun", "sbatch", "squeue", "sinfo",
            "scancel", "unshare", "ip"]
NETNS_MARK = "ALLOT_PEERS_NETNS"


def missing_programs(programs=PROGRAMS):
    return [p for p in programs if not shutil.which(p, path=os.environ.get("PATH", "") +
                                                   ":/usr/sbin:/sbin")]


def require_root_and(programs=PROGRAMS):
    """Refuses, in one line, unless root with `programs` installed."""
    if os.geteuid() != 0:
        raise SystemExit("bench/peers: run as root (Slurm's daemons and JupyterHub need it)")
    missing = missing_programs(programs)
    if missing:
        raise SystemExit(f"bench/peers: {', '.join(missing)} missing; run bench/peers/install.sh")


def isolate_network():
    """Re-executes this program in a new network namespace holding only loopback (once)."""
    if os.environ.get(NETNS_MARK) == str(os.getpid()):
        return
    if os.environ.get(NETNS_MARK):
        raise SystemExit("bench/peers: already in an isolated namespace of another process")
    if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0:
        raise SystemExit("bench/peers: `unshare --net` is refused here; a private network "
                         "namespace is what keeps Slurm on loopback")
    os.environ[NETNS_MARK] = "pending"
    argv = [sys.executable, os.path.abspath(sys.argv[0]), *sys.argv[1:]]
    # unshare execs the program in place, so the pid stays the same: the mark names it.
    env = dict(os.environ)
    # glibc's AI_ADDRCONFIG, which Slurm asks for, finds no IPv4 address when 127.0.0.1 is the
    # only one (it does not count it), so lo gets 127.0.0.2 as well: still loopback.
    script = (f'ip link set lo up && ip addr add 127.0.0.2/8 dev lo && '
              f'{NETNS_MARK}=$$ exec "$@"')
    os.execvpe("unshare", ["unshare", "--net", "--", "/bin/sh", "-c", script, "sh", *argv], env)


def in_our_netns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
    except OSError:
        return False


def sweep_netns():
    """Kills every other process left in this private namespace (only this run's, by its pid)."""
    if os.environ.get(NETNS_MARK) != str(os.getpid()):
        return []
    me = os.getpid()
    left = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me
            and in_our_netns(int(p))]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what, step=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(step)
    raise SystemExit(f"slurm_peer: {what} not within {timeout:.0f} s")


SLURM_CONF = """\
# Written by bench/peers/slurm_peer.py for one benchmark run; removed with its dir.
ClusterName=allotbench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd.pid
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd.log
PlugStackConfig={work}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MinJobAge=2
ReturnToService=2
# The node's CPUs are declared, not probed, so that the 8 GPUs are what limits how many
# one-GPU jobs run at once (as on Allot's host), not this machine's core count.
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1024 Gres=gpu:{gpus} State=UNKNOWN
PartitionName=bench Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""

GRES_CONF = "NodeName=localhost Name=gpu Count={gpus} File={work}/dev/gpu[0-{last}]\n"


class SlurmCluster:
    """munged, slurmctld and slurmd in `work`; env: the environment for client commands
    (SLURM_CONF set); run(*argv): a client command there."""

    def __init__(self, work, gpus=8, cpus=None):
        self.work, self.gpus, self.cpus = work, gpus, cpus or max(os.cpu_count(), 2 * gpus)
        self.procs = []
        self.conf = os.path.join(work, "slurm.conf")
        self.jobs_dir = os.path.join(work, "jobs")  # sbatch's slurm-%j.out land here
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def start(self):
        """Starts munged, slurmctld and slurmd; stop() undoes what got started, even halfway."""
        work = self.work
        os.chmod(work, 0o755)  # munged wants its socket's dirs searchable by all
        for d in ("munge", "state", "spool", "jobs", "dev"):
            os.mkdir(os.path.join(work, d), 0o700 if d == "munge" else 0o755)
        key = os.path.join(work, "munge", "munge.key")
        subprocess.run(["mungekey", "--create", "--keyfile", key], check=True,
                       stdout=subprocess.DEVNULL)
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(work, "munge.socket")
        self._start("munged", ["munged", "--foreground", f"--key-file={key}",
                               f"--socket={self.munge_socket}",
                               f"--pid-file={work}/munge/munged.pid",
                               f"--log-file={work}/munge/munged.log",
                               f"--seed-file={work}/munge/munged.seed"])
        wait_for(lambda: os.path.exists(self.munge_socket), 10, "munged's socket")
        # Slurm 22.05 drops a GPU without File= ("Removing file-less GPU"), and wants a device
        # there: each GPU is a character device 1:3, the null device, made in the scratch dir.
        # Nothing constrains devices (task/none), so only the count matters.
        for i in range(self.gpus):
            path = os.path.join(work, "dev", f"gpu{i}")
            try:
                os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            except OSError:
                open(path, "w").close()  # slurmd logs an error for each, and still counts them
        with open(self.conf, "w") as f:
            f.write(SLURM_CONF.format(ctld_port=free_port(), slurmd_port=free_port(),
                                      munge_socket=self.munge_socket, work=work,
                                      cpus=self.cpus, gpus=self.gpus))
        with open(os.path.join(work, "gres.conf"), "w") as f:
            f.write(GRES_CONF.format(gpus=self.gpus, last=self.gpus - 1, work=work))
        open(os.path.join(work, "plugstack.conf"), "w").close()
        self._start("slurmctld", ["slurmctld", "-D", "-f", self.conf])
        self._start("slurmd", ["slurmd", "-D", "-f", self.conf, "-N", "localhost"])
        wait_for(lambda: self.node_state() == "idle", 60, "the node idle in sinfo", step=0.2)

    def _start(self, name, argv):
        log = open(os.path.join(self.work, f"{name}.out"), "w")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True,
                                           env=dict(os.environ, SLURM_CONF=self.conf)))
        log.close()

    def run(self, *argv, timeout=60, check=True):
        r = subprocess.run(argv, env=self.env, cwd=self.jobs_dir, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise SystemExit(f"slurm_peer: {' '.join(argv)} exited {r.returncode}: "
                             f"{r.stderr.strip()[:300]}")
        return r

    def node_state(self):
        for p in self.procs:
            if p.poll() is not None:
                raise SystemExit(f"slurm_peer: {p.args[0]} exited {p.returncode}; see "
                                 f"{self.work}/{p.args[0]}.out and *.log")
        r = self.run("sinfo", "-h", "-N", "-o", "%t", timeout=10, check=False)
        return r.stdout.strip() if r.returncode == 0 else ""

    def queue_length(self):
        """Jobs pending, running or completing (squeue's default states)."""
        return len(self.run("squeue", "-h", "-o", "%i", timeout=30).stdout.split())

    def stop(self):
        with contextlib.suppress(Exception):
            self.run("scancel", "--full", "--user", "root", timeout=10, check=False)
        for p in reversed(self.procs):  # slurmd, slurmctld, munged
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)


def timed(s, argv, n):
    """`n` runs of client command `argv`, each timed from spawn to exit (ms)."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run(argv, env=s.env, cwd=s.jobs_dir, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        out.append((time.perf_counter() - t0) * 1000)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()[:300]}")
    return out


def sbatch_many(s, count, threads=16):
    """`count` `sbatch --gres=gpu:1 --wrap=true` from `threads` threads; how many had to be
    tried again (the controller too busy to answer in time: Slurm's clients say so and exit)."""
    left, retries, errors = [count], [0], []
    lock = threading.Lock()
    argv = ["sbatch", "--gres=gpu:1", "--wrap=true"]

    def worker():
        while True:
            with lock:
                if left[0] == 0 or errors:
                    return
                left[0] -= 1
            for attempt in range(5):
                r = subprocess.run(argv, env=s.env, cwd=s.jobs_dir, capture_output=True,
                                   text=True, timeout=120)
                if r.returncode == 0:
                    break
                with lock:
                    retries[0] += 1
                time.sleep(0.1 * (attempt + 1))
            else:
                errors.append(r.stderr.strip()[:300])

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise SystemExit(f"sbatch failed 5 times: {errors[0]}")
    return retries[0]


def wait_drained(s, timeout, step=0.1):
    """Until squeue lists nothing (every job completed); seconds it took."""
    t0 = time.perf_counter()
    wait_for(lambda: s.queue_length() == 0, timeout, "an empty queue", step=step)
    return time.perf_counter() - t0


def failed_jobs(s):
    """Jobs whose end slurmctld logged with a non-zero status or a signal (no accounting here)."""
    with open(os.path.join(s.work, "slurmctld.log"), errors="replace") as f:
        return sum(1 for line in f if "_job_complete" in line and
                   ("WTERMSIG" in line or ("WEXITSTATUS" in line and
                                           not line.rstrip().endswith("WEXITSTATUS 0"))))


@contextlib.contextmanager
def scratch_slurm(gpus=8, cpus=None, keep=False):
    """A SlurmCluster in a fresh allot-slurm-* dir; stopped and removed (kept if `keep`)
    however the block ends.
    Must run in isolate_network()'s namespace: what the daemons leave behind there is killed."""
    if os.environ.get(NETNS_MARK) != str(os.getpid()):
        raise SystemExit("slurm_peer: call isolate_network() first (Slurm binds every address)")
    work = tempfile.mkdtemp(prefix="allot-slurm-", dir=os.environ.get("ALLOT_BENCH_DIR"))
    cluster = SlurmCluster(work, gpus, cpus)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        # Job steps (slurmstepd) detach from slurmd; nothing of ours may outlive the block.
        for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/exe") == "/usr/sbin/slurmstepd" and \
                        in_our_netns(pid):
                    os.kill(pid, signal.SIGKILL)
        if keep:
            print(f"slurm_peer: kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=20, help="sbatch jobs from 16 threads")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir (logs)")
    args = ap.parse_args()
    require_root_and()
    isolate_network()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with scratch_slurm(args.gpus, keep=args.keep) as s:
            ms = timed(s, ["srun", "--gres=gpu:1", "true"], 3)
            print(f"srun --gres=gpu:1 true: {', '.join(f'{x:.0f}' for x in ms)} ms")
            t0 = time.perf_counter()
            retries = sbatch_many(s, args.jobs)
            wait_drained(s, 120)
            took = time.perf_counter() - t0
            print(f"{args.jobs} sbatch --gres=gpu:1 --wrap=true from 16 threads: all ended after "
                  f"{took:.1f} s ({args.jobs / took:.1f}/s), {retries} retried, "
                  f"{failed_jobs(s)} failed")
            print(f"sinfo: {s.run('sinfo', '-h', '-o', '%N %t %G').stdout.strip()}")
    finally:
        sweep_netns()


if __name__ == "__main__":
    main()
